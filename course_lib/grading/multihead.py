"""Graders of lesson 05 — Multi-head attention (`split_merge_heads`, `MultiHeadAttention`,
`multihead_parameter_count`).

The recipe is lesson 04's (see `course_lib.grading.attention`): the from-scratch guard first, expected values
from `course_lib.multihead` computed outside the learner's call, the learner's weights copied into the
reference module, and on a mismatch each known mistake recomputed and named when it matches: the mistakes of
single-head attention (`course_lib.grading.attention_common`), and heads split or merged with a bare `view`
(no transpose), heads interleaved, the [q | k | v] layout read per head, scaling by sqrt(d_model) instead of
sqrt(d_head), the output projection missing, the mask not combined with the causal mask, and the returned
weights taken before dropout.

Shape legend: B batch, T time, H heads, D head size (d_head), C / d_model channels (= H * D).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import multihead as ref
from course_lib.grading.attention_common import (
    attend,
    attention_mistakes,
    build_module,
    call_in_training_mode,
    call_without_grad,
    expect_tensor_output,
    keeps_rng,
    make_mask,
    name_mistake,
    same_values,
)
from course_lib.grading.kit import core
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Passed,
    call_label,
    describe,
    expect_close,
    is_int,
    tagged_cases,
)
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.multihead_heads import check_split_merge_heads

__all__ = ["check_split_merge_heads", "check_MultiHeadAttention", "check_multihead_parameter_count"]


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: MultiHeadAttention
# ------------------------------------------------------------------------------------------------------------

# (B, T, d_model, n_heads, causal, mask kind, bias, seed); masks: "padding" (B, 1, 1, T), "random" (B, 1, T, T)
_MHA_CASES: list = [
    (2, 5, 12, 3, False, None, True, 0),
    (1, 6, 8, 2, True, None, True, 1),
    (2, 4, 8, 4, True, "padding", False, 2),
    (2, 5, 6, 2, False, "random", True, 3),
]
_DROPOUT = 0.5


@keeps_rng
def check_MultiHeadAttention(answer: Any, cases: list | None = None) -> Passed:
    """Check `MultiHeadAttention(d_model, n_heads, dropout=0.0, causal=False, bias=True)`.

    A case is `(B, T, d_model, n_heads, causal, mask_kind, bias, seed)`; mask_kind None, "padding" or
    "random". Each case checks the state dict, the output and `need_weights=True`; every run also checks
    dropout (the returned weights are the ones that multiply V).
    """
    name = Graded(ref.MultiHeadAttention)
    check_definition(answer, name)
    run = tagged_cases(cases, _MHA_CASES)
    for tag, (B, T, d_model, n_heads, causal, kind, bias, seed) in run:
        _mha_case(name, answer, B, T, d_model, n_heads, causal, kind, bias, seed, tag)
    _check_mha_dropout(name, answer)
    return Passed(name, 2 * len(run) + 1, hidden=cases is not None)


def _expect_mha_state(name: str, module: nn.Module, d_model: int, bias: bool, what: str) -> None:
    state = module.state_dict()
    keys = set(state)
    if "out_proj.weight" not in keys:
        raise GradingError(
            name,
            f"{what}: missing output projection. The contract has self.out_proj = nn.Linear(d_model, d_model), "
            "applied to the merged heads: it lets the heads' outputs mix.",
        )
    if "qkv.weight" not in keys:
        raise GradingError(
            name,
            f"{what}: no `qkv` layer (state dict keys: {sorted(keys)}). The contract fuses the three projections "
            "into one: self.qkv = nn.Linear(d_model, 3 * d_model), whose output is [q | k | v].",
        )
    expected = {f"{layer}.{p}" for layer in ("qkv", "out_proj") for p in (("weight", "bias") if bias else ("weight",))}
    if keys != expected:
        extra, missing = sorted(keys - expected), sorted(expected - keys)
        detail = f"extra {extra}" if extra else ""
        detail += ("; " if extra and missing else "") + (f"missing {missing}" if missing else "")
        raise GradingError(
            name,
            f"{what}: the state dict should hold exactly {sorted(expected)} ({detail}). `bias` applies to both "
            "linears; a causal mask belongs in forward (or a buffer with persistent=False).",
        )
    for key, shape in (("qkv.weight", (3 * d_model, d_model)), ("out_proj.weight", (d_model, d_model))):
        if tuple(state[key].shape) != shape:
            raise GradingError(
                name, f"{what}: {key} has shape {tuple(state[key].shape)}, expected {shape} (out, in features)."
            )


def _mha_forward(
    module: ref.MultiHeadAttention,
    x: Tensor,
    allowed: Tensor | None,
    *,
    split: str = "right",
    merge: str = "right",
    project: bool = True,
    **options: Any,
) -> Tensor:
    """The reference forward with a chosen mistake; `options` go to `attend` (scale, dim, mask_mode)."""
    B, T, C = x.shape
    H = module.n_heads
    D = C // H
    qkv = module.qkv(x)  # (B, T, 3C)
    if split == "per_head":  # [q_h | k_h | v_h] for each head instead of [q | k | v]
        q, k, v = (t.transpose(1, 2) for t in qkv.reshape(B, T, H, 3 * D).split(D, dim=-1))  # (B, H, T, D)
    elif split == "bare_view":
        q, k, v = (t.reshape(B, H, T, D) for t in qkv.split(C, dim=-1))
    else:
        q, k, v = (ref.split_heads(t, H) for t in qkv.split(C, dim=-1))  # (B, H, T, D) each
    out, _ = attend(q, k, v, allowed, **options)  # (B, H, T, D)
    out = out.reshape(B, T, C) if merge == "bare_view" else ref.merge_heads(out)  # (B, T, C)
    return module.out_proj(out) if project else out


def _mha_case(name, answer, B, T, d_model, n_heads, causal, kind, bias, seed, tag) -> None:
    what = call_label(name, f"{d_model}, {n_heads}, causal={causal}, bias={bias}", tag)
    module = build_module(name, answer, d_model, n_heads, what=what, seed=seed, causal=causal, bias=bias)
    _expect_mha_state(name, module, d_model, bias, what)
    reference = ref.MultiHeadAttention(d_model, n_heads, causal=causal, bias=bias).eval()
    reference.load_state_dict(module.state_dict())
    x = core.random_tensor(B, T, d_model, seed=seed + 100)
    mask = make_mask(kind, (B, 1), T, T, seed + 200)
    expected, expected_w = reference(x, mask, need_weights=True)
    call = f"{what} on x {tuple(x.shape)}" + (f" with a {kind} mask {tuple(mask.shape)}" if mask is not None else "")
    call = call if tag is None else f"{what} on its inputs"
    mask_args = (mask.clone(),) if mask is not None else ()
    view_of_split = (
        lambda message: "view size is not compatible" in message,
        "the q, k, v you get from splitting the qkv output are views into it, not contiguous tensors: use "
        ".reshape(B, T, n_heads, d_head) (then .transpose(1, 2)).",
    )
    got = call_without_grad(name, module, x.clone(), *mask_args, what=call, hints=[view_of_split])
    expect_tensor_output(name, got, call, hint="Return (out, weights) only when need_weights=True.")

    tril = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    allowed = (tril if mask is None else tril & mask) if causal else mask
    forward = lambda **options: _mha_forward(reference, x, allowed, **options)  # noqa: E731
    d_head = d_model // n_heads
    label = None if allowed is None else ("causal mask" if causal and mask is None else "mask")
    variants = attention_mistakes(
        forward, d_head, "d_head", n_dims=4, extra_scales=[(math.sqrt(d_model), "sqrt(d_model)")], mask_label=label
    )
    variants += [
        (
            lambda: forward(split="bare_view"),
            "the heads were split with a bare view to (B, H, T, D), without a transpose. View q, k and v as "
            "(B, T, H, D), then .transpose(1, 2).",
        ),
        (
            lambda: forward(merge="bare_view"),
            "the heads were merged with a bare view/reshape, without transposing back first: "
            "out.transpose(1, 2).reshape(B, T, d_model).",
        ),
        (
            lambda: forward(split="per_head"),
            "the qkv output was read per head as [q_h | k_h | v_h]. The contract's layout is [q | k | v], each "
            "d_model wide with the heads contiguous inside: split(d_model, dim=-1) first, then split the heads.",
        ),
        (
            lambda: forward(project=False),
            "missing output projection: after merging the heads, apply self.out_proj (d_model -> d_model).",
        ),
    ]
    if causal and mask is not None:
        variants += [
            (
                lambda: _mha_forward(reference, x, mask),
                "with causal=True and a mask, the causal mask was dropped. Combine them: a key is allowed only "
                "if both allow it (causal_mask & mask).",
            ),
            (
                lambda: _mha_forward(reference, x, tril),
                "with causal=True and a mask, the mask was dropped. Combine them: a key is allowed only if both "
                "allow it (causal_mask & mask).",
            ),
        ]
    if causal:
        no_diagonal = torch.ones(T, T, dtype=torch.bool).tril(-1)
        variants.append(
            (
                lambda: _mha_forward(reference, x, no_diagonal if mask is None else no_diagonal & mask),
                "the diagonal is excluded from the causal mask: a token may attend to itself (tril, not "
                "tril(-1)); without it the first token has no key at all and its row becomes NaN.",
            )
        )
        variants.append(
            (
                lambda: _mha_forward(reference, x, None if mask is None else mask),
                "causal=True but later positions were attended: apply the causal mask (True on and below the "
                "diagonal) to the scores.",
            )
        )
    name_mistake(name, call, got, expected, variants)
    expect_close(name, got, expected, call)

    call_w = f"{call}, need_weights=True"
    result = call_without_grad(name, module, x.clone(), *mask_args, what=call_w, need_weights=True)
    if not (isinstance(result, tuple | list) and len(result) == 2 and all(isinstance(t, Tensor) for t in result)):
        raise GradingError(name, f"{call_w} should return a pair (out, weights), got {describe(result)}.")
    out, weights = result
    if tuple(weights.shape) == (B, T, T) and n_heads > 1:
        raise GradingError(
            name,
            f"{call_w}: the weights have shape {tuple(weights.shape)} — averaged over the heads? Return every head's "
            "weights, shape (B, H, T, T).",
        )
    expect_close(name, weights, expected_w, f"{call_w}: the weights")
    expect_close(name, out, expected, f"{call_w}: the output")


def _check_mha_dropout(name: str, answer: Any) -> None:
    """In training mode the returned weights are a dropout of the weights, and they are what multiplied V."""
    B, T, d_model, n_heads, p = 2, 4, 8, 2, _DROPOUT
    what = f"MultiHeadAttention({d_model}, {n_heads}, dropout={p})"
    module = build_module(name, answer, d_model, n_heads, what=what, seed=5, dropout=p)
    _expect_mha_state(name, module, d_model, True, what)
    reference = ref.MultiHeadAttention(d_model, n_heads).eval()
    reference.load_state_dict(module.state_dict())
    x = core.random_tensor(B, T, d_model, seed=55)
    expected, expected_w = reference(x, need_weights=True)
    v = ref.split_heads(reference.qkv(x)[..., 2 * d_model :], n_heads)  # (B, H, T, D)
    call = f"{what} in training mode, need_weights=True"
    result = call_in_training_mode(name, module, x.clone(), what=call, seed=4321, need_weights=True)
    if not (isinstance(result, tuple | list) and len(result) == 2 and all(isinstance(t, Tensor) for t in result)):
        raise GradingError(name, f"{call} should return a pair (out, weights), got {describe(result)}.")
    out, weights = result
    if weights.shape != expected_w.shape:
        expect_close(name, weights, expected_w, f"{call}: the weights")
    if same_values(weights, expected_w, atol=1e-6, rtol=1e-5):
        if same_values(out, expected, atol=1e-6, rtol=1e-5):
            raise GradingError(
                name,
                f"{call}: nothing was dropped. Apply self.dropout = nn.Dropout(dropout) to the attention weights "
                "(it is active only in training mode).",
            )
        raise GradingError(
            name,
            f"{call}: the returned weights are the ones before dropout. Return the weights after dropout — "
            "exactly the ones that multiply V, as PyTorch does.",
        )
    w, w0 = weights.detach().double(), expected_w.double()
    if not bool(((w.abs() < 1e-6) | ((w * (1 - p) - w0).abs() < 1e-5)).all()):
        raise GradingError(
            name,
            f"{call}: the returned weights are not a dropout of the attention weights (each one either 0 or "
            "w / (1 - p)). Apply nn.Dropout to the weights after the softmax.",
        )
    with torch.no_grad():
        from_weights = reference.out_proj(ref.merge_heads(weights.detach() @ v))  # (B, T, d_model)
    if not same_values(out, from_weights):
        raise GradingError(
            name,
            f"{call}: your output is not out_proj(merge_heads(weights @ v)) for the weights you returned. The "
            "returned weights must be exactly the ones that multiply V (after dropout).",
        )
    again = call_without_grad(name, module, x.clone(), what=f"{what} back in eval mode")
    expect_close(name, again, expected, f"{what} in eval mode", hint="In eval mode nothing is dropped.")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: multihead_parameter_count
# ------------------------------------------------------------------------------------------------------------

# (d_model, qkv_bias, out_bias)
_COUNT_CASES: list = [(8, True, True), (768, True, True), (12, False, False), (16, True, False), (10, False, True)]


@keeps_rng
def check_multihead_parameter_count(answer: Any, cases: list | None = None) -> Passed:
    """Check `multihead_parameter_count(d_model, qkv_bias=True, out_bias=True)`; a case is
    `(d_model, qkv_bias, out_bias)`."""
    name = Graded(ref.multihead_parameter_count)
    check_definition(answer, name)
    run = tagged_cases(cases, _COUNT_CASES)
    for tag, (d, qkv_bias, out_bias) in run:
        expected = ref.multihead_parameter_count(d, qkv_bias=qkv_bias, out_bias=out_bias)
        what = call_label(name, f"{d}, qkv_bias={qkv_bias}, out_bias={out_bias}", tag)
        got = call_without_grad(name, answer, d, what=what, qkv_bias=qkv_bias, out_bias=out_bias)
        if isinstance(got, Tensor) or not is_int(got):
            raise GradingError(name, f"{what} should return a Python int, got {type(got).__name__}: {describe(got)}.")
        if got == expected:
            continue
        qkv_b, out_b = 3 * d if qkv_bias else 0, d if out_bias else 0
        known = [
            (3 * d * d + qkv_b, "the output projection (d_model² weights, plus d_model biases) is missing."),
            (4 * d * d, "the biases are missing: qkv has 3*d_model of them, out_proj d_model (when enabled)."),
            (4 * d * d + 3 * d + d, "biases were counted although a bias flag is False."),
            (
                4 * d * d + (d if qkv_bias else 0) + out_b,
                "the qkv bias has 3*d_model entries (q, k and v), not d_model.",
            ),
            (3 * d * d + qkv_b + out_b, "the weights of q, k, v and the output projection are 4 * d_model², not 3 *."),
        ]
        hint = next((mistake for value, mistake in known if value == got and value != expected), "")
        if not hint:
            hint = "Count qkv = nn.Linear(d_model, 3*d_model) and out_proj = nn.Linear(d_model, d_model)."
        shown = f" returned {got}, expected {expected}" if tag is None else " returned a wrong count"
        raise GradingError(name, f"{what}{shown}: {hint}")
    return Passed(name, len(run), hidden=cases is not None)
