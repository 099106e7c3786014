"""Graders of lesson 04 — the attention modules (`SelfAttention`, `CausalSelfAttention`, `CrossAttention`).

The lesson's test cells import these checks from `course_lib.grading.attention`, which re-exports them. A
learner module is built with a fixed seed and its weights are copied into the reference module of
`course_lib.attention`, so both compute the same function when the answer is right; on a mismatch each known
mistake (see `course_lib.grading.attention_common`) is recomputed with the same weights and named when the
learner's output equals it. Messages about a hidden case name it by number, never by its input.

Shape legend: B batch, T time (Tq queries, Tk keys), C / d_model channels.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import attention as ref
from course_lib.grading.attention_common import (
    attend,
    attention_mistakes,
    build_module,
    call_in_training_mode,
    call_without_grad,
    copy_linears,
    expect_linears,
    expect_raises_value_error,
    expect_tensor_output,
    keeps_rng,
    make_mask,
    name_mistake,
    same_values,
)
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_close, tagged_cases
from course_lib.grading.kit.diagnose import Variant
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_SelfAttention", "check_CausalSelfAttention", "check_CrossAttention"]

_QKV = ("W_query", "W_key", "W_value")


# ------------------------------------------------------------------------------------------------------------
# Exercises 4 and 5: SelfAttention, CausalSelfAttention
# ------------------------------------------------------------------------------------------------------------

# (B, T, d_in, d_out, qkv_bias, seed)
_SELF_CASES: list = [(2, 5, 4, 6, False, 0), (1, 3, 3, 2, True, 1), (3, 4, 8, 8, False, 2)]


@keeps_rng
def check_SelfAttention(answer: Any, cases: list | None = None) -> Passed:
    """Check `SelfAttention(d_in, d_out, qkv_bias=False)`. A case is `(B, T, d_in, d_out, qkv_bias, seed)`."""
    name = Graded(ref.SelfAttention)
    check_definition(answer, name)
    run = tagged_cases(cases, _SELF_CASES)
    for tag, (B, T, d_in, d_out, bias, seed) in run:
        what = call_label(name, f"{d_in}, {d_out}, qkv_bias={bias}", tag)
        module = build_module(name, answer, d_in, d_out, what=what, seed=seed, qkv_bias=bias)
        shapes = {attr: (d_in, d_out, "the input x") for attr in _QKV}
        expect_linears(name, module, shapes, bias, what)
        reference = ref.SelfAttention(d_in, d_out, qkv_bias=bias)
        copy_linears(module, reference, _QKV)
        x = core.random_tensor(B, T, d_in, seed=seed + 100)
        expected = reference(x)
        call = f"{what} on x of shape {tuple(x.shape)}" if tag is None else f"{what} on its input"
        got = call_without_grad(name, module, x.clone(), what=call)
        expect_tensor_output(name, got, call)
        q, k, v = reference.W_query(x), reference.W_key(x), reference.W_value(x)  # (B, T, d_out) each
        _module_mistakes(name, call, got, expected, q, k, v, None, d_in=d_in, dk_label="d_out")
        expect_close(name, got, expected, call)
    return Passed(name, len(run), hidden=cases is not None)


def _module_mistakes(
    name: str,
    what: str,
    got: Tensor,
    expected: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    *,
    d_in: int,
    dk_label: str,
    causal: bool = False,
) -> None:
    """Name the known mistakes of a single-head module, given its q, k, v and the mask it should use."""
    d_k = q.shape[-1]
    extra = [(math.sqrt(d_in), "sqrt(d_in), the input's width")] if d_in != d_k else []
    variants = attention_mistakes(
        lambda **options: attend(q, k, v, mask, **options)[0],
        d_k,
        dk_label,
        n_dims=q.dim(),
        extra_scales=extra,
        mask_label=None if mask is None else ("causal mask" if causal else "mask"),
    )
    variants.append(
        (
            lambda: attend(k, q, v, mask)[0],
            "queries and keys are swapped: the weights come out transposed. Scores are q @ kᵀ with "
            "q = W_query(x) and k = W_key(x).",
        )
    )
    name_mistake(name, what, got, expected, variants)


# (B, T, d_in, d_out, context_length, qkv_bias, seed); T <= context_length
_CAUSAL_SELF_CASES: list = [
    (2, 4, 4, 6, 6, False, 0),
    (1, 5, 3, 4, 5, True, 1),
    (3, 3, 6, 6, 8, False, 2),
]
_DROPOUT = 0.5


@keeps_rng
def check_CausalSelfAttention(answer: Any, cases: list | None = None) -> Passed:
    """Check `CausalSelfAttention(d_in, d_out, context_length, dropout=0.0, qkv_bias=False)`.

    A case is `(B, T, d_in, d_out, context_length, qkv_bias, seed)` with T <= context_length. Every run also
    checks the state dict, the ValueError for T > context_length and dropout on the attention weights.
    """
    name = Graded(ref.CausalSelfAttention)
    check_definition(answer, name)
    run = tagged_cases(cases, _CAUSAL_SELF_CASES)
    for tag, (B, T, d_in, d_out, context_length, bias, seed) in run:
        what = call_label(name, f"{d_in}, {d_out}, context_length={context_length}, qkv_bias={bias}", tag)
        module = build_module(
            name, answer, d_in, d_out, context_length, what=what, seed=seed, dropout=0.0, qkv_bias=bias
        )
        expect_linears(name, module, {attr: (d_in, d_out, "the input x") for attr in _QKV}, bias, what)
        _expect_state_dict(name, module, bias, what)
        reference = ref.CausalSelfAttention(d_in, d_out, context_length, qkv_bias=bias).eval()
        copy_linears(module, reference, _QKV)
        x = core.random_tensor(B, T, d_in, seed=seed + 100)
        expected = reference(x)
        call = f"{what} on x of shape {tuple(x.shape)}" if tag is None else f"{what} on its input"
        # With T < context_length, any exception most likely comes from a mask of the wrong size.
        slice_mask = "here T < context_length: build (or slice) the mask for this call's length T = x.shape[1]."
        hints = [(lambda message: True, slice_mask)] if context_length > T else []
        got = call_without_grad(name, module, x.clone(), what=call, hints=hints)
        expect_tensor_output(name, got, call)
        _causal_nan_hints(name, call, got, expected)
        q, k, v = reference.W_query(x), reference.W_key(x), reference.W_value(x)
        mask = ref.causal_mask(T)
        _module_mistakes(name, call, got, expected, q, k, v, mask, d_in=d_in, dk_label="d_out", causal=True)
        variants: list[Variant] = [
            (
                lambda q=q, k=k, v=v, T=T: attend(q, k, v, torch.ones(T, T, dtype=torch.bool).tril(-1))[0],
                "the diagonal is excluded from the causal mask: a token may attend to itself.",
            ),
            (
                lambda q=q, k=k, v=v, T=T: attend(q, k, v, torch.ones(T, T, dtype=torch.bool).triu())[0],
                "the causal mask points the wrong way: query t may attend to keys 0..t (the lower triangle).",
            ),
        ]
        name_mistake(name, call, got, expected, variants)
        expect_close(name, got, expected, call)

        too_long = core.random_tensor(1, context_length + 1, d_in, seed=seed + 200)
        expect_raises_value_error(
            name,
            lambda module=module, too_long=too_long: module(too_long),
            f"{what} on an input with T > context_length",
            "Check x.shape[1] against context_length and raise ValueError when it is longer.",
        )
    _check_dropout_on_weights(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _expect_state_dict(name: str, module: nn.Module, bias: bool, what: str) -> None:
    expected = {f"{attr}.{p}" for attr in _QKV for p in (("weight", "bias") if bias else ("weight",))}
    keys = set(module.state_dict())
    extra = sorted(keys - expected)
    if extra:
        raise GradingError(
            name,
            f"{what}: the state dict holds {extra} besides the three linears. Build the mask in forward for "
            "the actual T, or register it with register_buffer(..., persistent=False).",
        )


def _causal_nan_hints(name: str, what: str, got: Tensor, expected: Tensor) -> None:
    """NaN rows are the fingerprint of a mask that blocks a whole row of the causal pattern."""
    nan_rows = torch.isnan(got).any(dim=-1).any(dim=0)  # (T,)
    if not nan_rows.any() or torch.isnan(expected).any():
        return
    T = got.shape[1]
    if nan_rows[0] and not nan_rows[1:].any():
        raise GradingError(
            name,
            f"{what}: row 0 of your output is NaN. The first token has no key left — is the diagonal excluded "
            "from your causal mask? A token may attend to itself: keep the diagonal (tril, not tril(-1)).",
        )
    if nan_rows[T - 1] and not nan_rows[: T - 1].any():
        raise GradingError(
            name,
            f"{what}: the last row of your output is NaN: the last token attended to nothing. Is the mask "
            "inverted? True means 'may attend' (on and below the diagonal); fill the scores where it is False.",
        )
    raise GradingError(name, f"{what}: your output has NaN rows: some query has every key masked.")


def _dropout_candidates(weights: Tensor, v: Tensor, factor: float) -> Tensor:
    """Every output dropout on the weights can give: (B, T, 2^T, D) for weights (B, T, T), v (B, T, D)."""
    T = weights.shape[-1]
    keep = torch.tensor(list(itertools.product([0.0, 1.0], repeat=T)))  # (S, T): which weights survive
    return torch.einsum("sk,bqk,bkd->bqsd", keep, weights.double(), v.double()) * factor


def _rows_among(got: Tensor, candidates: Tensor) -> bool:
    diff = (candidates - got.double()[:, :, None, :]).abs().amax(dim=-1)  # (B, T, S)
    return bool((diff.min(dim=-1).values < 1e-4).all())


def _check_dropout_on_weights(name: str, answer: Any) -> None:
    """In training mode with dropout p, each output row must be (sum over surviving keys of w v) / (1 - p)."""
    B, T, d_in, d_out, p = 4, 4, 5, 3, _DROPOUT
    what = f"CausalSelfAttention({d_in}, {d_out}, context_length={T}, dropout={p})"
    module = build_module(name, answer, d_in, d_out, T, what=what, seed=7, dropout=p)
    reference = ref.CausalSelfAttention(d_in, d_out, T).eval()
    copy_linears(module, reference, _QKV)
    x = core.random_tensor(B, T, d_in, seed=77)
    expected_eval, weights = reference(x, need_weights=True)  # (B, T, d_out), (B, T, T)
    v = reference.W_value(x)
    call = f"{what} in training mode (module.train())"
    got = call_in_training_mode(name, module, x.clone(), what=call, seed=1234)
    expect_tensor_output(name, got, call)
    if got.shape != expected_eval.shape:
        expect_close(name, got, expected_eval, call)  # reports the shapes
    if same_values(got, expected_eval, atol=1e-6, rtol=1e-5):
        raise GradingError(
            name,
            f"{call}: the output is the same as without dropout. Apply self.dropout = nn.Dropout(dropout) to "
            "the attention weights in forward (nn.Dropout is active only in training mode).",
        )
    if _rows_among(got, _dropout_candidates(weights, v, 1 / (1 - p))):
        pass
    elif _rows_among(got, _dropout_candidates(weights, v, 1.0)):
        raise GradingError(
            name,
            f"{call}: the surviving attention weights were not rescaled by 1/(1 - p). Use nn.Dropout, which "
            "does that, so the expected output is unchanged by dropout.",
        )
    else:
        scaled = expected_eval.double() / (1 - p)
        elementwise = (got.double().abs() < 1e-6) | ((got.double() - scaled).abs() < 1e-4)
        if bool(elementwise.all()):
            raise GradingError(
                name,
                f"{call}: dropout was applied to the output (the context vectors), not to the attention "
                "weights. Drop attention weights: weights = self.dropout(weights), then weights @ values.",
            )
        raise GradingError(
            name,
            f"{call}: your output is not what dropout on the attention weights gives. Apply nn.Dropout once, "
            "to the weights after the softmax and before multiplying by the values.",
        )
    again = call_without_grad(name, module, x.clone(), what=f"{what} back in eval mode (module.eval())")
    expect_close(name, again, expected_eval, f"{what} in eval mode", hint="In eval mode nothing is dropped.")


# ------------------------------------------------------------------------------------------------------------
# Exercise 6: CrossAttention
# ------------------------------------------------------------------------------------------------------------

# (B, Tq, Tk, d_model, d_memory or None, mask kind, qkv_bias, seed)
_CROSS_CASES: list = [
    (2, 3, 5, 8, None, None, False, 0),
    (1, 4, 2, 6, 10, None, False, 1),
    (2, 5, 4, 8, None, "padding", True, 2),
    (2, 4, 4, 6, None, None, False, 3),
]


@keeps_rng
def check_CrossAttention(answer: Any, cases: list | None = None) -> Passed:
    """Check `CrossAttention(d_model, d_memory=None, qkv_bias=False)` and `forward(x, memory, memory_mask)`.

    A case is `(B, Tq, Tk, d_model, d_memory, mask_kind, qkv_bias, seed)`; d_memory None uses the default
    (d_model); mask_kind None, "padding" (B, 1, Tk) or "random" (B, Tq, Tk).
    """
    name = Graded(ref.CrossAttention)
    check_definition(answer, name)
    run = tagged_cases(cases, _CROSS_CASES)
    for tag, (B, Tq, Tk, d_model, d_memory, kind, bias, seed) in run:
        _cross_case(name, answer, B, Tq, Tk, d_model, d_memory, kind, bias, seed, tag)
    return Passed(name, len(run), hidden=cases is not None)


def _cross_case(name, answer, B, Tq, Tk, d_model, d_memory, kind, bias, seed, tag) -> None:
    d_mem = d_model if d_memory is None else d_memory
    if d_memory is None:
        what = call_label(name, f"{d_model}, qkv_bias={bias}", tag)
        module = build_module(name, answer, d_model, what=what, seed=seed, qkv_bias=bias)
    else:
        what = call_label(name, f"{d_model}, d_memory={d_memory}, qkv_bias={bias}", tag)
        module = build_module(name, answer, d_model, d_memory, what=what, seed=seed, qkv_bias=bias)
    if core.is_instance(getattr(module, "W_query", None), nn.Linear) and module.W_query.in_features == d_mem != d_model:
        raise GradingError(
            name,
            f"{what}: W_query reads d_memory features, so queries would come from the memory. "
            "Queries come from the decoder x: W_query = nn.Linear(d_model, d_model); keys and values from "
            "the memory: nn.Linear(d_memory, d_model).",
        )
    shapes = {
        "W_query": (d_model, d_model, "the decoder input x"),
        "W_key": (d_mem, d_model, "the encoder memory"),
        "W_value": (d_mem, d_model, "the encoder memory"),
    }
    expect_linears(name, module, shapes, bias, what)
    reference = ref.CrossAttention(d_model, d_mem, qkv_bias=bias)
    copy_linears(module, reference, _QKV)
    x = core.random_tensor(B, Tq, d_model, seed=seed + 100)
    memory = core.random_tensor(B, Tk, d_mem, seed=seed + 200)
    mask = make_mask(kind, (B,), Tq, Tk, seed + 300)  # padding: (B, 1, Tk), random: (B, Tq, Tk)
    expected = reference(x, memory, mask)
    call = f"{what} on x {tuple(x.shape)} and memory {tuple(memory.shape)}"
    call += f" with memory_mask {tuple(mask.shape)}" if mask is not None else ""
    call = call if tag is None else f"{what} on its inputs"
    args = (x.clone(), memory.clone()) + ((mask.clone(),) if mask is not None else ())
    try:
        got = call_without_grad(name, module, *args, what=call)
    except GradingError as error:
        raise GradingError(
            name,
            f"{error.message} — remember: queries come from x (the decoder), keys and values from memory "
            "(the encoder).",
        ) from None
    expect_tensor_output(name, got, call)
    if tuple(got.shape) == (B, Tk, d_model) and Tk != Tq:
        raise GradingError(
            name,
            f"{call}: your output has shape {tuple(got.shape)}, one row per memory position (Tk) instead of "
            "one per decoder position (Tq). Queries must come from the decoder x, keys and values from "
            "the memory.",
        )
    q, k, v = reference.W_query(x), reference.W_key(memory), reference.W_value(memory)
    variants = attention_mistakes(
        lambda **options: attend(q, k, v, mask, **options)[0],
        d_model,
        "d_model",
        n_dims=3,
        extra_scales=[(math.sqrt(d_mem), "sqrt(d_memory)")] if d_mem != d_model else [],
        mask_label="memory_mask" if mask is not None else None,
    )
    if d_mem == d_model:
        from_memory = "the queries were taken from the memory (the encoder) instead of the decoder input x: "
        from_memory += "q = W_query(x), k = W_key(memory), v = W_value(memory)."
        variants += [
            (lambda: attend(reference.W_query(memory), reference.W_key(x), reference.W_value(x))[0], from_memory),
            (lambda: attend(reference.W_query(memory), k, v)[0], from_memory),
            (
                lambda: attend(q, reference.W_key(x), reference.W_value(x))[0],
                "keys and values were taken from x: in cross-attention they come from the memory (the encoder).",
            ),
        ]
    name_mistake(name, call, got, expected, variants)
    expect_close(name, got, expected, call)
