"""Naming the likely mistake behind a wrong answer, for every lesson's graders.

A check knows the classic mistakes of its exercise. Each is a `Variant`: a function that computes what the
mistaken code would return on the same input, and the message that names the mistake. When the learner's
answer differs from the expected one, the check computes each variant and, if the answer equals one of them,
says which mistake it is; otherwise it reports what differs.

- `find_mistake`: the message of the first variant that matches, or None.
- `diagnose_value`: for Python values (lists, dicts, strings), as in lesson 01.
- `diagnose_tensor`, `tensor_result`: for tensors, as in lessons 02 and 03.

Shape legend: B batch, T time, C channels, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from course_lib.grading.kit.core import GradingError, describe, expect_close, expect_type
from course_lib.grading.kit.exercise import Graded

__all__ = ["Variant", "close", "diagnose_tensor", "diagnose_value", "find_mistake", "tensor_result"]

Variant = tuple[Callable[[], Any], str]  # (a wrong version run on the same input, what that mistake is)


def find_mistake(
    variants: Sequence[Variant], matches: Callable[[Any], bool], right: Callable[[Any], bool]
) -> str | None:
    """The message of the first variant whose output `matches` the learner's and is not `right`, else None.

    A variant that cannot run on this input cannot be the learner's mistake: it is skipped.
    """
    for compute, mistake in variants:
        try:
            value = compute()
        except Exception:
            continue
        if matches(value) and not right(value):
            return mistake
    return None


def _list_difference(got: list, expected: list) -> str:
    for position, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            return f" First difference at position {position}: expected {b!r}, got {a!r}."
    return f" Expected {len(expected)} items, got {len(got)}."


def diagnose_value(exercise: Graded | str, what: str, got: Any, expected: Any, variants: Sequence[Variant]) -> None:
    """Fail, naming the first variant whose output equals `got`; else say what was expected and what came back."""
    mistake = find_mistake(variants, lambda value: value == got, lambda value: value == expected)
    if mistake is not None:
        raise GradingError(exercise, f"{what} returned {describe(got)}: {mistake}")
    detail = _list_difference(got, expected) if isinstance(got, list) and isinstance(expected, list) else ""
    raise GradingError(exercise, f"{what}: expected {describe(expected)}, got {describe(got)}.{detail}")


def tensor_result(exercise: Graded | str, got: Any, what: str) -> Tensor:
    """`got` if it is a tensor; else a GradingError saying what came back instead."""
    return expect_type(exercise, got, Tensor, what, "a torch.Tensor")


def close(a: Any, b: Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """`a` is a tensor of b's shape whose values (in b's dtype) are within the tolerances of b's."""
    if not isinstance(a, Tensor) or tuple(a.shape) != tuple(b.shape):
        return False
    return torch.allclose(a.detach().to(b.dtype), b, atol=atol, rtol=rtol)


def diagnose_tensor(
    exercise: Graded | str,
    what: str,
    got: Tensor,
    expected: Tensor,
    variants: Sequence[Variant],
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    hint: str = "",
) -> None:
    """Pass if `got` matches `expected`; else exercise the first wrong variant it matches, else a generic message."""
    if got.is_floating_point() == expected.is_floating_point() and close(got, expected, atol, rtol):
        return
    mistake = find_mistake(
        variants, lambda value: close(got, value, atol, rtol), lambda value: close(value, expected, atol, rtol)
    )
    if mistake is not None:
        raise GradingError(exercise, f"{what}: {mistake}")
    expect_close(exercise, got, expected, what, atol=atol, rtol=rtol, hint=hint)
