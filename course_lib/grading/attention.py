"""Graders of lesson 04 — Attention (one `check_<exercise>` per exercise of COURSE_SPEC §6).

Every check follows the same recipe: `check_definition` first (the from-scratch guard); then, for each case,
the expected value from the reference in `course_lib.attention`, computed *outside* the learner's call, and
the learner's answer through `call_answer`. Learner modules are built with a fixed seed and their weights are
copied into the reference module, so both compute the same function when the answer is right.

When the two differ, the check recomputes the case with each known mistake (softmax over the wrong
dimension, the wrong scale, the mask inverted or applied after the softmax, queries from the wrong input, ...)
and names the mistake whose output the learner's equals; otherwise it reports the shapes and the largest
difference. With `cases=None` a check runs its visible cases; a hidden test cell passes its own `cases` (the
format is in each check's docstring) and only those run; a message about a hidden case names it by number
(`core.tagged_cases`), never by its input.

Shape legend: B batch, T time (Tq queries, Tk keys), H heads, D head size, C / d_model channels.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import attention as ref
from course_lib.grading import core
from course_lib.grading.core import GradingError, Passed, call_label, describe, expect_close, tagged_cases
from course_lib.grading.guard import check_definition

__all__ = [
    "check_simple_self_attention",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_SelfAttention",
    "check_CausalSelfAttention",
    "check_CrossAttention",
]

Variant = tuple[Callable[[], Tensor], str]  # (the output of a known mistake on the same input, what it is)
NEG_INF = float("-inf")


# ------------------------------------------------------------------------------------------------------------
# Shared helpers (also used by course_lib.grading.multihead)
# ------------------------------------------------------------------------------------------------------------


def keeps_rng(check: Callable[..., Passed]) -> Callable[..., Passed]:
    """Run a check without changing the caller's global random state (modules are initialised inside)."""

    @functools.wraps(check)
    def wrapped(*args: Any, **kwargs: Any) -> Passed:
        with torch.random.fork_rng(devices=[]):
            return check(*args, **kwargs)

    return wrapped


def _call(name: str, fn: Callable[..., Any], *args: Any, what: str, **kwargs: Any) -> Any:
    # No autograd needed to compare values; the time limit is read at call time so tests can change it.
    with torch.no_grad():
        return core.call_answer(name, fn, *args, what=what, timeout=core.DEFAULT_CALL_TIMEOUT, **kwargs)


