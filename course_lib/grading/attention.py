"""Graders of lesson 04 — Attention (one `check_<exercise>` per exercise, and `train_step`;
docs/ARCHITECTURE.md, Exercise contract).

This module grades the functions (`simple_self_attention`, `scaled_dot_product_attention`, `causal_mask`); the
modules (`SelfAttention`, `CausalSelfAttention`, `CrossAttention`) are graded in
`course_lib.grading.attention_modules` and the training step (`train_step`) in
`course_lib.grading.attention_training`; both are re-exported here, so that every test cell of the lesson imports
from `course_lib.grading.attention`.

Every check follows the same recipe: `check_definition` first (the from-scratch guard); then, for each case,
the expected value from the reference in `course_lib.attention`, computed *outside* the learner's call, and
the learner's answer through `call_answer`. When the two differ, the check recomputes the case with each known
mistake (softmax over the wrong dimension, the wrong scale, the mask inverted or applied after the softmax, ...;
see `course_lib.grading.attention_common`) and names the mistake whose output the learner's equals; otherwise
it reports the shapes and the largest difference. With `cases=None` a check runs its visible cases; a hidden
test cell passes its own `cases` (the format is in each check's docstring) and only those run; a message about
a hidden case names it by number (`core.tagged_cases`), never by its input.

Shape legend: B batch, T time (Tq queries, Tk keys), H heads, D head size, C / d_model channels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from course_lib import attention as ref
from course_lib.grading.attention_common import (
    NEG_INF,
    attend,
    attention_mistakes,
    call_without_grad,
    expect_tensor_output,
    keeps_rng,
    make_mask,
    name_mistake,
    same_values,
)
from course_lib.grading.attention_modules import check_CausalSelfAttention, check_CrossAttention, check_SelfAttention
from course_lib.grading.attention_training import check_train_step
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, expect_close, tagged_cases
from course_lib.grading.kit.diagnose import Variant
from course_lib.grading.kit.guard import check_definition

__all__ = [
    "check_simple_self_attention",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_SelfAttention",
    "check_CausalSelfAttention",
    "check_CrossAttention",
    "check_train_step",
]


def _row_sums_message(name: str, what: str, weights: Tensor) -> None:
    """Fail when some row of the weights does not sum to 1 (a row = one query's weights over the keys)."""
    sums = weights.detach().double().sum(-1)
    bad = ~torch.isclose(sums, torch.ones_like(sums), atol=1e-4)
    if bad.any():
        off = (sums - 1).abs().nan_to_num(float("inf"))
        worst = float(sums.flatten()[int(off.flatten().argmax())])
        raise GradingError(
            name,
            f"{what}: rows of your attention weights sum to {worst:.3g}, not 1 — is the softmax over the last "
            "dimension (dim=-1), and is the mask applied to the scores before it?",
        )


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: simple_self_attention
# ------------------------------------------------------------------------------------------------------------

JOURNEY_TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
# Small hand-made 3-d vectors for the lesson's worked example (made up for this course).
JOURNEY_VECTORS = [
    [0.10, 0.30, 0.90],  # Your
    [0.80, 0.70, 0.10],  # journey
    [0.90, 0.40, 0.20],  # starts
    [0.05, 0.20, 0.95],  # with
    [0.30, 0.90, 0.40],  # one
    [0.85, 0.60, 0.15],  # step
]

_SIMPLE_CASES: list = ["journey", (4, 5, 1), (3, 2, 2), (1, 3, 3)]


@keeps_rng
def check_simple_self_attention(answer: Any, cases: list | None = None) -> Passed:
    """Check `simple_self_attention(x)`. A case is "journey" (the lesson's 6x3 example) or `(T, C, seed)`."""
    name = Graded(ref.simple_self_attention)
    check_definition(answer, name)
    run = tagged_cases(cases, _SIMPLE_CASES)
    for tag, case in run:
        if case == "journey":
            x, label = torch.tensor(JOURNEY_VECTORS), "the 'Your journey starts with one step' vectors"
        else:
            T, C, seed = case
            x, label = core.random_tensor(T, C, seed=seed, scale=0.7), f"x of shape ({T}, {C})"
        _simple_case(name, answer, x, call_label(name, label, tag))
    return Passed(name, len(run), hidden=cases is not None)


def _simple_case(name: str, answer: Any, x: Tensor, what: str) -> None:
    T, C = x.shape
    expected = ref.simple_self_attention(x)
    given = x.clone()
    got = call_without_grad(name, answer, given, what=what)
    if not torch.equal(given, x):
        raise GradingError(name, f"{what} changed its input in place; compute a new tensor instead.")
    expect_tensor_output(name, got, what)
    scores = x @ x.T  # (T, T)
    weights = torch.softmax(scores, dim=-1)
    if got.shape == (T, T) and T != C and same_values(got, weights):
        raise GradingError(name, f"{what} returned the attention weights (T, T); return weights @ x, shape (T, C).")
    root = math.sqrt(C)
    variants: list[Variant] = [
        (
            lambda: torch.softmax(scores, dim=0) @ x,
            "the softmax ran over the wrong dimension (dim=0): each token's weights — a row — must sum to 1. "
            "Use torch.softmax(scores, dim=-1).",
        ),
        (
            lambda: torch.softmax(scores / root, dim=-1) @ x,
            f"the scores were divided by sqrt(C) = {root:.4g}. This first version has no scaling (that comes "
            "with scaled_dot_product_attention): softmax(x @ x.T) @ x.",
        ),
        (
            lambda: torch.softmax(scores / C, dim=-1) @ x,
            "the scores were divided by C. This first version has no scaling: softmax(x @ x.T) @ x.",
        ),
        (lambda: scores @ x, "the scores were used without the softmax: normalise each row with torch.softmax."),
        (
            lambda: (scores / scores.sum(-1, keepdim=True)) @ x,
            "each row of scores was divided by its sum instead of going through the softmax (scores can be "
            "negative, and the softmax is what the contract asks for): use torch.softmax(scores, dim=-1).",
        ),
    ]
    name_mistake(name, what, got, expected, variants)
    expect_close(name, got, expected, what)


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: scaled_dot_product_attention
# ------------------------------------------------------------------------------------------------------------

# (lead dims, Tq, Tk, dk, dv, mask kind, seed)
_SDPA_CASES: list = [
    ((), 4, 4, 8, 8, None, 0),
    ((2,), 3, 5, 4, 6, None, 1),
    ((2,), 5, 5, 16, 4, "causal", 2),
    ((2, 3), 4, 6, 8, 5, "padding", 3),
    ((3,), 4, 7, 6, 6, "random", 4),
]


@keeps_rng
def check_scaled_dot_product_attention(answer: Any, cases: list | None = None) -> Passed:
    """Check `scaled_dot_product_attention(q, k, v, mask=None)`.

    A case is `(lead, Tq, Tk, dk, dv, mask_kind, seed)`: q (*lead, Tq, dk), k (*lead, Tk, dk), v (*lead, Tk, dv)
    and a mask of kind None, "causal", "padding" or "random" (see `make_mask`).
    """
    name = Graded(ref.scaled_dot_product_attention)
    check_definition(answer, name)
    run = tagged_cases(cases, _SDPA_CASES)
    for tag, (lead, Tq, Tk, dk, dv, kind, seed) in run:
        lead = tuple(lead)
        q = core.random_tensor(*lead, Tq, dk, seed=seed)
        k = core.random_tensor(*lead, Tk, dk, seed=seed + 1000)
        v = core.random_tensor(*lead, Tk, dv, seed=seed + 2000)
        _sdpa_case(name, answer, q, k, v, make_mask(kind, lead, Tq, Tk, seed + 3000), kind, tag)
    return Passed(name, len(run), hidden=cases is not None)


def _sdpa_case(name, answer, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, kind: Any, tag) -> None:
    expected_out, expected_w = ref.scaled_dot_product_attention(q, k, v, mask)
    shown = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}" + (
        f", {kind} mask {tuple(mask.shape)}" if mask is not None else ""
    )
    what = call_label(name, shown, tag)
    inputs = [t.clone() for t in (q, k, v)]
    args = (*inputs, mask.clone()) if mask is not None else tuple(inputs)
    got = call_without_grad(name, answer, *args, what=what)
    if not all(torch.equal(a, b) for a, b in zip(inputs, (q, k, v), strict=True)):
        raise GradingError(name, f"{what} changed q, k or v in place; compute new tensors instead.")
    if isinstance(got, Tensor):
        raise GradingError(name, f"{what} returned one tensor; return the pair (out, weights).")
    if not (isinstance(got, tuple | list) and len(got) == 2 and all(isinstance(t, Tensor) for t in got)):
        raise GradingError(name, f"{what} should return a pair of tensors (out, weights), got {describe(got)}.")
    out, weights = got
    if expected_out.shape != expected_w.shape and out.shape == expected_w.shape and weights.shape == expected_out.shape:
        raise GradingError(name, f"{what} returned (weights, out); return them in the order (out, weights).")

    w_what = f"{what}: the weights"
    Tq, Tk = q.shape[-2], k.shape[-2]
    if weights.shape[-2:] == (Tk, Tq) and Tq != Tk:
        raise GradingError(
            name,
            f"{w_what} have shape {tuple(weights.shape)}: one row per key instead of one per query. Compute the "
            "scores as q @ k.transpose(-2, -1), shape (..., Tq, Tk).",
        )
    d_k, d_v = q.shape[-1], v.shape[-1]
    extra = [(math.sqrt(d_v), "sqrt(d_v), the values' size")] if d_v != d_k else []
    variants = attention_mistakes(
        lambda **options: attend(q, k, v, mask, **options)[1],
        d_k,
        "d_k",
        n_dims=q.dim(),
        extra_scales=extra,
        mask_label="mask" if mask is not None else None,
    )
    variants.append(
        (
            lambda: attend(k, q, v, mask)[1],
            "queries and keys are swapped, so the weights come out transposed. Compute the scores as "
            "q @ k.transpose(-2, -1): one row per query.",
        )
    )
    name_mistake(name, w_what, weights, expected_w, variants)
    if isinstance(weights, Tensor) and weights.shape == expected_w.shape:
        _row_sums_message(name, what, weights)
    expect_close(name, weights, expected_w, w_what)
    expect_close(
        name,
        out,
        expected_out,
        f"{what}: the output",
        hint="Your weights are right, so look at the last step: out = weights @ v.",
    )


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: causal_mask
# ------------------------------------------------------------------------------------------------------------

