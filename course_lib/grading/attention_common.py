"""What the graders of lessons 04 (attention) and 05 (multi-head attention) share.

- `attend` computes attention with one chosen mistake, and `attention_mistakes` lists the classic ones (the
  wrong scale, the softmax over the wrong dimension, the mask inverted, zeroed, applied after the softmax or
  ignored) with what to tell the learner; `name_mistake` names the one a learner's output matches.
- `make_mask` draws the masks of the test cases.
- `build_module`, `call_without_grad`, `call_in_training_mode` and `keeps_rng` call learner code with fixed
  seeds, so that a check never changes the caller's random state; `expect_linears` and `copy_linears` check a
  learner module's nn.Linear layers and copy their weights into the reference.

Shape legend: B batch, T time (Tq queries, Tk keys), H heads, D head size, C / d_model channels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from course_lib.grading.kit import core
from course_lib.grading.kit.core import GradingError, Passed, catching, expect_type
from course_lib.grading.kit.diagnose import Variant, find_mistake

__all__ = [
    "NEG_INF",
    "copy_linears",
    "expect_linears",
    "expect_raises_value_error",
    "attend",
    "attention_mistakes",
    "build_module",
    "call_in_training_mode",
    "call_without_grad",
    "expect_tensor_output",
    "keeps_rng",
    "make_mask",
    "name_mistake",
    "same_values",
]

NEG_INF = float("-inf")


# ------------------------------------------------------------------------------------------------------------
# Calling learner code


def keeps_rng(check: Callable[..., Passed]) -> Callable[..., Passed]:
    """Run a check without changing the caller's global random state (modules are initialised inside)."""

    @functools.wraps(check)
    def wrapped(*args: Any, **kwargs: Any) -> Passed:
        with torch.random.fork_rng(devices=[]):
            return check(*args, **kwargs)

    return wrapped


def call_without_grad(exercise: str, fn: Callable[..., Any], *args: Any, what: str, **kwargs: Any) -> Any:
    """`call_answer` without autograd: the checks only compare values."""
    with torch.no_grad():
        return core.call_answer(exercise, fn, *args, what=what, **kwargs)


def build_module(exercise: str, cls: Any, *args: Any, what: str, seed: int = 0, **kwargs: Any) -> nn.Module:
    """Construct a learner module with a fixed seed (without touching the caller's RNG); must be a Module."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = call_without_grad(exercise, cls, *args, what=what, **kwargs)
    if not core.is_instance(module, nn.Module):
        raise GradingError(
            exercise,
            f"{what} gave a {core.type_name(module)}, not an nn.Module. Define `class {exercise}(nn.Module)`.",
        )
    return module.train(False)


def call_in_training_mode(exercise: str, module: nn.Module, *args: Any, what: str, seed: int, **kwargs: Any) -> Any:
    """Call a learner module in training mode (dropout active) with a fixed seed, then put it back in eval mode."""
    module.train(True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        got = call_without_grad(exercise, module, *args, what=what, **kwargs)
    module.train(False)
    return got


def expect_tensor_output(exercise: str, got: Any, what: str, hint: str = "") -> None:
    """The learner's code must return one tensor (not None, not a tuple such as (out, weights))."""
    if isinstance(got, tuple | list):
        raise GradingError(
            exercise,
            f"{what} returned a {type(got).__name__} of {len(got)} items; "
            f"return the output tensor only. {hint}".strip(),
        )
    expect_type(exercise, got, Tensor, what, "a tensor")


def copy_linears(source: nn.Module, target: nn.Module, names: Sequence[str]) -> None:
    """Copy the learner's nn.Linear weights (and biases) into the reference module."""
    with torch.no_grad():
        for attr in names:
            src, dst = getattr(source, attr), getattr(target, attr)
            dst.weight.copy_(src.weight)
            if dst.bias is not None:
                dst.bias.copy_(src.bias)


