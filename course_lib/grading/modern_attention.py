"""Grader of lesson 12's `ModernAttention` (re-exported by `course_lib.grading.modern`).

`ModernAttention`: the attributes the contract names (`n_heads`, `n_kv_heads`, `d_head`; `qkv`, `out_proj` without
biases; `q_norm`, `k_norm` exactly with `qk_norm`), then the output on random weights, then calls with a KV cache
(built where the answer lives: a `LayerCache` holding the keys and values of P earlier positions), whose output and
whose grown cache are compared with the reference's. Named mistakes: no rotation, the "rotate half" layout, values
rotated, RoPE's base ignored, QK-norm after the rotation or with its two gains swapped, the key/value heads
interleaved, no causal mask, the wrong scale; with a cache: the new positions rotated at 0..T-1 instead of P..P+T-1
(the classic bug of RoPE with a KV cache), the causal triangle not shifted by P, the cached positions ignored; the
cache grown with repeated heads, with keys before their rotation, or not at all.

Shape legend: B batch, T new positions, P cached positions, H query heads, H_kv key/value heads, D head size,
C d_model channels, F SwiGLU width.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import modern as ref
from course_lib.grading.attention_common import build_module, call_without_grad, expect_linears, keeps_rng
from course_lib.grading.blocks_layers import expect_state
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, tagged_cases
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor, find_mistake, tensor_result
from course_lib.grading.kit.guard import check_definition
from course_lib.multihead import LayerCache
from course_lib.position import rope_rotate_half

__all__ = ["check_ModernAttention", "layer_cache", "random_state", "same_values"]

# (B, P, T, d_model, n_heads, n_kv_heads, qk_norm, rope_base or None, seed): T new positions after a cache of P
# (P = 0: called without a cache). D = 4 or 6 tells the interleaved and "rotate half" layouts apart; the third case
# has as many key/value heads as query heads; the last two feed one new token, then a chunk, after a cache.
_ATTENTION_CASES: list = [
    (2, 0, 6, 16, 4, 2, False, None, 0),
    (1, 0, 5, 24, 4, 1, True, 500.0, 1),
    (2, 0, 4, 12, 2, 2, True, None, 2),
    (2, 5, 1, 16, 4, 2, False, None, 10),
    (1, 4, 3, 16, 4, 2, True, 100.0, 11),
]
_NAMES = (
    "Name them as the contract does: self.qkv = nn.Linear(d_model, (n_heads + 2 * n_kv_heads) * D, bias=False), "
    "self.out_proj = nn.Linear(d_model, d_model, bias=False) and, with qk_norm, self.q_norm and self.k_norm (RMSNorm "
    "modules with a `weight` of size D)."
)
_CACHE_HINT = (
    "forward(x, cache=None) takes the layer's cache: a LayerCache whose .keys and .values are (B, n_kv_heads, P, D)."
)


def layer_cache(keys: Tensor, values: Tensor) -> LayerCache:
    """A LayerCache holding these keys and values (built where the answer lives: `core.make`)."""
    return LayerCache(keys=keys.clone(), values=values.clone())


# ------------------------------------------------------------------------------------------------------------
# The attention, computed in float64 with one mistake switched on (all defaults: right)


def _rms(t: Tensor, gain: Tensor, eps: float = 1e-6) -> Tensor:
    return t / torch.sqrt(t.pow(2).mean(dim=-1, keepdim=True) + eps) * gain


def _rotate(t: Tensor, start: int, base: float, layout: str) -> Tensor:
    T, D = t.shape[-2], t.shape[-1]
    if layout == "none":
        return t
    if layout == "halves":  # rotate_half at positions start..start+T-1: rotate a longer tensor, keep its end
        padded = torch.cat([t.new_zeros(*t.shape[:-2], start, D), t], dim=-2)
        return rope_rotate_half(padded, base)[..., start:, :]
    cos, sin = ref.rope_cos_sin(start + T, D, base, t.dtype)
    return ref.rotate_pairs(t, cos[start:], sin[start:])


def _attention(
    x: Tensor,
    state: dict[str, Tensor],
    H: int,
    H_kv: int,
    base: float,
    past: tuple[Tensor, Tensor] | None = None,
    *,
    layout: str = "pairs",
    rotate_values: bool = False,
    norm: str = "before",
    repeat: str = "consecutive",
    causal: bool = True,
    scale: str = "sqrt",
    start: int | None = None,
    shifted: bool = True,
    use_past: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """(output (B, T, C), the grown cache's keys and values (B, H_kv, P + T, D)) of ModernAttention with `state`."""
    B, T, C = x.shape
    D = C // H
    q, k, v = (x @ state["qkv.weight"].T).split([H * D, H_kv * D, H_kv * D], dim=-1)
    q, k, v = (t.view(B, T, n, D).transpose(1, 2) for t, n in ((q, H), (k, H_kv), (v, H_kv)))
    gains = (state.get("q_norm.weight"), state.get("k_norm.weight"))
    if norm == "swapped":
        gains = gains[::-1]
    if gains[0] is not None and norm in ("before", "swapped"):
        q, k = _rms(q, gains[0]), _rms(k, gains[1])
    P = 0 if past is None else past[0].shape[2]
    at = P if start is None else start
    q, k = _rotate(q, at, base, layout), _rotate(k, at, base, layout)
    if rotate_values:
        v = _rotate(v, at, base, layout)
    if gains[0] is not None and norm == "after":
        q, k = _rms(q, gains[0]), _rms(k, gains[1])
    if past is not None:
        k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
    keys, values = k, v
    if past is not None and not use_past:
        k, v, P = k[:, :, P:], v[:, :, P:], 0
    n_rep = H // H_kv
    if repeat == "consecutive":
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    else:
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    scores = q @ k.transpose(-2, -1) / {"sqrt": math.sqrt(D), "D": D, "none": 1.0}[scale]  # (B, H, T, P + T)
    if causal:
        allowed = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P if shifted else 0)
        scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)
    return out.transpose(1, 2).reshape(B, T, C) @ state["out_proj.weight"].T, keys, values


