"""Lessons 07 and 08: teacher forcing's shifted decoder input, and the two conventions for a causal mask.

The tokens and numbers in the pictures are computed with the course's own functions (course_lib.encoder_decoder,
course_lib.reversal_task, course_lib.attention, course_lib.statquest); tests/test_diagrams_decoding.py reads them
back from the figures and checks them against the computation.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_lib import reversal_task as rt
from course_lib.attention import causal_mask
from course_lib.diagrams.draw import COLOURS, FONT, INK, arrow, box, canvas
from course_lib.encoder_decoder import shift_right
from course_lib.statquest import blocked_mask

__all__ = [
    "teacher_forcing",
    "mask_conventions",
    "FORCING_SOURCE",
    "forcing_rows",
    "MASK_SCORES",
    "mask_weights",
]

FORCING_SOURCE = "4071"  # lesson 07's running example: the decoder must write 1704 <eos>
# Lesson 08's picture: the scores of 4 positions (seeded, two decimals, so the PNG is fixed).
MASK_SCORES = np.round(np.random.default_rng(8).normal(size=(4, 4)), 2)


def forcing_rows(source: str = FORCING_SOURCE) -> tuple[list[str], list[str]]:
    """(labels, decoder input) of one source string as tokens: the labels of reversal_batch and shift_right's input."""
    _, labels = rt.reversal_batch([source])  # (1, T): reversed digits, then <eos>
    decoder_input = shift_right(labels, rt.BOS_ID)  # (1, T): <bos>, then the labels without the last
    return [rt.TOKENS[i] for i in labels[0].tolist()], [rt.TOKENS[i] for i in decoder_input[0].tolist()]


def teacher_forcing() -> Figure:
    """Lesson 07: the decoder's input is the labels shifted right (<bos> first, the last label dropped). Position t
    reads the input tokens 0..t — <bos> and labels 0..t−1, the causal mask hides the rest — and is trained to
    predict label t; every position trains in the same pass."""
    labels, inputs = forcing_rows()
    T = len(labels)
    fig, ax = canvas(10.6, 4.6, (-3.4, 12.2), (-4.2, 2.6))
    step = 1.5
    ax.text(-3.3, 1.9, "labels: what the decoder must write", ha="left", va="center", fontsize=FONT,
            weight="bold", color=INK)  # fmt: skip
    ax.text(-3.3, -2.55, "decoder input = shift_right(labels, <bos>)", ha="left", va="center", fontsize=FONT,
            weight="bold", color=INK)  # fmt: skip
    for t in range(T):
        x = step * t
        box(ax, x, 1.2, 1.1, 0.6, labels[t], "attention")
        box(ax, x, -1.85, 1.1, 0.6, inputs[t], "bos" if t == 0 else "token")
        box(ax, x, -0.35, 1.1, 0.7, f"pos {t}", "output", size=9.5)
        arrow(ax, [(x, -1.55), (x, -0.7)], width=1.2)  # input t enters position t
        arrow(ax, [(x, 0.0), (x, 0.9)], width=1.2)  # position t predicts label t
        if t + 1 < T:  # label t becomes the input of position t + 1
            arrow(ax, [(x + 0.45, 0.9), (x + step - 0.45, -1.55)], color=COLOURS["attention"][1], width=1.0)
    ax.text(-3.3, -0.35, "causal decoder", ha="left", va="center", fontsize=9.5, color=INK)
    ax.text(-3.3, 1.2, "predicted at\nposition t", ha="left", va="center", fontsize=8.5, color="#555555")
    last = step * (T - 1)
    grid_left, size = last + 2.3, 0.55  # which inputs each position sees: the causal mask
    for i in range(T):
        ax.text(grid_left - 0.1, 1.0 - size * (i + 0.5), f"pos {i}", ha="right", va="center", fontsize=8)
        ax.text(grid_left + size * (i + 0.5), 1.05, inputs[i], ha="left", va="bottom", fontsize=8, rotation=50)
        for j in range(T):
            seen = j <= i
            ax.add_patch(Rectangle((grid_left + size * j, 1.0 - size * (i + 1)), size, size, edgecolor="#999999",
                                   facecolor=COLOURS["norm"][0] if seen else "#eeeeee", linewidth=0.8))  # fmt: skip
    ax.text(grid_left + size * T / 2, 1.0 - size * T - 0.15, "position ↓ sees input →\n(the causal mask)",
            ha="center", va="top", fontsize=8.5)  # fmt: skip
    ax.text(3.4, 1.9, "orange arrows: label t is the input of position t + 1", ha="left", va="center", fontsize=9,
            color=COLOURS["attention"][1])  # fmt: skip
    ax.text(
        -3.3,
        -3.6,
        f"Position t sees <bos> and labels 0..t−1 and predicts label t: pos 0 reads only <bos> and must write "
        f"{labels[0]}; pos {T - 1} reads\n{' '.join(inputs)} and must write {labels[-1]}. All {T} predictions are "
        "trained in one pass, each from the right previous tokens.",
        ha="left",
        va="center",
        fontsize=9.5,
        color=INK,
    )
    return fig