def expect_linears(
    exercise: str, module: nn.Module, shapes: dict[str, tuple[int, int, str]], bias: bool, what: str
) -> None:
    """Each attribute must be an nn.Linear(in, out) with a bias exactly when `bias`. shapes: attr -> (in, out,
    what its input is)."""
    for attr, (n_in, n_out, reads) in shapes.items():
        layer = getattr(module, attr, None)
        if layer is None:
            raise GradingError(
                exercise,
                f"{what} has no attribute `{attr}`. The contract names the layers: "
                f"{', '.join(f'self.{a} = nn.Linear(...)' for a in shapes)}.",
            )
        if not core.is_instance(layer, nn.Linear):
            raise GradingError(
                exercise,
                f"`{attr}` is a {core.type_name(layer)}, not an nn.Linear. Use nn.Linear({n_in}, {n_out}, "
                "bias=...), so that its weights can be compared with the reference.",
            )
        if (layer.in_features, layer.out_features) != (n_in, n_out):
            raise GradingError(
                exercise,
                f"{what}: `{attr}` maps {layer.in_features} -> {layer.out_features} features, expected "
                f"{n_in} -> {n_out} (it reads {reads}).",
            )
        if (layer.bias is not None) != bias:
            raise GradingError(
                exercise,
                f"{what}: `{attr}` {'has' if layer.bias is not None else 'has no'} bias; with the bias flag "
                f"{bias} it should {'' if bias else 'not '}have one (pass bias=... to nn.Linear).",
            )


def expect_raises_value_error(exercise: str, fn: Callable[[], Any], what: str, why: str) -> None:
    """`fn()` (learner code) must raise a ValueError; `why` tells the learner what to check."""
    error = call_without_grad(exercise, catching(fn), what=what)
    if error is None:
        raise GradingError(exercise, f"{what} did not raise. {why}")
    if not isinstance(error, ValueError):
        raise GradingError(exercise, f"{what} raised {type(error).__name__} ({error}), expected a ValueError. {why}")


# ------------------------------------------------------------------------------------------------------------
# Comparing with known mistakes


