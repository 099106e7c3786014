"""Graders of lesson 00's PyTorch primer: `pairwise_distances` (broadcasting, batch dimensions) and
`gradient_descent` (autograd, `torch.no_grad()`, zeroing the gradient). Re-exported by `course_lib.grading.welcome`,
which the lesson's test cells import.

The recipe is the course's (see `course_lib.grading.position`): the guard first, seeded inputs, expected values
from `course_lib.welcome` computed outside the learner's call, and on a mismatch each known wrong version is
computed on the same input so that the mistake can be named (`course_lib.grading.kit.diagnose`).

Shape legend: N and M points, C coordinates / features, `...` leading (batch) dimensions.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib import welcome as ref
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Hint,
    Passed,
    call_answer,
    call_label,
    describe,
    expect_close,
    expect_unchanged,
    generator,
    random_tensor,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, close, diagnose_tensor, find_mistake, tensor_result
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_gradient_descent", "check_pairwise_distances"]

# ------------------------------------------------------------------------------------------------------------
# Exercise 4: pairwise_distances

# (shape of a, shape of b, seed): a (..., N, C), b (..., M, C) with the same leading dimensions.
_DISTANCE_CASES: list[tuple[tuple[int, ...], tuple[int, ...], int]] = [
    ((3, 2), (3, 2), 2),  # N = M first: matching rows (a - b) and a transposed result give the right shape here
    ((4, 3), (5, 3), 0),
    ((2, 3, 4), (2, 5, 4), 1),
]

_FROM_THE_END = (
    "line the dimensions up from the right: a.unsqueeze(-2) is (..., N, 1, C) and b.unsqueeze(-3) is "
    "(..., 1, M, C), so their difference broadcasts to (..., N, M, C) whatever batch dimensions come first."
)

_TRANSPOSE = "transpose only the last two dimensions, b.transpose(-2, -1) (or b.mT): b.T reverses all of them."
_DISTANCE_HINTS: list[Hint] = [
    (
        lambda m: "must match the size of tensor" in m or "broadcast" in m,
        f"{_FROM_THE_END} With a matrix product, {_TRANSPOSE}",
    ),
    (lambda m: ".T" in m or "mT" in m or "cannot be multiplied" in m, f"For batched points {_TRANSPOSE}"),
]


def _distance_variants(a: Tensor, b: Tensor) -> list[Variant]:
    """Each known mistake, computed on the same points."""
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)  # (..., N, M, C)
    return [
        (
            lambda: ref.pairwise_distances(b, a),
            "the result is transposed: row i must hold the distances from a's point i, so the shape is "
            "(..., N, M) with N the points of a — subtract b's points from a's, not the other way round.",
        ),
        (
            lambda: diff.pow(2).sum(-1),
            "these are squared distances: take the square root of the sum of squares.",
        ),
        (
            lambda: diff.abs().sum(-1),
            "this is the sum of absolute differences (the L1 distance); the Euclidean distance squares the "
            "differences, sums them and takes the square root.",
        ),
        (
            lambda: diff.pow(2).mean(-1).sqrt(),
            "the squares were averaged over the coordinates (.mean); the Euclidean distance sums them (.sum).",
        ),
        (
            lambda: diff.pow(2).sum(-2).sqrt(),
            "the sum runs over the points of b (dim -2) instead of the coordinates: sum over the last "
            "dimension, .sum(dim=-1), which holds C.",
        ),
        (
            lambda: diff.pow(2).sum(-3).sqrt(),
            "the sum runs over the points of a (dim -3) instead of the coordinates: sum over the last "
            "dimension, .sum(dim=-1), which holds C.",
        ),
        (
            lambda: (a - b).pow(2).sum(-1).sqrt(),
            "you measured a[i] against b[i] only (matching rows), not every pair: give a and b a new axis each "
            "so that every point of a meets every point of b — " + _FROM_THE_END,
        ),
        (
            lambda: (a[:, None] - b[None]).pow(2).sum(-1).sqrt(),
            "the new axes were added from the front (a[:, None], b[None]), which only works for 2-D inputs; "
            + _FROM_THE_END,
        ),
    ]


def check_pairwise_distances(answer: Any, cases: list | None = None) -> Passed:
    """Check `pairwise_distances(a, b)`: a (..., N, C), b (..., M, C) -> (..., N, M) Euclidean distances.

    A case is `(shape_a, shape_b, seed)` with the same leading dimensions and the same C.
    """
    name = Graded(ref.pairwise_distances)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _DISTANCE_CASES)
    for tag, (shape_a, shape_b, seed) in chosen:
        a, b = random_tensor(*shape_a, seed=seed), random_tensor(*shape_b, seed=seed + 100)
        expected = ref.pairwise_distances(a, b)  # (..., N, M)
        a_in, b_in = a.clone(), b.clone()
        what = call_label(name, f"a of shape {tuple(shape_a)}, b of shape {tuple(shape_b)}", tag)
        got = tensor_result(name, call_answer(name, answer, a_in, b_in, what=what, hints=_DISTANCE_HINTS), what)
        expect_unchanged(name, {"a": (a_in, a), "b": (b_in, b)}, what)
        batched = len(shape_a) > 2
        hint = f"With batch dimensions in front, {_FROM_THE_END}" if batched else ""
        diagnose_tensor(name, what, got, expected, _distance_variants(a, b), hint=hint)
    return Passed(name, len(chosen), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 5: gradient_descent

# (N, C, lr, steps, seed): x (N, C), y (N,), w (C,) drawn from the seed.
_DESCENT_CASES: list[tuple[int, int, float, int, int]] = [
    (8, 3, 0.1, 3, 0),
    (5, 2, 0.05, 1, 1),
    (10, 4, 0.02, 5, 2),
]

_DESCENT_HINTS: list[Hint] = [
    (
        lambda m: "leaf Variable that requires grad" in m,
        "an in-place update of a tensor that requires grad must not be recorded by autograd: do it inside "
        "`with torch.no_grad(): w -= lr * w.grad`.",
    ),
    (
        lambda m: "NoneType" in m,
        "w.grad is None. Either backward() was not called, or `w = w - lr * w.grad` (outside no_grad) made w a "
        "new tensor computed from the old one, and autograd fills .grad only for leaf tensors. Update in place "
        "under torch.no_grad(): w -= lr * w.grad.",
    ),
    (
        lambda m: "does not require grad" in m,
        "the w you are given does not require gradients: make your own copy that does, "
        "w = w.detach().clone().requires_grad_(True), before the loop.",
    ),
    (
        lambda m: "backward through the graph a second time" in m,
        "compute the loss anew inside the loop, from the current w: each backward() uses up its graph.",
    ),
]


def _descend(
    w: Tensor,
    x: Tensor,
    y: Tensor,
    lr: float,
    steps: int,
    *,
    zero: bool = True,
    sign: float = -1.0,
    total: bool = False,
    after: bool = False,
) -> tuple[Tensor, list[float]]:
    """Gradient descent with one mistake switched on (all off: the right answer), float32 and autograd as the
    learner's: `zero` resets the gradient, `sign` -1 descends, `total` sums the squared errors instead of averaging,
    `after` records each loss after its update."""
    w = w.detach().clone().requires_grad_(True)
    losses = []
    with torch.enable_grad():
        for _ in range(steps):
            errors = (x @ w - y) ** 2  # (N,)
            loss = errors.sum() if total else errors.mean()
            loss.backward()
            with torch.no_grad():
                w += sign * lr * w.grad
            if zero:
                w.grad.zero_()
            with torch.no_grad():
                later = ((x @ w - y) ** 2).sum() if total else ((x @ w - y) ** 2).mean()
            losses.append((later if after else loss).item())
    return w.detach(), losses


def _descent_variants(w: Tensor, x: Tensor, y: Tensor, lr: float, steps: int) -> list[Variant]:
    return [
        (
            lambda: _descend(w, x, y, lr, steps, zero=False),
            "the gradient is never reset. backward() *adds* to w.grad, so each step used the sum of all the "
            "gradients so far; after each update clear it with w.grad.zero_() (or w.grad = None).",
        ),
        (
            lambda: _descend(w, x, y, lr, steps, sign=1.0),
            "the weights moved up the gradient (w += lr * w.grad), which makes the loss grow; gradient descent "
            "subtracts it: w -= lr * w.grad.",
        ),
        (
            lambda: _descend(w, x, y, lr, steps, total=True),
            "the loss is the sum of the squared errors; the contract uses their mean, ((x @ w - y) ** 2).mean(), "
            "so the gradient (and each step) is N times too large.",
        ),
        (
            lambda: _descend(w, x, y, lr, steps, after=True),
            "the weights are right, but each loss was measured after its update; record the loss you call "
            "backward() on, the one before the step.",
        ),
    ]


def check_gradient_descent(answer: Any, cases: list | None = None) -> Passed:
    """Check `gradient_descent(w, x, y, lr, steps) -> (w, losses)` on seeded least-squares problems.

    A case is `(N, C, lr, steps, seed)`: x (N, C), y (N,) and the starting w (C,) are drawn from the seed.
    """
    name = Graded(ref.gradient_descent)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _DESCENT_CASES)
    for tag, (n, c, lr, steps, seed) in chosen:
        x = random_tensor(n, c, seed=seed)
        y = x @ torch.randn(c, generator=generator(seed + 50)) + 0.1 * random_tensor(n, seed=seed + 60)  # (N,)
        w = random_tensor(c, seed=seed + 70)
        expected_w, expected_losses = ref.gradient_descent(w, x, y, lr, steps)
        args = (w.clone(), x.clone(), y.clone())
        shown = f"w of shape ({c},), x of shape ({n}, {c}), y of shape ({n},), lr={lr:g}, steps={steps}"
        what = call_label(name, shown, tag)
        got = call_answer(name, answer, *args, lr, steps, what=what, hints=_DESCENT_HINTS)
        if not torch.equal(args[0], w):
            raise GradingError(
                name,
                f"{what} changed the caller's w. Train a copy of your own: w = w.detach().clone().requires_grad_(True)"
                ", then return it (detached) with the losses.",
            )
        expect_unchanged(name, {"x": (args[1], x), "y": (args[2], y)}, what)
        got_w, got_losses = _unpack(name, got, what, steps)
        variants = _descent_variants(w, x, y, lr, steps)
        _check_weights(name, what, got_w, expected_w, variants)
        _check_losses(name, what, got_losses, expected_losses, variants, shown=tag is None)
    return Passed(name, len(chosen), hidden=cases is not None)


def _unpack(name: str, got: Any, what: str, steps: int) -> tuple[Tensor, list[float]]:
    """(weights, losses) from what the answer returned, or a message saying what came back instead."""
    if got is None:
        raise GradingError(name, f"{what} returned None. Did you forget `return w, losses`?")
    if not isinstance(got, tuple | list) or len(got) != 2:
        raise GradingError(name, f"{what} should return a pair (w, losses), got {describe(got)}.")
    got_w = tensor_result(name, got[0], f"{what}, the weights it returned")
    losses = got[1]
    if not isinstance(losses, list):
        raise GradingError(name, f"{what}: the losses should be a list of floats, got {describe(losses)}.")
    if len(losses) != steps:
        raise GradingError(name, f"{what}: {len(losses)} losses for {steps} steps; record one loss per step.")
    for k, loss in enumerate(losses):
        if isinstance(loss, torch.Tensor):
            raise GradingError(
                name,
                f"{what}: losses[{k}] is a tensor; store loss.item(), a Python float (a tensor that requires "
                "grad keeps its whole graph alive).",
            )
        if isinstance(loss, bool) or not isinstance(loss, float | int):
            raise GradingError(name, f"{what}: losses[{k}] should be a float, got {describe(loss)}.")
    return got_w, [float(loss) for loss in losses]


def _check_weights(name: str, what: str, got: Tensor, expected: Tensor, variants: list[Variant]) -> None:
    if close(got, expected):
        return
    mistake = find_mistake(variants, lambda value: close(got, value[0]), lambda value: close(value[0], expected))
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    expect_close(name, got, expected, f"{what}, the weights it returned")


def _same_losses(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=1e-4)


def _check_losses(
    name: str, what: str, got: list[float], expected: list[float], variants: list[Variant], shown: bool
) -> None:
    if _same_losses(got, expected):
        return
    mistake = find_mistake(
        variants, lambda value: _same_losses(got, value[1]), lambda value: _same_losses(value[1], expected)
    )
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    k = next(i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if abs(g - e) > 1e-5 + 1e-4 * abs(e))
    values = f": got {got[k]:.6g}, expected {expected[k]:.6g}" if shown else ""
    raise GradingError(
        name, f"{what}: losses[{k}] is wrong{values}. Each loss is ((x @ w - y) ** 2).mean() before that step's update."
    )
