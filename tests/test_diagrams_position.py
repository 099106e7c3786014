"""What lesson 03's diagrams say (course_lib.diagrams.position), read back from the figures and checked against the
computation: the table is the sinusoidal encoding with one (sin, cos) pair per clock hand at 10000^(−2i/8), and
RoPE's arrows are apply_rope's rotations, whose dot products depend on the offset only."""

from __future__ import annotations

import math
import re

import numpy as np
import torch
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text

from course_lib import position
from course_lib.diagrams import DIAGRAMS
from course_lib.diagrams import position as pictures


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_registered():
    for name in ("sinusoidal_table", "rope_rotation"):
        assert DIAGRAMS[name] is getattr(pictures, name)


def test_table_is_the_sinusoidal_encoding_read_by_pairs():
    fig = pictures.sinusoidal_table()
    texts = _texts(fig)
    drawn = np.array([float(t) for t in texts if re.fullmatch(r"-?\d\.\d\d", t)]).reshape(8, 8)
    # Independent of the course's function: the formula, written out in float64.
    p, i = np.arange(8)[:, None], np.arange(4)[None, :]
    angle = p / 10000.0 ** (2 * i / 8)
    expected = np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(8, 8)  # sin in 2i, cos in 2i + 1
    assert np.allclose(drawn, np.round(expected, 2), atol=0.006)
    assert np.allclose(expected, position.sinusoidal_position_encoding(8, 8).numpy(), atol=1e-6)
    speeds = [float(s) for s in re.findall(r"pair \d\nω = ([\d.]+)", "\n".join(texts))]
    assert speeds == [1.0, 0.1, 0.01, 0.001] == [round(10000.0 ** (-2 * k / 8), 6) for k in range(4)]
    turns = [float(t.replace(",", "")) for t in re.findall(r"one turn every ([\d,.]+)", "\n".join(texts))]
    assert np.allclose(turns, [2 * math.pi / s for s in speeds], rtol=0, atol=0.051)  # one decimal
    # The dots and squares of each curve panel are the table's two columns of that pair.
    markers = [line for line in fig.findobj(Line2D) if line.get_marker() in ("o", "s")]
    assert len(markers) == 8
    for k, line in enumerate(markers):
        assert np.allclose(line.get_ydata(), expected[:, k], atol=1e-6)  # (o, s) per pair: channels 2i, 2i + 1


def _arrows(panel) -> list[np.ndarray]:
    return [np.array(a.xy) for a in panel.findobj(Annotation) if not a.get_text()]


def test_rope_arrows_are_apply_rope_and_pair_one_turns_ten_times_slower():
    fig = pictures.rope_rotation()
    left, slow = fig.axes[0], fig.axes[1]
    vector = torch.tensor(pictures.ROPE_VECTOR)
    for panel, pair, positions in ((left, 0, [0, 1, 2, 3]), (slow, 1, [0, 10, 20, 30])):
        assert pictures.ROPE_POSITIONS[pair] == positions
        tips = _arrows(panel)
        assert len(tips) == 4
        for tip, p in zip(tips, positions, strict=True):
            theta = p * 10000.0 ** (-2 * pair / 8)  # by hand: pair i turns by p * base^(-2i/D)
            a, b = pictures.ROPE_VECTOR[2 * pair : 2 * pair + 2]
            turned = [a * math.cos(theta) - b * math.sin(theta), a * math.sin(theta) + b * math.cos(theta)]
            assert np.allclose(tip, turned, atol=1e-5)
            rotated = position.apply_rope(vector.expand(p + 1, 8))[p, 2 * pair : 2 * pair + 2]
            assert np.allclose(tip, rotated.numpy(), atol=1e-5)
            assert np.isclose(np.linalg.norm(tip), math.hypot(a, b), atol=1e-5)  # a rotation keeps the length
    assert np.allclose(_arrows(left), _arrows(slow), atol=1e-4)  # pair 1 at 10p is where pair 0 is at p
    assert any(f"p={p}" in _texts(slow) for p in (10, 20, 30))


def test_rope_scores_depend_on_the_offset_only():
    fig = pictures.rope_rotation()
    scores = [float(s) for s in re.findall(r"n − m = 2:  q · k = (-?\d\.\d+)", "\n".join(_texts(fig)))]
    assert len(scores) == 2 and scores[0] == scores[1]
    q, k = (torch.tensor(v) for v in pictures.ROPE_QUERY_KEY)

    def score(m: int, n: int) -> float:
        return float(position.apply_rope(q.expand(m + 1, 2))[m] @ position.apply_rope(k.expand(n + 1, 2))[n])

    assert [(m, n) for m, n in pictures.ROPE_OFFSETS] == [(0, 2), (3, 5)]
    assert np.isclose(scores[0], score(0, 2), atol=6e-4) and np.isclose(score(0, 2), score(3, 5), atol=1e-5)
    assert not np.isclose(score(0, 2), score(0, 3), atol=1e-2)  # another offset, another score
    for panel, (m, n) in zip(fig.axes[2:], pictures.ROPE_OFFSETS, strict=True):
        tip_q, tip_k = _arrows(panel)
        assert np.allclose(tip_q, position.apply_rope(q.expand(m + 1, 2))[m].numpy(), atol=1e-5)
        assert np.allclose(tip_k, position.apply_rope(k.expand(n + 1, 2))[n].numpy(), atol=1e-5)