def _attention_mistakes(
    x: Tensor, state: dict, H: int, H_kv: int, base: float, past: tuple[Tensor, Tensor] | None
) -> list[Variant]:
    run = lambda **wrong: lambda: _attention(x, state, H, H_kv, base, past, **wrong)[0]  # noqa: E731
    variants: list[Variant] = []
    if past is not None:
        variants += [
            (
                run(start=0),
                "the new positions were rotated as positions 0..T-1. After a cache of P positions they are P..P+T-1: "
                "rotate them there (apply_rope on the new positions with P zero positions in front, keeping the last "
                "T; or the angles ref.rope_cos_sin(P + T, D, base) from row P on). This is the classic bug of RoPE "
                "with a KV cache: the model sees every new token at the start of the text.",
            ),
            (
                run(shifted=False),
                "the causal triangle was not shifted by the P cached positions: new query i is at position P + i "
                "and may attend to keys 0..P+i (torch.ones(T, P + T).tril(diagonal=P)).",
            ),
            (
                run(use_past=False),
                "the cached keys and values were not attended to: put the new ones after cache.keys / cache.values "
                "(torch.cat along dim=2) and attend to all P + T.",
            ),
        ]
    variants += [
        (run(layout="none"), "the queries and keys were not rotated: RoPE rotates both, after the heads are split."),
        (
            run(layout="halves"),
            "this is the 'rotate half' layout (Hugging Face's Llama), which pairs channel i with i + D/2. The contract "
            "rotates neighbouring pairs (2i, 2i+1), as lesson 03's apply_rope and ref.rotate_pairs do.",
        ),
        (run(rotate_values=True), "the values were rotated too: RoPE rotates queries and keys only."),
        (run(repeat="interleaved"), _INTERLEAVED),
        (run(causal=False), "there is no causal mask: query m may only attend to keys at positions <= m."),
        (run(scale="D"), "the scores were divided by D; divide by sqrt(D), the head size's square root."),
        (run(scale="none"), "the scores were not scaled: divide q @ k^T by sqrt(D)."),
    ]
    if base != 10000.0:
        variants.append(
            (
                lambda: _attention(x, state, H, H_kv, 10000.0, past)[0],
                f"the rotation used base 10000, not rope_base={base:g}: keep the constructor's rope_base and rotate "
                "with it.",
            )
        )
    if "q_norm.weight" in state:
        variants += [
            (
                run(norm="after"),
                "QK-norm came after the rotation: normalise each head's queries and keys first, then rotate them.",
            ),
            (run(norm="swapped"), "q_norm and k_norm are swapped: q_norm normalises the queries, k_norm the keys."),
            (
                run(norm="none"),
                "the queries and keys were not normalised: with qk_norm, apply q_norm and k_norm to each head.",
            ),
        ]
    return variants


