"""Grader of lesson 12's `newton_schulz` (re-exported by `course_lib.grading.modern`).

An answer is judged by what it returns and by the singular values of that: the matrix must be the reference's
(G's singular vectors, each singular value moved by the quintic), and a wrong one is told where its singular values
lie against the reference's. Cases: wide and tall gradient-like matrices (singular values spread over two decades),
a square one with 2 steps, 0 steps (the normalised G), and bf16 (the result must stay bf16). Named mistakes: no
normalisation (the singular values blow up), a division by the largest entry instead of the Frobenius norm, the
coefficients in another order, the cubic Newton-Schulz step, X^T X instead of X X^T or the polynomial on the wrong
side (square case), A * A instead of A @ A, the `a X` term left out, one step too many or too few, `steps`
ignored, the result transposed or turned into float32.

Shape legend: R rows, K columns of G.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib import optimizers as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_unchanged, tagged_cases
from course_lib.grading.kit.diagnose import Variant, find_mistake, tensor_result
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_newton_schulz"]

# (R, K, steps or None for the default 5, dtype name, seed)
_CASES: list = [
    (8, 12, None, "float32", 0),
    (12, 8, None, "float32", 1),
    (6, 6, 2, "float64", 2),
    (5, 9, 0, "float32", 3),
    (16, 24, None, "bfloat16", 4),
]
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
# bf16 keeps 8 bits of mantissa and five steps compound its roundings; float32 keeps 24.
_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.bfloat16: 0.08}


def gradient_like(R: int, K: int, seed: int) -> Tensor:
    """A random (R, K) matrix whose singular values spread over two decades, as a gradient's do."""
    g = core.generator(seed)
    return torch.randn(R, K, generator=g, dtype=torch.float64) @ torch.diag(
        torch.logspace(0, -2, K, dtype=torch.float64)
    )


def _iterate(
    G: Tensor,
    steps: int,
    *,
    normalise: str = "frobenius",
    coefficients: tuple[float, float, float] = ref.NS_COEFFICIENTS,
    step: str = "quintic",
) -> Tensor:
    """newton_schulz in float64 with one mistake switched on (all defaults: right)."""
    a, b, c = coefficients
    tall = G.shape[0] > G.shape[1]
    X = G.T if tall else G
    if normalise == "frobenius":
        X = X / (X.norm() + 1e-7)
    elif normalise == "largest entry":
        X = X / X.abs().max()
    for _ in range(steps):
        A = X @ X.T
        if step == "quintic":
            X = a * X + (b * A + c * A @ A) @ X
        elif step == "cubic":
            X = 1.5 * X - 0.5 * A @ X
        elif step == "XtX":
            A = X.T @ X
            X = a * X + (b * A + c * A @ A) @ X
        elif step == "right":
            X = a * X + X @ (b * A + c * A @ A)
        elif step == "elementwise":
            X = a * X + (b * A + c * A * A) @ X
        elif step == "no a X":
            X = (b * A + c * A @ A) @ X
    return X.T if tall else X


def _mistakes(G: Tensor, steps: int, given: bool) -> list[Variant]:
    run = lambda **wrong: lambda: _iterate(G, steps, **wrong)  # noqa: E731
    a, b, c = ref.NS_COEFFICIENTS
    variants: list[Variant] = [
        (
            run(normalise="none"),
            "G was not normalised: divide it by its Frobenius norm (plus eps) first, so that every singular value "
            "starts at 1 or below, where the polynomial pulls it towards 1 instead of blowing it up.",
        ),
        (
            run(normalise="largest entry"),
            "G was divided by its largest entry: divide by its Frobenius norm, the root of the sum of all squares "
            "(G.norm()), which is never smaller than the largest singular value.",
        ),
        (
            run(coefficients=(c, b, a)),
            f"a and c are swapped: X = a X + (b A + c A A) X with (a, b, c) = ({a}, {b}, {c}).",
        ),
        (run(coefficients=(b, a, c)), f"a and b are swapped: (a, b, c) = ({a}, {b}, {c})."),
        (
            run(step="cubic"),
            "this is the cubic Newton-Schulz step (1.5 X - 0.5 X X^T X); Muon's is the quintic "
            "X = a X + (b A + c A A) X with A = X X^T.",
        ),
        (run(step="XtX"), "A is X^T X; it is X X^T (the smaller product, (R, R) after the transpose)."),
        (
            run(step="right"),
            "the polynomial in A multiplies X from the right; it goes on the left: X = a X + (b A + c A @ A) @ X.",
        ),
        (run(step="elementwise"), "A * A multiplies entry by entry; the step needs the matrix product A @ A."),
        (run(step="no a X"), "the `a * X` term is missing: X = a X + (b A + c A @ A) X."),
        (lambda: _iterate(G, steps + 1), f"one step too many: iterate `steps` ({steps}) times."),
    ]
    if steps > 0:
        variants.append((lambda: _iterate(G, steps - 1), f"one step too few: iterate `steps` ({steps}) times."))
    if given and steps != 5:
        variants.append((lambda: _iterate(G, 5), f"`steps` was ignored (5 steps instead of {steps})."))
    return variants


