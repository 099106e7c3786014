"""Graders of lesson 12 — Beyond GPT-2 (`rms_norm`, `rope_attention`, `SwiGLU`, `repeat_kv`, `ModernAttention`,
`ModernBlock`, `newton_schulz`, `load_llama_weights`).

`rms_norm` and `rope_attention` are checked here; `SwiGLU` and `repeat_kv` in `course_lib.grading.modern_layers`,
`ModernAttention` in `modern_attention`, `ModernBlock` in `modern_blocks`, `newton_schulz` in `modern_muon` and
`load_llama_weights` in `modern_weights`, all re-exported, so every test cell imports from this module. Expected values
come from `course_lib.modern`, computed outside the learner's call. On a mismatch each known mistake is recomputed
on the same input and named when the learner's output equals it: for `rms_norm` the mean subtracted (LayerNorm),
the mean of x instead of the mean of its squares, the standard deviation instead of the root mean square (biased or
not), ε outside the square root or left out, the square root left out, a sum instead of a mean, the wrong dimension,
the weight not applied, LayerNorm's default ε, and float32 output for a bf16 input; for `rope_attention` values
rotated too, queries or keys not rotated, the "rotate half" layout, the rotation the wrong way round, no causal
mask, the wrong scale, the softmax over the wrong dimension.

Shape legend: B batch, H heads, T time, D head size, C channels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from course_lib import modern as ref
from course_lib.grading.attention_common import call_without_grad, expect_tensor_output, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_unchanged, tagged_cases
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.modern_attention import check_ModernAttention, layer_cache
from course_lib.grading.modern_blocks import check_ModernBlock
from course_lib.grading.modern_layers import check_repeat_kv, check_SwiGLU, returns_its_input
from course_lib.grading.modern_muon import check_newton_schulz
from course_lib.grading.modern_weights import check_load_llama_weights, head_is_tied, llama_to_load
from course_lib.position import rope_rotate_half

__all__ = [
    "check_ModernAttention",
    "check_ModernBlock",
    "check_SwiGLU",
    "check_load_llama_weights",
    "check_newton_schulz",
    "check_repeat_kv",
    "check_rms_norm",
    "check_rope_attention",
    "head_is_tied",
    "layer_cache",
    "llama_to_load",
    "returns_its_input",
]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}

# ------------------------------------------------------------------------------------------------------------
# Exercise 1: rms_norm

# (shape, eps or None for the default, scale of x, seed, dtype). Small inputs (scale 0.001) make ε matter; the
# last dimension never equals another; the bf16 case checks that the output keeps the input's dtype.
_RMS_CASES: list = [
    ([2, 3, 8], 1e-6, 1.0, 0, "float32"),
    ([4, 6], None, 0.001, 1, "float32"),
    ([3, 5], 0.1, 1.0, 2, "float32"),
    ([2, 4, 16], 1e-6, 1.0, 3, "bfloat16"),
]
_BF16_TOLERANCE = 2e-2  # a few bf16 roundings on values of about 1 (bf16 keeps 8 bits of mantissa)


def _rms(x: Tensor, dims: tuple[int, ...], eps: float, *, root: bool = True, mean: bool = True, inside: bool = True):
    """x divided by its root mean square over `dims`, with one mistake switched on (all defaults: right)."""
    square = x.pow(2).mean(dim=dims, keepdim=True) if mean else x.pow(2).sum(dim=dims, keepdim=True)
    if not root:
        return x / (square + eps)
    return x / (torch.sqrt(square + eps) if inside else torch.sqrt(square) + eps)


def _rms_norm_mistakes(x: Tensor, weight: Tensor, eps: float, eps_given: bool) -> list[Variant]:
    last = (x.dim() - 1,)
    right = _rms(x, last, eps)
    centred = x - x.mean(dim=-1, keepdim=True)
    variants: list[Variant] = [
        (
            lambda: _rms(centred, last, eps) * weight,
            "the mean was subtracted first: that is LayerNorm (without its bias). RMSNorm divides x itself by "
            "sqrt(mean(x**2) + eps) and never centres it.",
        ),
        (
            lambda: _rms(x, last, eps, inside=False) * weight,
            "ε was added outside the square root, x / (sqrt(mean(x**2)) + ε). It belongs inside: "
            "x / sqrt(mean(x**2) + ε).",
        ),
        (
            lambda: _rms(x, last, 0.0) * weight,
            f"ε was left out (eps={eps} here): divide by sqrt(mean(x**2) + eps), which also keeps a zero vector "
            "finite.",
        ),
        (
            lambda: _rms(x, last, eps, root=False) * weight,
            "the square root is missing: divide by sqrt(mean(x**2) + eps), the root of the mean square, not by "
            "the mean square itself.",
        ),
        (
            lambda: _rms(x, last, eps, mean=False) * weight,
            "the squares were summed, not averaged: that divides by the vector's length (its L2 norm). RMSNorm "
            "takes the mean, x.pow(2).mean(dim=-1, keepdim=True), so the result has a root mean square of 1.",
        ),
        (
            lambda: x / torch.sqrt(x.mean(dim=-1, keepdim=True) + eps) * weight,
            "the mean of x was taken, not the mean of its squares: RMSNorm divides by sqrt(mean(x**2) + eps), "
            "x.pow(2).mean(dim=-1, keepdim=True).",
        ),
        (
            lambda: x / torch.sqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps) * weight,
            "x was divided by its standard deviation (the root mean square of x - mean(x)) instead of its root mean "
            "square: take the mean of x**2 itself, without subtracting the mean.",
        ),
        (
            lambda: x / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) * weight,
            "x was divided by its standard deviation (torch.var or .std) instead of its root mean square: RMSNorm "
            "takes the mean of x**2 itself, sqrt(mean(x**2) + eps).",
        ),
        (lambda: right, "the weight was not applied: return x / rms * weight."),
        (lambda: right + weight, "the weight was added: it is a gain, return x / rms * weight."),
        (
            lambda: _rms(x, tuple(range(x.dim())), eps) * weight,
            "the mean square was taken over the whole tensor: RMSNorm normalises each vector on its own, over the "
            "last dimension only (dim=-1, keepdim=True).",
        ),
    ]
    if not eps_given:  # the default was used: LayerNorm's 1e-5 in the signature is a likely slip
        variants.append(
            (
                lambda: _rms(x, last, 1e-5) * weight,
                "the default eps is 1e-5 (LayerNorm's); the contract's default is eps=1e-6.",
            )
        )
    for dim in range(x.dim() - 1):
        variants.append(
            (
                lambda dim=dim: _rms(x, (dim,), eps) * weight,
                f"the mean square was taken over dim={dim}, across vectors. RMSNorm takes it over the last "
                "dimension (dim=-1, keepdim=True), one vector at a time.",
            )
        )
    return variants


@keeps_rng
def check_rms_norm(answer: Any, cases: list | None = None) -> Passed:
    """Check `rms_norm(x, weight, eps=1e-6)`; a case is `(shape, eps or None, scale, seed, dtype name)`."""
    name = Graded(ref.rms_norm)
    check_definition(answer, name)
    run = tagged_cases(cases, _RMS_CASES)
    for tag, (shape, eps, scale, seed, dtype_name) in run:
        dtype = _DTYPES[dtype_name]
        C = shape[-1]
        x = ((core.random_tensor(*shape, seed=seed) + 2.0) * scale).to(dtype)  # an offset: a mean to subtract
        weight = (1.0 + 0.5 * core.random_tensor(C, seed=seed + 1)).to(dtype)
        used_eps = 1e-6 if eps is None else eps
        expected = ref.rms_norm(x.double(), weight.double(), used_eps)  # float64, from the very same inputs
        shown = f"x of shape {tuple(shape)}" + ("" if dtype is torch.float32 else f" in {dtype_name}")
        what = call_label(name, shown + ", weight" + ("" if eps is None else f", eps={eps}"), tag)
        given = (x.clone(), weight.clone())
        extra = {} if eps is None else {"eps": eps}
        got = call_without_grad(name, answer, *given, what=what, **extra)
        expect_unchanged(name, {"x": (given[0], x), "weight": (given[1], weight)}, what)
        expect_tensor_output(name, got, what)
        if got.dtype != dtype:
            raise GradingError(
                name,
                f"{what} returned {got.dtype} for a {dtype} input: the contract computes in the input's dtype. "
                + (
                    "Was x (or the result) turned into float32 with .float() or .to(torch.float32)? Compute on x "
                    "as it comes (or turn the result back with .to(x.dtype))."
                    if got.dtype == torch.float32
                    else "Compute on x as it comes."
                ),
            )
        tolerance = _BF16_TOLERANCE if dtype is torch.bfloat16 else 1e-5
        with torch.no_grad():
            diagnose_tensor(
                name,
                what,
                got.double(),
                expected,
                _rms_norm_mistakes(x.double(), weight.double(), used_eps, eps is not None),
                atol=tolerance,
                rtol=tolerance,
            )
    _check_zero_vector(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _check_zero_vector(name: Graded, answer: Any) -> None:
    """A vector of zeros has root mean square 0: with ε inside the root, the result is 0, not NaN."""
    x, weight = torch.zeros(2, 4), torch.ones(4)
    what = f"{name}(a (2, 4) tensor of zeros, weight=ones)"
    got = call_without_grad(name, answer, x, weight, what=what)
    expect_tensor_output(name, got, what)
    if torch.isnan(got).any() or torch.isinf(got).any():
        raise GradingError(
            name, f"{what} gave NaN or inf: the mean square of a zero vector is 0, so ε must be inside the root."
        )
    core.expect_close(name, got, torch.zeros(2, 4), what, hint="0 divided by sqrt(0 + eps) is 0.")


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: rope_attention

# (B, H, T, D, seed) or (B, H, T, D, seed, base). D >= 4 tells the interleaved and "rotate half" layouts apart.
_ROPE_CASES: list = [(2, 3, 6, 8, 0), (1, 2, 9, 4, 1), (2, 1, 5, 6, 2, 500.0)]
BASE = 10000.0


def _attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    base: float,
    *,
    rotated: str = "qk",
    layout: str = "interleaved",
    sign: float = 1.0,
    causal: bool = True,
    scale: str = "sqrt",
    softmax_dim: int = -1,
) -> Tensor:
    """Rotary causal attention in float64 with one mistake switched on (all defaults: right)."""
    T, D = q.shape[-2], q.shape[-1]
    if layout == "halves":
        rotate = lambda t: rope_rotate_half(t, base)  # noqa: E731
    else:
        cos, sin = ref.rope_cos_sin(T, D, base, torch.float64)  # (T, D/2)
        rotate = lambda t: ref.rotate_pairs(t, cos, sign * sin)  # noqa: E731 - sign -1: the opposite rotation
    q, k, v = (rotate(t) if letter in rotated else t for letter, t in zip("qkv", (q, k, v), strict=True))
    divisor = {"sqrt": math.sqrt(D), "D": D, "none": 1.0}[scale]
    scores = q @ k.transpose(-2, -1) / divisor  # (B, H, T, T)
    if causal:
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=softmax_dim).nan_to_num() @ v  # (B, H, T, D)


def _rope_attention_mistakes(q: Tensor, k: Tensor, v: Tensor, base: float) -> list[Variant]:
    run = lambda **wrong: lambda: _attention(q, k, v, base, **wrong)  # noqa: E731
    return [
        (run(rotated="qkv"), "the values were rotated too: RoPE rotates queries and keys only; v carries content."),
        (run(rotated=""), "nothing was rotated: rotate q and k with lesson 03's apply_rope before the scores."),
        (run(rotated="q"), "only the queries were rotated: rotate the keys too, with the same angles."),
        (run(rotated="k"), "only the keys were rotated: rotate the queries too, with the same angles."),
        (
            run(layout="halves"),
            "this is the 'rotate half' layout (GPT-NeoX, Hugging Face Llama), which pairs channel i with channel "
            "i + D/2. The contract pairs neighbours, (x[..., 2i], x[..., 2i+1]), as lesson 03's apply_rope.",
        ),
        (
            run(sign=-1.0),
            "the pairs were rotated the wrong way (by minus the angle): (a cos θ − b sin θ, a sin θ + b cos θ).",
        ),
        (run(causal=False), "there is no causal mask: query m may only attend to keys n <= m."),
        (run(scale="D"), "the scores were divided by D; divide by sqrt(D), the head size's square root."),
        (run(scale="none"), "the scores were not scaled: divide q @ k^T by sqrt(D)."),
        (
            run(softmax_dim=-2),
            "the softmax runs over the queries (dim=-2): each query's weights over the keys must sum to 1 (dim=-1).",
        ),
    ]


def check_rope_attention(answer: Any, cases: list | None = None) -> Passed:
    """Check `rope_attention(q, k, v, base=10000.0)`; a case is `(B, H, T, D, seed)` or `(B, H, T, D, seed, base)`."""
    name = Graded(ref.rope_attention)
    check_definition(answer, name)
    run = tagged_cases(cases, _ROPE_CASES)
    for tag, case in run:
        B, H, T, D, seed = case[:5]
        base = float(case[5]) if len(case) > 5 else BASE
        q, k, v = (core.random_tensor(B, H, T, D, seed=seed + i) for i in range(3))  # (B, H, T, D) each
        expected = ref.rope_attention(q.double(), k.double(), v.double(), base)
        shown = f"q, k, v of shape {(B, H, T, D)}" + ("" if len(case) <= 5 else f", base={base:g}")
        what = call_label(name, shown, tag)
        given = (q.clone(), k.clone(), v.clone())
        args = given + ((base,) if len(case) > 5 else ())
        got = call_without_grad(name, answer, *args, what=what)
        expect_unchanged(name, {"q": (given[0], q), "k": (given[1], k), "v": (given[2], v)}, what)
        expect_tensor_output(name, got, what)
        with torch.no_grad():
            diagnose_tensor(
                name, what, got, expected.float(), _rope_attention_mistakes(q.double(), k.double(), v.double(), base)
            )
    return Passed(name, len(run), hidden=cases is not None)