_INTERLEAVED = (
    "the key/value heads are interleaved (head h reads key/value head h % n_kv_heads): each key/value head serves "
    "n_rep consecutive query heads, h // n_rep, as repeat_kv gives them."
)


# ------------------------------------------------------------------------------------------------------------
# Exercise: ModernAttention


def random_state(reference: nn.Module, seed: int) -> dict[str, Tensor]:
    """Random parameters for `reference`'s state dict: weights of about twice 1/sqrt(fan_in) (so that every piece
    moves the output), gains around 1."""
    g = core.generator(seed)
    state = {}
    for key, value in reference.state_dict().items():
        if value.dim() == 2:
            state[key] = 2 * torch.randn(value.shape, generator=g) / math.sqrt(value.shape[1])
        else:
            state[key] = 1.0 + 0.3 * torch.randn(value.shape, generator=g)
    return state


def _expect_attention_parts(name: Graded, module: Any, d_model: int, H: int, H_kv: int, qk_norm: bool, what: str):
    D = d_model // H
    for attr, value in (("n_heads", H), ("n_kv_heads", H_kv), ("d_head", D)):
        got = getattr(module, attr, None)
        if not core.is_int(got) or got != value:
            raise GradingError(name, f"{what}.{attr} is {got!r}; the contract exposes {attr} as an int ({value} here).")
    shapes = {"qkv": (d_model, (H + 2 * H_kv) * D, "x"), "out_proj": (d_model, d_model, "the heads' outputs")}
    expect_linears(name, module, shapes, False, what)
    for attr in ("q_norm", "k_norm"):
        norm = getattr(module, attr, None)
        if qk_norm and norm is None:
            raise GradingError(name, f"{what} has no `{attr}`: with qk_norm=True, {_NAMES}")
        if not qk_norm and norm is not None:
            raise GradingError(name, f"{what} has a `{attr}` with qk_norm=False: create the norms only with qk_norm.")


def _reference(args: tuple, options: dict, state: dict[str, Tensor]) -> ref.ModernAttention:
    reference = ref.ModernAttention(*args, **options).double().eval()
    reference.load_state_dict({k: v.double() for k, v in state.items()})
    return reference