def _build(name: str, cls: Any, *args: Any, what: str, seed: int = 0, **kwargs: Any) -> nn.Module:
    """Construct a learner module with a fixed seed (without touching the caller's RNG); must be a Module."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = _call(name, cls, *args, what=what, **kwargs)
    if not isinstance(module, nn.Module):
        raise GradingError(
            name, f"{what} gave a {type(module).__name__}, not an nn.Module. Define `class {name}(nn.Module)`."
        )
    return module.train(False)


def _matches_mistake(got: Any, value: Tensor) -> bool:
    """`got` equals a mistake's output wherever that output is defined (rows a mistake leaves without any key
    are NaN there, and fused kernels fill such rows differently)."""
    if not (isinstance(got, Tensor) and got.shape == value.shape and got.dtype.is_floating_point):
        return False
    defined = ~torch.isnan(value)
    if defined.sum() < max(1, value.numel() // 2):
        return False
    return torch.allclose(got.detach().double()[defined], value.double()[defined], atol=1e-4, rtol=1e-3)


def _close(a: Any, b: Any, atol: float = 1e-4, rtol: float = 1e-3) -> bool:
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.shape != b.shape:
        return False
    if not a.dtype.is_floating_point and a.dtype != torch.bool:
        return False
    return torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=rtol, equal_nan=True)


def _name_mistake(name: str, what: str, got: Any, expected: Tensor, variants: Sequence[Variant]) -> None:
    """Raise a GradingError naming the first known mistake whose output equals `got` (and differs from right)."""
    for compute, mistake in variants:
        try:
            value = compute()
        except Exception:  # a mistake that cannot run on this input cannot be the learner's
            continue
        if _matches_mistake(got, value) and not _close(value, expected):
            raise GradingError(name, f"{what}: {mistake}")


def _expect_tensor_output(name: str, got: Any, what: str, hint: str = "") -> None:
    if got is None:
        raise GradingError(name, f"{what} returned None. Did you forget the `return`?")
    if isinstance(got, tuple | list):
        raise GradingError(
            name,
            f"{what} returned a {type(got).__name__} of {len(got)} items; "
            f"return the output tensor only. {hint}".strip(),
        )
    if not isinstance(got, Tensor):
        raise GradingError(name, f"{what} should return a tensor, got {type(got).__name__}: {describe(got)}")


def _attend(
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


def _mistakes(
    attend: Callable[..., Tensor],
    d_k: int,
    dk_label: str,
    *,
    n_dims: int,
    extra_scales: Sequence[tuple[float, str]] = (),
    mask_label: str | None = None,
) -> list[Variant]:
    """Known mistakes of an attention computation. `attend(**options)` runs `_attend` with those options and
    returns what the check compares (weights, output, ...). `mask_label` names the mask, if there is one."""
    root = math.sqrt(d_k)
    variants: list[Variant] = [
        (
            lambda: attend(scale=float(d_k)),
            f"the scores were divided by {dk_label} = {d_k} instead of sqrt({dk_label}) = {root:.4g}. Divide "
            f"q @ kᵀ by math.sqrt({dk_label}): that keeps the scores' variance near 1 whatever the size.",
        ),
        (
            lambda: attend(scale=1.0),
            f"the scores were not scaled. Divide q @ kᵀ by sqrt({dk_label}) = {root:.4g} before the softmax.",
        ),
        (
            lambda: attend(scale=1.0 / root),
            f"the scores were multiplied by sqrt({dk_label}) instead of divided by it.",
        ),
    ]
    for value, label in extra_scales:
        variants.append(
            (
                lambda value=value: attend(scale=value),
                f"the scores were divided by {label} = {value:.4g}. The scale is sqrt({dk_label}) = {root:.4g}: "
                "the square root of the size of the queries and keys that were multiplied.",
            )
        )
    wrong_dims = [-2] + ([0] if n_dims >= 3 else []) + ([1] if n_dims >= 4 else [])
    for dim in wrong_dims:
        variants.append(
            (
                lambda dim=dim: attend(dim=dim),
                f"the softmax ran over the wrong dimension (dim={dim}). Each query's weights over the keys — "
                "one row, the last dimension — must sum to 1: use torch.softmax(scores, dim=-1).",
            )
        )
    if mask_label is not None:
        variants += [
            (
                lambda: attend(mask_mode="inverted"),
                f"the {mask_label} is inverted: your weights are zero where it is True. In this course (as in "
                "PyTorch) True means 'may attend', so fill the scores where the mask is False: "
                "scores.masked_fill(~mask, float('-inf')).",
            ),
            (
                lambda: attend(mask_mode="after"),
                f"the {mask_label} was applied after the softmax: the masked weights are 0, but the others no "
                "longer sum to 1. Set the masked scores to -inf *before* the softmax.",
            ),
            (
                lambda: attend(mask_mode="zero"),
                "the masked scores were set to 0 instead of -inf. exp(0) = 1, so the masked keys still get "
                "weight; use float('-inf').",
            ),
            (
                lambda: attend(mask_mode="none"),
                f"the {mask_label} was ignored: every key got weight. Set the scores where the mask is False to "
                "-inf before the softmax.",
            ),
        ]
    return variants


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


def _shape(t: Tensor) -> str:
    return str(tuple(t.shape))


def _copy_linears(source: nn.Module, target: nn.Module, names: Sequence[str]) -> None:
    """Copy the learner's nn.Linear weights (and biases) into the reference module."""
    with torch.no_grad():
        for attr in names:
            src, dst = getattr(source, attr), getattr(target, attr)
            dst.weight.copy_(src.weight)
            if dst.bias is not None:
                dst.bias.copy_(src.bias)