def mask_weights() -> dict[str, np.ndarray]:
    """Lesson 08's two conventions on MASK_SCORES: the tutorial's (True = blocked, filled with −1e9) and the course's
    (True = may attend, the rest −inf); both give the same weights."""
    scores = torch.tensor(MASK_SCORES, dtype=torch.float32)  # (T, T)
    T = scores.shape[0]
    blocked, allowed = blocked_mask(T), causal_mask(T)
    tutorial = scores.masked_fill(blocked, -1e9).softmax(dim=-1)
    course = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    return {"blocked": blocked.numpy(), "allowed": allowed.numpy(), "tutorial": tutorial.numpy(),
            "course": course.numpy()}  # fmt: skip


def _grid(ax, left: float, top: float, cells: list[list[str]], fills: list[list[str]], title: str) -> None:
    size = 0.9
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            ax.add_patch(Rectangle((left + size * j, top - size * (i + 1)), size, size, facecolor=fills[i][j],
                                   edgecolor="#999999", linewidth=0.9))  # fmt: skip
            ax.text(left + size * (j + 0.5), top - size * (i + 0.5), text, ha="center", va="center", fontsize=8.5,
                    color=INK)  # fmt: skip
    ax.text(left + size * len(cells[0]) / 2, top + 0.2, title, ha="center", va="bottom", fontsize=9.5, color=INK)


def mask_conventions() -> Figure:
    """Lesson 08: StatQuest's tutorial marks the *blocked* pairs (True above the diagonal) and fills their scores with
    −1e9; this course marks the pairs that *may attend* (True on and below the diagonal) and fills the others with
    −inf. One mask is the negation of the other, and the softmax gives the same weights."""
    w = mask_weights()
    T = w["blocked"].shape[0]
    grey, green, red = "#eeeeee", COLOURS["norm"][0], COLOURS["cross"][0]
    fig, ax = canvas(11.4, 3.6, (-0.9, 20.2), (-5.4, 1.25))
    tutorial = [["True" if b else "False" for b in row] for row in w["blocked"]]
    _grid(ax, 0.0, 0.0, tutorial, [[red if b else grey for b in row] for row in w["blocked"]],
          "StatQuest's tutorial: True = blocked")  # fmt: skip
    course = [["True" if a else "False" for a in row] for row in w["allowed"]]
    _grid(ax, 5.0, 0.0, course, [[green if a else grey for a in row] for row in w["allowed"]],
          "this course's mask: True = may attend")  # fmt: skip
    weights = [[f"{v:.2f}" for v in row] for row in w["course"]]
    _grid(ax, 10.6, 0.0, weights, [[green if a else grey for a in row] for row in w["allowed"]],
          "the weights, either way")  # fmt: skip
    ax.text(4.5, -1.8, "= ~", ha="center", va="center", fontsize=14, color=INK)
    ax.text(10.05, -1.8, "→", ha="center", va="center", fontsize=16, color=INK)
    notes = (
        "masked_fill(mask, -1e9)",
        "masked_fill(~mask, -inf)",
        f"largest difference: {np.abs(w['tutorial'] - w['course']).max():g}",
    )
    for left, note in zip((0.0, 5.0, 10.6), notes, strict=True):
        ax.text(left + 1.8, -3.95, note, ha="center", va="center", fontsize=9, family="monospace", color=INK)
    ax.text(
        14.8,
        -1.8,
        "rows: queries, columns: keys\n\nPass the tutorial's mask where\nTrue = may attend is expected and\nthe "
        "future opens, the past closes:\nwith −inf the last row has no key\nleft, and its softmax is NaN.",
        ha="left",
        va="center",
        fontsize=9,
        color=INK,
    )
    ax.text(-0.3, -4.9, f"The same {T} × {T} scores under both masks; e^(−1e9) is 0 in float32 as surely as e^(−inf).",
            ha="left", va="center", fontsize=9.5, color=INK)  # fmt: skip
    return fig