def same_values(a: Any, b: Any, atol: float = 1e-4, rtol: float = 1e-3) -> bool:
    """Two tensors of one shape with equal values (in float64, NaN equal to NaN); `a` must be float or bool."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.shape != b.shape:
        return False
    if not a.dtype.is_floating_point and a.dtype != torch.bool:
        return False
    return torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=rtol, equal_nan=True)


def _matches_mistake(got: Any, value: Tensor) -> bool:
    """`got` equals a mistake's output wherever that output is defined (rows a mistake leaves without any key
    are NaN there, and fused kernels fill such rows differently)."""
    if not (isinstance(got, Tensor) and got.shape == value.shape and got.dtype.is_floating_point):
        return False
    defined = ~torch.isnan(value)
    if defined.sum() < max(1, value.numel() // 2):
        return False
    return torch.allclose(got.detach().double()[defined], value.double()[defined], atol=1e-4, rtol=1e-3)


def name_mistake(exercise: str, what: str, got: Any, expected: Tensor, variants: Sequence[Variant]) -> None:
    """Raise a GradingError naming the first known mistake whose output equals `got` (and differs from right)."""
    mistake = find_mistake(
        variants, lambda value: _matches_mistake(got, value), lambda value: same_values(value, expected)
    )
    if mistake is not None:
        raise GradingError(exercise, f"{what}: {mistake}")


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    dim: int = -1,
    mask_mode: str = "before",
) -> tuple[Tensor, Tensor]:
    """Attention with a chosen mistake (the defaults are right).

    mask_mode: "before" (right: -inf before the softmax), "after" (weights zeroed after it), "inverted" (True
    blocks), "zero" (masked scores set to 0), anything else ignores the mask.
    """
    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)
    scores = scores / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and mask_mode == "before":
        scores = scores.masked_fill(~mask, NEG_INF)
    elif mask is not None and mask_mode == "inverted":
        scores = scores.masked_fill(mask, NEG_INF)
    elif mask is not None and mask_mode == "zero":
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and mask_mode == "after":
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights  # (..., Tq, dv), (..., Tq, Tk)


def attention_mistakes(
    run: Callable[..., Tensor],
    d_k: int,
    dk_label: str,
    *,
    n_dims: int,
    extra_scales: Sequence[tuple[float, str]] = (),
    mask_label: str | None = None,
) -> list[Variant]:
    """Known mistakes of an attention computation. `run(**options)` runs `attend` with those options and
    returns what the check compares (weights, output, ...). `mask_label` names the mask, if there is one."""
    root = math.sqrt(d_k)
    variants: list[Variant] = [
        (
            lambda: run(scale=float(d_k)),
            f"the scores were divided by {dk_label} = {d_k} instead of sqrt({dk_label}) = {root:.4g}. Divide "
            f"q @ kᵀ by math.sqrt({dk_label}): that keeps the scores' variance near 1 whatever the size.",
        ),
        (
            lambda: run(scale=1.0),
            f"the scores were not scaled. Divide q @ kᵀ by sqrt({dk_label}) = {root:.4g} before the softmax.",
        ),
        (
            lambda: run(scale=1.0 / root),
            f"the scores were multiplied by sqrt({dk_label}) instead of divided by it.",
        ),
    ]
    for value, label in extra_scales:
        variants.append(
            (
                lambda value=value: run(scale=value),
                f"the scores were divided by {label} = {value:.4g}. The scale is sqrt({dk_label}) = {root:.4g}: "
                "the square root of the size of the queries and keys that were multiplied.",
            )
        )
    wrong_dims = [-2] + ([0] if n_dims >= 3 else []) + ([1] if n_dims >= 4 else [])
    for dim in wrong_dims:
        variants.append(
            (
                lambda dim=dim: run(dim=dim),
                f"the softmax ran over the wrong dimension (dim={dim}). Each query's weights over the keys — "
                "one row, the last dimension — must sum to 1: use torch.softmax(scores, dim=-1).",
            )
        )
    if mask_label is not None:
        variants += [
            (
                lambda: run(mask_mode="inverted"),
                f"the {mask_label} is inverted: your weights are zero where it is True. In this course (as in "
                "PyTorch) True means 'may attend', so fill the scores where the mask is False: "
                "scores.masked_fill(~mask, float('-inf')).",
            ),
            (
                lambda: run(mask_mode="after"),
                f"the {mask_label} was applied after the softmax: the masked weights are 0, but the others no "
                "longer sum to 1. Set the masked scores to -inf *before* the softmax.",
            ),
            (
                lambda: run(mask_mode="zero"),
                "the masked scores were set to 0 instead of -inf. exp(0) = 1, so the masked keys still get "
                "weight; use float('-inf').",
            ),
            (
                lambda: run(mask_mode="none"),
                f"the {mask_label} was ignored: every key got weight. Set the scores where the mask is False to "
                "-inf before the softmax.",
            ),
        ]
    return variants


# ------------------------------------------------------------------------------------------------------------
# Inputs


def make_mask(kind: str | None, lead: tuple[int, ...], Tq: int, Tk: int, seed: int) -> Tensor | None:
    """A bool mask (True = may attend) that leaves every query row at least one key (and, if Tk > 1, blocks
    at least one in the "random" kind, so an inverted mask is never all-blocked).

    kind: None | "causal" (Tq, Tk) | "padding" (B, 1, ..., 1, Tk) keeping the first lengths[b] keys |
    "random" (*lead, Tq, Tk) with the diagonal kept. `lead` are the dimensions before (Tq, Tk).
    """
    if kind is None:
        return None
    if kind == "causal":
        return torch.ones(Tq, Tk, dtype=torch.bool).tril()  # (Tq, Tk)
    if kind == "padding":
        B = lead[0] if lead else 1
        lengths = torch.tensor([(Tk - 2 - b) % max(Tk - 1, 1) + 1 if Tk > 1 else 1 for b in range(B)])  # 1..Tk-1
        mask = torch.arange(Tk)[None, :] < lengths[:, None]  # (B, Tk)
        return mask.reshape(B, *([1] * max(len(lead) - 1, 0)), 1, Tk) if lead else mask  # broadcasts to scores
    if kind == "random":
        mask = torch.rand(*lead, Tq, Tk, generator=core.generator(seed)) < 0.6  # (*lead, Tq, Tk)
        rows = torch.arange(Tq)
        mask[..., rows, rows % Tk] = True  # every query keeps a key (its own position when Tq == Tk)
        if Tk > 1:
            mask[..., rows, (rows + 1) % Tk] = False  # and loses one
        return mask
    raise ValueError(f"unknown mask kind {kind!r}")