_CAUSAL_CASES: list = [4, 6, 1]


@keeps_rng
def check_causal_mask(answer: Any, cases: list | None = None) -> Passed:
    """Check `causal_mask(T, device=None)`. A case is a length T; the first is also called with device="cpu"."""
    name = Graded(ref.causal_mask)
    check_definition(answer, name)
    run = tagged_cases(cases, _CAUSAL_CASES)
    for i, (tag, T) in enumerate(run):
        _causal_case(name, answer, int(T), with_device=i == 0, tag=tag)
    return Passed(name, len(run), hidden=cases is not None)


def _causal_case(name: str, answer: Any, T: int, with_device: bool, tag: str | None) -> None:
    expected = ref.causal_mask(T)
    what = call_label(name, str(T), tag)
    got = call_without_grad(name, answer, T, what=what)
    expect_tensor_output(name, got, what)
    if tuple(got.shape) != (T, T):
        raise GradingError(name, f"{what} has shape {tuple(got.shape)}; it should be (T, T).")
    if got.dtype != torch.bool:
        values = set(got.flatten().tolist())
        if NEG_INF in values or any(value < 0 for value in values):
            raise GradingError(
                name,
                f"{what} is an additive float mask (0 and -inf), the kind PyTorch's "
                "generate_square_subsequent_mask returns. This course's masks are bool, True = may attend: "
                "torch.ones(T, T, dtype=torch.bool).tril().",
            )
        raise GradingError(
            name,
            f"{what} has dtype {got.dtype}; return a bool tensor (True = may attend), e.g. "
            "torch.ones(T, T, dtype=torch.bool).tril().",
        )
    ones = torch.ones(T, T, dtype=torch.bool)
    known = [
        (
            ones.tril(-1),
            "the diagonal is excluded: a token may attend to itself, so the diagonal must be True. Use "
            "tril() (diagonal=0), not tril(diagonal=-1).",
        ),
        (
            ones.triu(1),
            "the mask is inverted: True marks the blocked positions above the diagonal. In this course True "
            "means 'may attend': True on and below the diagonal.",
        ),
        (
            ones.triu(),
            "True is on and above the diagonal: rows are queries and columns keys, and position t may attend "
            "to positions 0..t — the lower triangle (tril).",
        ),
        (ones, "every entry is True, so nothing is masked: keep only the lower triangle (tril)."),
    ]
    if not torch.equal(got, expected):
        for wrong, mistake in known:
            if torch.equal(got, wrong):
                raise GradingError(name, f"{what}: {mistake}")
        i, j = (int(t) for t in (got != expected).nonzero()[0])
        raise GradingError(
            name,
            f"{what}: entry ({i}, {j}) is {bool(got[i, j])}, expected {bool(expected[i, j])}. The mask is True "
            "on and below the diagonal (query i may attend to keys 0..i).",
        )
    if with_device:
        with_cpu = call_label(name, f"{T}, device='cpu'", tag)
        on_cpu = call_without_grad(name, answer, T, what=with_cpu, device="cpu")
        if not isinstance(on_cpu, Tensor) or on_cpu.device.type != "cpu" or not torch.equal(on_cpu, expected):
            raise GradingError(name, f"{with_cpu} should give the same mask on that device; pass device=...")