def _range(values: Tensor) -> str:
    return f"{values.min().item():.3g} to {values.max().item():.3g}"


@keeps_rng
def check_newton_schulz(answer: Any, cases: list | None = None) -> Passed:
    """Check `newton_schulz(G, steps=5, eps=1e-7)`; a case is `(R, K, steps or None, dtype name, seed)`."""
    name = Graded(ref.newton_schulz)
    check_definition(answer, name)
    run = tagged_cases(cases, _CASES)
    for tag, (R, K, steps, dtype_name, seed) in run:
        dtype = _DTYPES[dtype_name]
        G = gradient_like(R, K, seed).to(dtype)  # (R, K)
        used = 5 if steps is None else steps
        shown = f"G of shape {(R, K)}" + ("" if dtype is torch.float32 else f" in {dtype_name}")
        what = call_label(name, shown + ("" if steps is None else f", steps={steps}"), tag)
        given = G.clone()
        got = call_without_grad(name, answer, given, *(() if steps is None else (steps,)), what=what)
        expect_unchanged(name, {"G": (given, G)}, what)
        got = tensor_result(name, got, what)
        if tuple(got.shape) == (K, R) and R != K:
            raise GradingError(
                name,
                f"{what} returned shape {(K, R)}, the transpose of G's: a tall G is transposed to be worked on, and "
                "the result is transposed back.",
            )
        if tuple(got.shape) != (R, K):
            raise GradingError(name, f"{what} returned shape {tuple(got.shape)}; it keeps G's shape {(R, K)}.")
        if got.dtype != dtype:
            raise GradingError(
                name,
                f"{what} returned {got.dtype} for a {dtype} G: compute in G's dtype (Muon runs it in bf16), without "
                ".float().",
            )
        exact = G.double()  # the very numbers the answer got
        expected = ref.newton_schulz(exact, used)
        tolerance = _TOLERANCE[dtype]
        result = got.double()
        if not torch.isfinite(result).all():
            raise GradingError(
                name,
                f"{what} returned inf or NaN: its singular values grew at every step. Was G divided by its Frobenius "
                "norm first (G.norm(), not its largest entry), and does each step keep all three terms, "
                "X = a * X + (b * A + c * A @ A) @ X? Singular values above about 1.2 grow under the polynomial.",
            )
        if torch.allclose(result, expected, atol=tolerance, rtol=tolerance):
            continue
        mistake = find_mistake(
            _mistakes(exact, used, steps is not None),
            lambda value, r=result, t=tolerance: torch.allclose(r, value, atol=t, rtol=t),
            lambda value, e=expected, t=tolerance: torch.allclose(value, e, atol=t, rtol=t),
        )
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        yours, theirs = torch.linalg.svdvals(result), torch.linalg.svdvals(expected)
        same_values = torch.allclose(yours, theirs, atol=10 * tolerance, rtol=10 * tolerance)
        raise GradingError(
            name,
            f"{what}: the singular values of what you returned run from {_range(yours)}; those of newton_schulz's "
            f"result from {_range(theirs)} (G's from {_range(torch.linalg.svdvals(exact))})."
            + (
                " They agree, so the singular vectors differ: the iteration must keep G's (only products of X with "
                "X X^T)."
                if same_values
                else " Each step maps every singular value s to a s + b s^3 + c s^5, starting from G / ||G||_F."
            ),
        )
    return Passed(name, len(run), hidden=cases is not None)
