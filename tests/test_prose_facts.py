"""Facts that the prose of lessons 03–05 states without a cell computing them, checked here against independent
references (Python's math, torch's own FLOP counter) rather than the course's code alone."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from course_lib import multihead, position


def test_exp_overflows_where_lesson_04_says():
    assert math.isfinite(math.exp(709))
    with pytest.raises(OverflowError):
        math.exp(710)
    finite, infinite = torch.exp(torch.tensor([88.7, 88.8], dtype=torch.float32)).tolist()
    assert math.isfinite(finite) and infinite == math.inf


def test_softmax_is_unchanged_by_subtracting_the_row_maximum():
    scores = torch.tensor([[1000.0, 999.0, 0.0], [3.0, 1.0, -2.0]], dtype=torch.float64)
    shifted = scores - scores.max(dim=-1, keepdim=True).values
    by_hand = shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)
    assert torch.isnan((scores.exp() / scores.exp().sum(-1, keepdim=True))[0]).any()  # the naive one breaks
    torch.testing.assert_close(by_hand, torch.softmax(scores, dim=-1))


def test_lesson_03_fastest_hand_turns_one_radian_per_position():
    table = position.sinusoidal_position_encoding(64, 16).double()
    p = torch.arange(64, dtype=torch.float64)
    torch.testing.assert_close(table[:, 0], torch.sin(p).float().double(), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("B", "T", "d_model", "n_heads"), [(2, 16, 32, 4), (1, 40, 24, 3)])
def test_lesson_05_flop_counts_are_flops_not_multiply_adds(B, T, d_model, n_heads):
    """Lesson 05: projections ≈ 8·B·T·d² FLOPs and attention matrices ≈ 4·B·T²·d FLOPs (2 FLOPs per
    multiply-add), as torch's FlopCounterMode counts them."""
    layer = multihead.MultiHeadAttention(d_model, n_heads, bias=False)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        layer(torch.randn(B, T, d_model))
    assert counter.get_total_flops() == 8 * B * T * d_model**2 + 4 * B * T**2 * d_model


def test_no_lesson_turns_gradients_off_for_the_whole_kernel():
    """`torch.set_grad_enabled(False)` in a set-up cell silently stops anything a learner trains later in the same
    kernel; a lesson that needs no graph uses `torch.no_grad()` around what it computes (lesson 05 once did this)."""
    import json
    import re

    from tests.nbtools import ROOT

    offenders = []
    for path in sorted((ROOT / "source").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code" and re.search(r"set_grad_enabled\(\s*False", "".join(cell["source"])):
                offenders.append(path.name)
    assert not offenders, f"set_grad_enabled(False) in {offenders}"
