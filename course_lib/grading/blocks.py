"""Graders of lesson 06 — Blocks (`layer_norm`, `FeedForward`, `TransformerBlock`, `EncoderLayer`).

`layer_norm` and `FeedForward` are checked here; the two layers in `course_lib.grading.blocks_layers`,
re-exported, so every test cell imports from this module. Expected values come from `course_lib.blocks`,
computed outside the learner's call. On a mismatch each known mistake is recomputed and named when the learner's
output equals it: for `layer_norm` the unbiased variance, ε outside the square root or left out, the wrong
dimension, the mean not subtracted, weight and bias swapped or missing; for `FeedForward` ReLU, the exact (erf)
GELU or torch.tanh where GELU's tanh approximation is asked, no activation, an activation after fc2 as well; a
training-mode run checks that dropout acts on the output (after fc2), and the state dict checks the names.

Shape legend: B batch, T time, C / d_model channels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import blocks as ref
from course_lib.grading.attention_common import (
    build_module,
    call_in_training_mode,
    call_without_grad,
    expect_tensor_output,
    keeps_rng,
)
from course_lib.grading.blocks_layers import check_EncoderLayer, check_TransformerBlock, expect_state
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_close, tagged_cases
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_layer_norm", "check_FeedForward", "check_TransformerBlock", "check_EncoderLayer"]


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: layer_norm

# (shape, eps, scale of x, seed). Small inputs (scale 0.01) make ε matter; the last dimension never equals another.
_LN_CASES: list = [([2, 3, 8], 1e-5, 1.0, 0), ([4, 6], 1e-5, 0.01, 1), ([3, 5], 0.1, 1.0, 2)]


def _normalise(x: Tensor, dims: tuple[int, ...], eps: float, unbiased: bool = False, eps_inside: bool = True):
    mean = x.mean(dim=dims, keepdim=True)
    variance = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    scale = torch.sqrt(variance + eps) if eps_inside else torch.sqrt(variance) + eps
    return (x - mean) / scale


def _layer_norm_mistakes(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> list[Variant]:
    last = (x.dim() - 1,)
    right = _normalise(x, last, eps)
    variants: list[Variant] = [
        (
            lambda: _normalise(x, last, eps, unbiased=True) * weight + bias,
            "the variance is the unbiased one (divided by C - 1): LayerNorm divides by C — use "
            "x.var(dim=-1, unbiased=False, keepdim=True) or ((x - mean) ** 2).mean(dim=-1, keepdim=True).",
        ),
        (
            lambda: _normalise(x, last, eps, eps_inside=False) * weight + bias,
            "ε was added outside the square root, (x - mean) / (std + ε). It belongs inside: "
            "(x - mean) / sqrt(var + ε).",
        ),
        (
            lambda: _normalise(x, last, 0.0) * weight + bias,
            f"ε was left out (eps={eps} here): divide by sqrt(var + eps), which also keeps a constant vector finite.",
        ),
        (
            lambda: x / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps) * weight + bias,
            "the mean was not subtracted: normalise x - mean, not x.",
        ),
        (
            lambda: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight + bias,
            "the variance was computed as the mean of x², without centring: use the mean of (x - mean)².",
        ),
        (lambda: right * bias + weight, "weight and bias are swapped: y = x̂ * weight + bias."),
        (lambda: right, "weight and bias were not applied: return x̂ * weight + bias."),
        (lambda: right * weight, "the bias was not added: return x̂ * weight + bias."),
        (
            lambda: _normalise(x, tuple(range(x.dim())), eps) * weight + bias,
            "the mean and variance were taken over the whole tensor: LayerNorm normalises each vector on its own, "
            "over the last dimension only (dim=-1, keepdim=True).",
        ),
    ]
    for dim in range(x.dim() - 1):
        variants.append(
            (
                lambda dim=dim: _normalise(x, (dim,), eps) * weight + bias,
                f"the statistics were taken over dim={dim} — across vectors, like BatchNorm. LayerNorm takes them "
                "over the last dimension (dim=-1, keepdim=True), one vector at a time.",
            )
        )
    return variants


@keeps_rng
def check_layer_norm(answer: Any, cases: list | None = None) -> Passed:
    """Check `layer_norm(x, weight, bias, eps=1e-5)`; a case is `(shape, eps, scale, seed)`."""
    name = Graded(ref.layer_norm)
    check_definition(answer, name)
    run = tagged_cases(cases, _LN_CASES)
    for tag, (shape, eps, scale, seed) in run:
        C = shape[-1]
        x = (core.random_tensor(*shape, seed=seed) + 2.0) * scale  # an offset: the mean must come out
        weight = 1.0 + 0.5 * core.random_tensor(C, seed=seed + 1)
        bias = core.random_tensor(C, seed=seed + 2)
        expected = ref.layer_norm(x, weight, bias, eps)
        what = call_label(name, f"x of shape {tuple(shape)}, weight, bias, eps={eps}", tag)
        given = (x.clone(), weight.clone(), bias.clone())
        got = call_without_grad(name, answer, *given, what=what, eps=eps)
        core.expect_unchanged(name, {"x": (given[0], x), "weight": (given[1], weight), "bias": (given[2], bias)}, what)
        expect_tensor_output(name, got, what)
        with torch.no_grad():
            diagnose_tensor(name, what, got, expected, _layer_norm_mistakes(x.double(), weight, bias, eps), atol=1e-5)
    _check_constant_vector(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _check_constant_vector(name: str, answer: Any) -> None:
    """A vector whose entries are all equal has variance 0: with ε inside the root, the result is `bias`."""
    x, weight, bias = torch.full((2, 4), 3.0), torch.ones(4), torch.arange(4.0)
    what = f"{name}(a (2, 4) tensor of 3.0s, weight=ones, bias=[0, 1, 2, 3])"
    got = call_without_grad(name, answer, x, weight, bias, what=what)
    expect_tensor_output(name, got, what)
    if torch.isnan(got).any() or torch.isinf(got).any():
        raise GradingError(
            name, f"{what} gave NaN or inf: a constant vector has variance 0, so ε must be inside the square root."
        )
    expect_close(name, got, bias.expand(2, 4), what, hint="x - mean is 0 there, so only the bias remains.")


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: FeedForward

# (B, T, d_model, d_hidden, seed)
_FF_CASES: list = [(2, 5, 8, 32, 0), (1, 3, 6, 10, 1), (3, 4, 4, 4, 2)]
_FF_NAMES = (
    "Name the layers as the contract does: self.fc1 = nn.Linear(d_model, d_hidden) and self.fc2 = "
    "nn.Linear(d_hidden, d_model) (state dict keys fc1.weight, fc1.bias, fc2.weight, fc2.bias); the activation "
    "and the dropout have no parameters."
)
_DROPOUT = 0.5


def _ff_mistakes(module: ref.FeedForward, x: Tensor) -> list[Variant]:
    fc1, fc2 = module.fc1, module.fc2
    tanh_gelu = lambda h: F.gelu(h, approximate="tanh")  # noqa: E731
    return [
        (
            lambda: fc2(F.relu(fc1(x))),
            "this is ReLU: the contract asks for GELU with the tanh approximation, as in GPT-2 — "
            "F.gelu(h, approximate='tanh') or nn.GELU(approximate='tanh').",
        ),
        (
            lambda: fc2(F.gelu(fc1(x))),
            "this is the exact (erf) GELU: the contract asks for its tanh approximation, as GPT-2 uses — pass "
            "approximate='tanh'. The two differ by up to about 5e-4.",
        ),
        (
            lambda: fc2(torch.tanh(fc1(x))),
            "this is torch.tanh: 'GELU with the tanh approximation' means F.gelu(h, approximate='tanh'), not the "
            "tanh function.",
        ),
        (
            lambda: fc2(fc1(x)),
            "there is no activation between fc1 and fc2: without it the two linears collapse into one. Apply GELU "
            "(tanh approximation) to fc1's output.",
        ),
        (
            lambda: tanh_gelu(fc2(tanh_gelu(fc1(x)))),
            "the activation is applied after fc2 too: only fc1's output goes through GELU; fc2's output is added "
            "to the residual stream as it is.",
        ),
    ]


@keeps_rng
def check_FeedForward(answer: Any, cases: list | None = None) -> Passed:
    """Check `FeedForward(d_model, d_hidden, dropout=0.0)`; a case is `(B, T, d_model, d_hidden, seed)`.

    Each case checks the state dict and the output; every run also checks the dropout in training mode.
    """
    name = Graded(ref.FeedForward)
    check_definition(answer, name)
    run = tagged_cases(cases, _FF_CASES)
    for tag, (B, T, d_model, d_hidden, seed) in run:
        what = call_label(name, f"{d_model}, {d_hidden}", tag)
        module = build_module(name, answer, d_model, d_hidden, what=what, seed=seed)
        reference = ref.FeedForward(d_model, d_hidden).eval()
        expect_state(name, module, reference, what, _FF_NAMES)
        # Weights of about 1/sqrt(fan_in) times 2 keep fc1's outputs where the GELUs differ most (|h| of 1 to 3).
        g = core.generator(seed + 50)
        state = {
            k: 2 * torch.randn(v.shape, generator=g) / math.sqrt(v.shape[-1]) for k, v in reference.state_dict().items()
        }
        reference.load_state_dict(state)
        call_without_grad(name, module.load_state_dict, state, what=f"{what}.load_state_dict(...)")
        x = core.random_tensor(B, T, d_model, seed=seed + 100)
        call = f"{what} on x {tuple(x.shape)}" if tag is None else f"{what} on its input"
        got = call_without_grad(name, module, x.clone(), what=call)
        expect_tensor_output(name, got, call)
        if tuple(got.shape) == (B, T, d_hidden) != (B, T, d_model):
            raise GradingError(
                name, f"{call} returned the hidden layer {tuple(got.shape)}: fc2 brings it back to d_model={d_model}."
            )
        with torch.no_grad():
            diagnose_tensor(name, call, got, reference(x), _ff_mistakes(reference, x))
    _check_ff_dropout(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _check_ff_dropout(name: str, answer: Any) -> None:
    """Dropout in training mode zeroes whole outputs and scales the rest by 1 / (1 - p); in eval mode, nothing."""
    B, T, d_model, d_hidden, seed = 2, 4, 16, 32, 5
    what = f"{name}({d_model}, {d_hidden}, dropout={_DROPOUT})"
    module = build_module(name, answer, d_model, d_hidden, what=what, seed=seed, dropout=_DROPOUT)
    reference = ref.FeedForward(d_model, d_hidden).eval()
    reference.load_state_dict(module.state_dict())
    x = core.random_tensor(B, T, d_model, seed=seed)
    with torch.no_grad():
        clean = reference(x)  # (B, T, d_model), no dropout
    call = f"{what} in training mode"
    got = call_in_training_mode(name, module, x.clone(), what=call, seed=seed)
    expect_tensor_output(name, got, call)
    if got.shape != clean.shape:
        raise GradingError(name, f"{call} returned shape {tuple(got.shape)}, expected {tuple(clean.shape)}.")
    zeros = got == 0
    if not zeros.any():
        if torch.allclose(got, clean, atol=1e-5, rtol=1e-4):
            raise GradingError(
                name,
                f"{call}: nothing was dropped. The last step is self.dropout = nn.Dropout(dropout), applied to fc2's "
                "output (it is active only in training mode).",
            )
        raise GradingError(
            name,
            f"{call}: no output is exactly 0, yet the output changed: the dropout seems to act inside the network "
            "(on the hidden layer). The contract applies it last, to fc2's output.",
        )
    kept = ~zeros
    if not torch.allclose(got[kept], clean[kept] / (1 - _DROPOUT), atol=1e-5, rtol=1e-4):
        raise GradingError(
            name,
            f"{call}: some outputs are 0, but the others are not fc2's output scaled by 1 / (1 - p). Apply "
            "nn.Dropout(dropout) to the output of fc2, after everything else.",
        )
    if not 0.25 < zeros.float().mean().item() < 0.75:
        share = zeros.float().mean().item()
        raise GradingError(name, f"{call}: {share:.0%} of the outputs were dropped, not about p = {_DROPOUT}.")
    again = call_without_grad(name, module, x.clone(), what=f"{what} back in eval mode")
    expect_close(name, again, clean, f"{what} in eval mode", hint="In eval mode nothing is dropped.")