@keeps_rng
def check_ModernAttention(answer: Any, cases: list | None = None) -> Passed:
    """Check `ModernAttention(d_model, n_heads, n_kv_heads, qk_norm=False, rope_base=10000.0)`. A case is `(B, P, T,
    d_model, n_heads, n_kv_heads, qk_norm, rope_base or None, seed)`: T new positions, after a cache of P (built where
    the answer lives) when P > 0; the cache it grows is checked too. Last, the ValueError for heads that do not
    divide."""
    name = Graded(ref.ModernAttention)
    check_definition(answer, name)
    run = tagged_cases(cases, _ATTENTION_CASES)
    for tag, case in run:
        _one_call(name, answer, tag, *case)
    _expect_value_error(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _one_call(name, answer, tag, B, P, T, d_model, H, H_kv, qk_norm, base, seed) -> None:
    args = (d_model, H, H_kv)
    options = {**({"qk_norm": True} if qk_norm else {}), **({"rope_base": base} if base is not None else {})}
    shown = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in options.items())])
    what = call_label(name, shown, tag)
    module = build_module(name, answer, *args, what=what, seed=seed, **options)
    _expect_attention_parts(name, module, d_model, H, H_kv, qk_norm, what)
    reference = ref.ModernAttention(*args, **options).eval()
    expect_state(name, module, reference, what, _NAMES)
    state = random_state(reference, seed + 50)
    call_without_grad(name, module.load_state_dict, state, what=f"{what}.load_state_dict(...)")
    reference = _reference(args, options, state)
    used_base = 10000.0 if base is None else base
    x = core.random_tensor(B, P + T, d_model, seed=seed + 100)
    double = {k: v.double() for k, v in state.items()}
    if P == 0:
        call = f"{what} on x {(B, T, d_model)}" if tag is None else f"{what} on its input"
        got = tensor_result(name, call_without_grad(name, module, x.clone(), what=call), call)
        with torch.no_grad():
            expected = reference(x.double())
            diagnose_tensor(
                name, call, got, expected, _attention_mistakes(x.double(), double, H, H_kv, used_base, None),
                atol=1e-4, rtol=1e-4,
            )  # fmt: skip
        return
    with torch.no_grad():
        start = LayerCache(keys=torch.zeros(B, H_kv, 0, d_model // H, dtype=torch.float64), values=None)
        start.values = start.keys
        reference(x[:, :P].double(), cache=start)  # the keys and values of the first P positions, as cached
        past = (start.keys, start.values)
        expected_cache = LayerCache(keys=past[0], values=past[1])
        expected = reference(x[:, P:].double(), cache=expected_cache)
    cache = core.make(answer, layer_cache, past[0].float(), past[1].float())
    call = f"{what} on x {(B, T, d_model)} with a cache of P={P} positions" if tag is None else f"{what} with its cache"
    hints = [(lambda m: "cache" in m and "argument" in m, _CACHE_HINT)]
    got = tensor_result(
        name, call_without_grad(name, module, x[:, P:].clone(), cache=cache, what=call, hints=hints), call
    )
    with torch.no_grad():
        diagnose_tensor(
            name, call, got, expected, _attention_mistakes(x[:, P:].double(), double, H, H_kv, used_base, past),
            atol=1e-4, rtol=1e-4,
        )  # fmt: skip
    _expect_grown_cache(name, call, cache, expected_cache, x[:, P:].double(), double, (H, H_kv, used_base), past)


def _expect_grown_cache(name, call, cache, expected: LayerCache, x, state, shape, past) -> None:
    """The cache the answer grew must hold the rotated keys and the values of all P + T positions, H_kv heads."""
    H, H_kv, base = shape
    for which in ("keys", "values"):
        got, want = getattr(cache, which, None), getattr(expected, which)
        if not isinstance(got, Tensor):
            raise GradingError(name, f"after {call}, cache.{which} is not a tensor: put the grown {which} back there.")
        if tuple(got.shape) == tuple(past[0 if which == "keys" else 1].shape):
            raise GradingError(
                name,
                f"after {call}, cache.{which} still holds only the P cached positions: append the new {which} "
                f"(torch.cat([cache.{which}, new], dim=2)) and put the result back in cache.{which}.",
            )
        if got.shape[1] == H != H_kv and tuple(got.shape[2:]) == tuple(want.shape[2:]):
            raise GradingError(
                name,
                f"after {call}, cache.{which} holds {H} heads: keep the {H_kv} key/value heads in the cache and repeat "
                "them only for the scores (repeat_kv after the cache): the smaller cache is what grouped-query "
                "attention is for.",
            )
        if which == "keys":
            _expect_rotated_keys(name, call, got, want, x, state, shape, past)
        if not same_values(got, want):
            raise GradingError(
                name,
                f"after {call}, cache.{which} is not the cached {which} followed by the new ones ({tuple(want.shape)}: "
                f"P + T positions of {H_kv} heads{', keys rotated at their positions' if which == 'keys' else ''}).",
            )


def _expect_rotated_keys(name, call, got: Tensor, want: Tensor, x, state, shape, past) -> None:
    """Name the grown keys' mistake: cached before their rotation, or rotated at positions 0..T-1."""
    H, H_kv, base = shape
    unrotated = _attention(x, state, H, H_kv, base, past, layout="none")[1]
    at_zero = _attention(x, state, H, H_kv, base, past, start=0)[1]
    variants: list[Variant] = [
        (
            lambda: unrotated,
            "the new keys went into the cache before their rotation: cache them rotated, at their positions, so that "
            "a later step uses them as they are.",
        ),
        (lambda: at_zero, "the new keys were cached rotated as positions 0..T-1; they are P..P+T-1."),
    ]
    mistake = find_mistake(variants, lambda value: same_values(got, value), lambda value: same_values(value, want))
    if mistake is not None:
        raise GradingError(name, f"after {call}: {mistake}")


def same_values(a: Any, b: Tensor) -> bool:
    """`a` is a tensor of b's shape whose values are within 1e-4 of b's (compared in float64)."""
    return isinstance(a, Tensor) and tuple(a.shape) == tuple(b.shape) and torch.allclose(a.double(), b, atol=1e-4)


def _expect_value_error(name: Graded, answer: Any) -> None:
    what = f"{name}(16, 4, 3)"
    error = call_without_grad(name, core.catching(answer), 16, 4, 3, what=what)
    if not isinstance(error, ValueError):
        got = "did not raise" if error is None else f"raised {type(error).__name__} ({error})"
        raise GradingError(
            name,
            f"{what} {got}: 4 query heads cannot be shared out among 3 key/value heads. Raise ValueError unless "
            "n_heads % n_kv_heads == 0.",
        )
