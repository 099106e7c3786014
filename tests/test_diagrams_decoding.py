"""What lessons 07-08's diagrams say (course_lib.diagrams.decoding), read back from the figures and checked against
the computation: teacher forcing's input is shift_right of the labels, each label the input of the next position,
and the two mask conventions are each other's negation and give the same weights."""

from __future__ import annotations

import re

import numpy as np
import torch
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from course_lib import reversal_task as rt
from course_lib.attention import causal_mask
from course_lib.diagrams import DIAGRAMS
from course_lib.diagrams import decoding as pictures
from course_lib.diagrams.draw import COLOURS
from course_lib.encoder_decoder import shift_right
from course_lib.statquest import blocked_mask


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_registered():
    for name in ("teacher_forcing", "mask_conventions"):
        assert DIAGRAMS[name] is getattr(pictures, name)


def test_teacher_forcing_input_is_the_labels_shifted_right():
    texts = _texts(pictures.teacher_forcing())
    tokens = [t for t in texts if t in rt.TOKENS]  # drawing order: label t, then input t, for each t; then the grid
    T = len(pictures.FORCING_SOURCE) + 1
    labels, inputs = tokens[0 : 2 * T : 2], tokens[1 : 2 * T : 2]
    assert labels == list(pictures.FORCING_SOURCE[::-1]) + ["<eos>"]  # the reversed digits, then <eos>
    assert inputs[0] == "<bos>" and inputs[1:] == labels[:-1]  # by hand: each label is the next position's input
    ids = torch.tensor([[rt.TOKENS.index(t) for t in labels]])
    assert [rt.TOKENS[i] for i in shift_right(ids, rt.BOS_ID)[0].tolist()] == inputs
    assert tokens[2 * T :] == inputs  # the mask grid's columns are the inputs
    assert [f"pos {t}" for t in range(T)] == [t for t in texts if re.fullmatch(r"pos \d", t)][:T]


def test_teacher_forcing_grid_is_the_causal_mask():
    fig = pictures.teacher_forcing()
    cells = [p for p in fig.findobj(Rectangle) if p.get_width() == 0.55]
    T = len(pictures.FORCING_SOURCE) + 1
    assert len(cells) == T * T
    seen = np.array([np.allclose(p.get_facecolor()[:3], _rgb(COLOURS["norm"][0])) for p in cells]).reshape(T, T)
    assert (seen == causal_mask(T).numpy()).all()


def _rgb(colour: str) -> tuple[float, float, float]:
    return tuple(int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))


def test_mask_conventions_are_negations_with_the_same_weights():
    texts = _texts(pictures.mask_conventions())
    flags = [t == "True" for t in texts if t in ("True", "False")]
    T = pictures.MASK_SCORES.shape[0]
    tutorial, course = np.array(flags[: T * T]).reshape(T, T), np.array(flags[T * T : 2 * T * T]).reshape(T, T)
    assert (tutorial == blocked_mask(T).numpy()).all() and (course == causal_mask(T).numpy()).all()
    assert (tutorial == ~course).all() and course[0].tolist() == [True, False, False, False]
    drawn = np.array([float(t) for t in texts if re.fullmatch(r"\d\.\d\d", t)]).reshape(T, T)
    scores = torch.tensor(pictures.MASK_SCORES, dtype=torch.float32)
    # Independent of both conventions: PyTorch's causal attention with q = the scores and k = v = the identity gives
    # q kᵀ = the scores, and weights @ v = the weights.
    eye = torch.eye(T)[None]
    expected = torch.nn.functional.scaled_dot_product_attention(scores[None], eye, eye, is_causal=True, scale=1.0)[0]
    expected = expected.numpy()
    assert np.allclose(drawn, np.round(expected, 2), atol=0.006)
    assert np.allclose(drawn.sum(axis=1), 1, atol=0.02) and (drawn[np.triu_indices(T, 1)] == 0).all()
    numbers = pictures.mask_weights()
    assert np.allclose(numbers["tutorial"], numbers["course"], atol=0)  # e^(-1e9) is exactly 0 in float32
    assert "largest difference: 0" in texts
