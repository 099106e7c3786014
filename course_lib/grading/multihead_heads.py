"""Graders of lesson 05 — splitting channels into heads and merging them back (`split_merge_heads`).

The lesson's test cells import this check from `course_lib.grading.multihead`, which re-exports it. Expected
values come from `course_lib.multihead`; a wrong split is compared with the classic mistakes (a bare view
without the transpose, heads interleaved, heads left after the time axis) and named when it matches.

Shape legend: B batch, T time, H heads, D head size (d_head), C / d_model channels (= H * D).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib import multihead as ref
from course_lib.grading.attention_common import call_without_grad, expect_tensor_output, keeps_rng, name_mistake
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_close, tagged_cases
from course_lib.grading.kit.diagnose import Variant
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_split_merge_heads"]


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: split_heads and merge_heads
# ------------------------------------------------------------------------------------------------------------

# (B, T, H, D, seed); the last visible case has T == H, where forgetting the transpose keeps the shape.
_SPLIT_CASES: list = [(2, 5, 3, 4, 0), (1, 1, 2, 3, 1), (3, 4, 4, 2, 2)]

_BARE_SPLIT = (
    "the heads were split with a bare view/reshape to (B, H, T, D), without a transpose: that cuts the time "
    "axis into pieces instead of the channels. View as (B, T, H, D) first, then .transpose(1, 2)."
)
_INTERLEAVED = (
    "the heads are interleaved: head h must own the contiguous channels h*D:(h+1)*D, so view the channels as "
    "(H, D) — (B, T, H, D) — not as (D, H)."
)


@keeps_rng
def check_split_merge_heads(split_heads: Any, merge_heads: Any, cases: list | None = None) -> Passed:
    """Check `split_heads(x, n_heads)` (B, T, H*D) -> (B, H, T, D) and its inverse `merge_heads`.

    A case is `(B, T, H, D, seed)`. Messages are tagged with the function they are about.
    """
    check_definition(split_heads, Graded(ref.split_heads))
    check_definition(merge_heads, Graded(ref.merge_heads))
    run = tagged_cases(cases, _SPLIT_CASES)
    for tag, (B, T, H, D, seed) in run:
        x = core.random_tensor(B, T, H * D, seed=seed)
        heads = _split_case(split_heads, x, H, tag)
        _merge_case(merge_heads, core.random_tensor(B, H, T, D, seed=seed + 100), tag)
        round_trip = "merge_heads(split_heads(x))" if tag is None else f"merge_heads(split_heads(<{tag}>))"
        back = call_without_grad(Graded(ref.merge_heads), merge_heads, heads, what=round_trip)
        expect_close("merge_heads", back, x, f"{round_trip} should give x back")
    return Passed("split_merge_heads", 3 * len(run), hidden=cases is not None)


def _split_case(split_heads: Any, x: Tensor, H: int, tag: str | None) -> Tensor:
    name = Graded(ref.split_heads)
    B, T, C = x.shape
    D = C // H
    expected = ref.split_heads(x, H)
    what = call_label(name, f"x of shape {tuple(x.shape)}, n_heads={H}", tag)
    given = x.clone()
    got = call_without_grad(name, split_heads, given, H, what=what)
    if not torch.equal(given, x):
        raise GradingError(name, f"{what} changed its input in place.")
    expect_tensor_output(name, got, what)
    if tuple(got.shape) == (B, T, H, D) and T != H:
        raise GradingError(
            name, f"{what} returned shape {tuple(got.shape)} = (B, T, H, D): add .transpose(1, 2) to get (B, H, T, D)."
        )
    variants: list[Variant] = [
        (lambda: x.reshape(B, H, T, D), _BARE_SPLIT),
        (lambda: x.reshape(B, T, D, H).permute(0, 3, 1, 2), _INTERLEAVED),
        (lambda: x.reshape(B, T, H, D), "the heads were not moved next to the batch: add .transpose(1, 2)."),
    ]
    name_mistake(name, what, got, expected, variants)
    expect_close(name, got, expected, what)
    return got


def _merge_case(merge_heads: Any, y: Tensor, tag: str | None) -> None:
    name = Graded(ref.merge_heads)
    B, H, T, D = y.shape
    expected = ref.merge_heads(y)
    what = call_label(name, f"x of shape {tuple(y.shape)}", tag)
    view_of_transposed = (
        lambda message: "view" in message and ("stride" in message or "contiguous" in message),
        "after .transpose(1, 2) the memory is no longer in (B, T, H, D) order: use .reshape(B, T, H * D), or "
        ".contiguous().view(B, T, H * D).",
    )
    got = call_without_grad(name, merge_heads, y.clone(), what=what, hints=[view_of_transposed])
    expect_tensor_output(name, got, what)
    variants: list[Variant] = [
        (
            lambda: y.reshape(B, T, H * D),
            "the heads were merged with a bare view/reshape, without transposing back first: transpose(1, 2) "
            "to (B, T, H, D), then reshape to (B, T, H*D).",
        ),
        (
            lambda: y.permute(0, 2, 3, 1).reshape(B, T, H * D),
            "the heads' channels were interleaved: head h's D channels must end up side by side at "
            "h*D:(h+1)*D — transpose(1, 2), then reshape.",
        ),
    ]
    name_mistake(name, what, got, expected, variants)
    expect_close(name, got, expected, what)