def _expect_linears(
    name: str, module: nn.Module, shapes: dict[str, tuple[int, int, str]], bias: bool, what: str
) -> None:
    """Each attribute must be an nn.Linear(in, out) with a bias exactly when `bias`. shapes: attr -> (in, out,
    what its input is)."""
    for attr, (n_in, n_out, reads) in shapes.items():
        layer = getattr(module, attr, None)
        if layer is None:
            raise GradingError(
                name,
                f"{what} has no attribute `{attr}`. The contract names the layers: "
                f"{', '.join(f'self.{a} = nn.Linear(...)' for a in shapes)}.",
            )
        if not isinstance(layer, nn.Linear):
            raise GradingError(
                name,
                f"`{attr}` is a {type(layer).__name__}, not an nn.Linear. Use nn.Linear({n_in}, {n_out}, "
                "bias=...), so that its weights can be compared with the reference.",
            )
        if (layer.in_features, layer.out_features) != (n_in, n_out):
            raise GradingError(
                name,
                f"{what}: `{attr}` maps {layer.in_features} -> {layer.out_features} features, expected "
                f"{n_in} -> {n_out} (it reads {reads}).",
            )
        if (layer.bias is not None) != bias:
            raise GradingError(
                name,
                f"{what}: `{attr}` {'has' if layer.bias is not None else 'has no'} bias; with the bias flag "
                f"{bias} it should {'' if bias else 'not '}have one (pass bias=... to nn.Linear).",
            )


def _expect_raises_value_error(name: str, fn: Callable[[], Any], what: str, why: str) -> None:
    def attempt() -> Any:
        try:
            fn()
        except NotImplementedError:
            raise
        except Exception as exc:  # returned, so that the type can be checked below
            return exc
        return None

    error = _call(name, attempt, what=what)
    if error is None:
        raise GradingError(name, f"{what} did not raise. {why}")
    if not isinstance(error, ValueError):
        raise GradingError(name, f"{what} raised {type(error).__name__} ({error}), expected a ValueError. {why}")


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
    name = "simple_self_attention"
    check_definition(name, answer)
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
    got = _call(name, answer, given, what=what)
    if not torch.equal(given, x):
        raise GradingError(name, f"{what} changed its input in place; compute a new tensor instead.")
    _expect_tensor_output(name, got, what)
    scores = x @ x.T  # (T, T)
    weights = torch.softmax(scores, dim=-1)
    if got.shape == (T, T) and T != C and _close(got, weights):
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
    _name_mistake(name, what, got, expected, variants)
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
    name = "scaled_dot_product_attention"
    check_definition(name, answer)
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
    shown = f"q {_shape(q)}, k {_shape(k)}, v {_shape(v)}" + (
        f", {kind} mask {_shape(mask)}" if mask is not None else ""
    )
    what = call_label(name, shown, tag)
    inputs = [t.clone() for t in (q, k, v)]
    args = (*inputs, mask.clone()) if mask is not None else tuple(inputs)
    got = _call(name, answer, *args, what=what)
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
            f"{w_what} have shape {_shape(weights)}: one row per key instead of one per query. Compute the "
            "scores as q @ k.transpose(-2, -1), shape (..., Tq, Tk).",
        )
    d_k, d_v = q.shape[-1], v.shape[-1]
    extra = [(math.sqrt(d_v), "sqrt(d_v), the values' size")] if d_v != d_k else []
    variants = _mistakes(
        lambda **options: _attend(q, k, v, mask, **options)[1],
        d_k,
        "d_k",
        n_dims=q.dim(),
        extra_scales=extra,
        mask_label="mask" if mask is not None else None,
    )
    variants.append(
        (
            lambda: _attend(k, q, v, mask)[1],
            "queries and keys are swapped, so the weights come out transposed. Compute the scores as "
            "q @ k.transpose(-2, -1): one row per query.",
        )
    )
    _name_mistake(name, w_what, weights, expected_w, variants)
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
    name = "causal_mask"
    check_definition(name, answer)
    run = tagged_cases(cases, _CAUSAL_CASES)
    for i, (tag, T) in enumerate(run):
        _causal_case(name, answer, int(T), with_device=i == 0, tag=tag)
    return Passed(name, len(run), hidden=cases is not None)


def _causal_case(name: str, answer: Any, T: int, with_device: bool, tag: str | None) -> None:
    expected = ref.causal_mask(T)
    what = call_label(name, str(T), tag)
    got = _call(name, answer, T, what=what)
    _expect_tensor_output(name, got, what)
    if tuple(got.shape) != (T, T):
        raise GradingError(name, f"{what} has shape {_shape(got)}; it should be (T, T).")
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
        on_cpu = _call(name, answer, T, what=with_cpu, device="cpu")
        if not isinstance(on_cpu, Tensor) or on_cpu.device.type != "cpu" or not torch.equal(on_cpu, expected):
            raise GradingError(name, f"{with_cpu} should give the same mask on that device; pass device=...")


# ------------------------------------------------------------------------------------------------------------
# Exercises 4 and 5: SelfAttention, CausalSelfAttention
# ------------------------------------------------------------------------------------------------------------

_QKV = ("W_query", "W_key", "W_value")

# (B, T, d_in, d_out, qkv_bias, seed)
_SELF_CASES: list = [(2, 5, 4, 6, False, 0), (1, 3, 3, 2, True, 1), (3, 4, 8, 8, False, 2)]


@keeps_rng
def check_SelfAttention(answer: Any, cases: list | None = None) -> Passed:
    """Check `SelfAttention(d_in, d_out, qkv_bias=False)`. A case is `(B, T, d_in, d_out, qkv_bias, seed)`."""
    name = "SelfAttention"
    check_definition(name, answer)
    run = tagged_cases(cases, _SELF_CASES)
    for tag, (B, T, d_in, d_out, bias, seed) in run:
        what = call_label(name, f"{d_in}, {d_out}, qkv_bias={bias}", tag)
        module = _build(name, answer, d_in, d_out, what=what, seed=seed, qkv_bias=bias)
        shapes = {attr: (d_in, d_out, "the input x") for attr in _QKV}
        _expect_linears(name, module, shapes, bias, what)
        reference = ref.SelfAttention(d_in, d_out, qkv_bias=bias)
        _copy_linears(module, reference, _QKV)
        x = core.random_tensor(B, T, d_in, seed=seed + 100)
        expected = reference(x)
        call = f"{what} on x of shape {_shape(x)}" if tag is None else f"{what} on its input"
        got = _call(name, module, x.clone(), what=call)
        _expect_tensor_output(name, got, call)
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
    variants = _mistakes(
        lambda **options: _attend(q, k, v, mask, **options)[0],
        d_k,
        dk_label,
        n_dims=q.dim(),
        extra_scales=extra,
        mask_label=None if mask is None else ("causal mask" if causal else "mask"),
    )
    variants.append(
        (
            lambda: _attend(k, q, v, mask)[0],
            "queries and keys are swapped: the weights come out transposed. Scores are q @ kᵀ with "
            "q = W_query(x) and k = W_key(x).",
        )
    )
    _name_mistake(name, what, got, expected, variants)


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
    name = "CausalSelfAttention"
    check_definition(name, answer)
    run = tagged_cases(cases, _CAUSAL_SELF_CASES)
    for tag, (B, T, d_in, d_out, context_length, bias, seed) in run:
        what = call_label(name, f"{d_in}, {d_out}, context_length={context_length}, qkv_bias={bias}", tag)
        module = _build(name, answer, d_in, d_out, context_length, what=what, seed=seed, dropout=0.0, qkv_bias=bias)
        _expect_linears(name, module, {attr: (d_in, d_out, "the input x") for attr in _QKV}, bias, what)
        _expect_state_dict(name, module, bias, what)
        reference = ref.CausalSelfAttention(d_in, d_out, context_length, qkv_bias=bias).eval()
        _copy_linears(module, reference, _QKV)
        x = core.random_tensor(B, T, d_in, seed=seed + 100)
        expected = reference(x)
        call = f"{what} on x of shape {_shape(x)}" if tag is None else f"{what} on its input"
        try:
            got = _call(name, module, x.clone(), what=call)
        except GradingError as error:
            if context_length > T and "raised" in error.message:
                raise GradingError(
                    name,
                    f"{error.message} — here T < context_length: build (or slice) the mask for this call's "
                    "length T = x.shape[1].",
                ) from None
            raise
        _expect_tensor_output(name, got, call)
        _causal_nan_hints(name, call, got, expected)
        q, k, v = reference.W_query(x), reference.W_key(x), reference.W_value(x)
        mask = ref.causal_mask(T)
        _module_mistakes(name, call, got, expected, q, k, v, mask, d_in=d_in, dk_label="d_out", causal=True)
        variants: list[Variant] = [
            (
                lambda q=q, k=k, v=v, T=T: _attend(q, k, v, torch.ones(T, T, dtype=torch.bool).tril(-1))[0],
                "the diagonal is excluded from the causal mask: a token may attend to itself.",
            ),
            (
                lambda q=q, k=k, v=v, T=T: _attend(q, k, v, torch.ones(T, T, dtype=torch.bool).triu())[0],
                "the causal mask points the wrong way: query t may attend to keys 0..t (the lower triangle).",
            ),
        ]
        _name_mistake(name, call, got, expected, variants)
        expect_close(name, got, expected, call)

        too_long = core.random_tensor(1, context_length + 1, d_in, seed=seed + 200)
        _expect_raises_value_error(
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
    module = _build(name, answer, d_in, d_out, T, what=what, seed=7, dropout=p)
    reference = ref.CausalSelfAttention(d_in, d_out, T).eval()
    _copy_linears(module, reference, _QKV)
    x = core.random_tensor(B, T, d_in, seed=77)
    expected_eval, weights = reference(x, need_weights=True)  # (B, T, d_out), (B, T, T)
    v = reference.W_value(x)
    module.train(True)
    call = f"{what} in training mode (module.train())"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        got = _call(name, module, x.clone(), what=call)
    module.train(False)
    _expect_tensor_output(name, got, call)
    if got.shape != expected_eval.shape:
        expect_close(name, got, expected_eval, call)  # reports the shapes
    if _close(got, expected_eval, atol=1e-6, rtol=1e-5):
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
    again = _call(name, module, x.clone(), what=f"{what} back in eval mode (module.eval())")
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
    name = "CrossAttention"
    check_definition(name, answer)
    run = tagged_cases(cases, _CROSS_CASES)
    for tag, (B, Tq, Tk, d_model, d_memory, kind, bias, seed) in run:
        _cross_case(name, answer, B, Tq, Tk, d_model, d_memory, kind, bias, seed, tag)
    return Passed(name, len(run), hidden=cases is not None)


def _cross_case(name, answer, B, Tq, Tk, d_model, d_memory, kind, bias, seed, tag) -> None:
    d_mem = d_model if d_memory is None else d_memory
    if d_memory is None:
        what = call_label(name, f"{d_model}, qkv_bias={bias}", tag)
        module = _build(name, answer, d_model, what=what, seed=seed, qkv_bias=bias)
    else:
        what = call_label(name, f"{d_model}, d_memory={d_memory}, qkv_bias={bias}", tag)
        module = _build(name, answer, d_model, d_memory, what=what, seed=seed, qkv_bias=bias)
    if isinstance(getattr(module, "W_query", None), nn.Linear) and module.W_query.in_features == d_mem != d_model:
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
    _expect_linears(name, module, shapes, bias, what)
    reference = ref.CrossAttention(d_model, d_mem, qkv_bias=bias)
    _copy_linears(module, reference, _QKV)
    x = core.random_tensor(B, Tq, d_model, seed=seed + 100)
    memory = core.random_tensor(B, Tk, d_mem, seed=seed + 200)
    mask = make_mask(kind, (B,), Tq, Tk, seed + 300)  # padding: (B, 1, Tk), random: (B, Tq, Tk)
    expected = reference(x, memory, mask)
    call = f"{what} on x {_shape(x)} and memory {_shape(memory)}"
    call += f" with memory_mask {_shape(mask)}" if mask is not None else ""
    call = call if tag is None else f"{what} on its inputs"
    args = (x.clone(), memory.clone()) + ((mask.clone(),) if mask is not None else ())
    try:
        got = _call(name, module, *args, what=call)
    except GradingError as error:
        raise GradingError(
            name,
            f"{error.message} — remember: queries come from x (the decoder), keys and values from memory "
            "(the encoder).",
        ) from None
    _expect_tensor_output(name, got, call)
    if tuple(got.shape) == (B, Tk, d_model) and Tk != Tq:
        raise GradingError(
            name,
            f"{call}: your output has shape {_shape(got)}, one row per memory position (Tk) instead of "
            "one per decoder position (Tq). Queries must come from the decoder x, keys and values from "
            "the memory.",
        )
    q, k, v = reference.W_query(x), reference.W_key(memory), reference.W_value(memory)
    variants = _mistakes(
        lambda **options: _attend(q, k, v, mask, **options)[0],
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
            (lambda: _attend(reference.W_query(memory), reference.W_key(x), reference.W_value(x))[0], from_memory),
            (lambda: _attend(reference.W_query(memory), k, v)[0], from_memory),
            (
                lambda: _attend(q, reference.W_key(x), reference.W_value(x))[0],
                "keys and values were taken from x: in cross-attention they come from the memory (the encoder).",
            ),
        ]
    _name_mistake(name, call, got, expected, variants)
    expect_close(name, got, expected, call)
