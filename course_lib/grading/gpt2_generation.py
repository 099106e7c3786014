"""Graders of lesson 10's generation exercises (`top_p_filter`, `attend_with_cache`), re-exported by
`course_lib.grading.gpt2`, which the test cells import.

`top_p_filter` is compared token by token: which logits became -inf, and that the others are the input's. The
cases' p values sit well away from every running total of their rows, so summing in another order cannot flip a
token; one case has p = 0, where only the top token stays. Known mistakes recomputed and named: the top token
dropped at p = 0, the token that crosses p dropped, the top token dropped when it alone exceeds p, an ascending
sort, probabilities over the wrong axis, a running total of raw logits or of unsorted probabilities, p taken as a
fraction of the vocabulary, 0 instead of -inf, probabilities or the sorted order returned.

`attend_with_cache` is checked in two parts: the returned cache (the new keys and values appended after the
cached ones, along the positions) and the output (the new queries over all P + T keys, the causal triangle
shifted by P). Mistakes named: nothing appended, only the new keys kept, new before cached, another dimension;
the cache not used, the triangle aligned to the top-left corner, no mask, a query's own key masked, an inverted
mask, the wrong scale, the softmax over the queries.

Shape legend: B batch, H heads, T new positions, P cached positions, D head size, V vocabulary.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from course_lib import generate as generation
from course_lib import gpt2 as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Passed,
    call_label,
    describe,
    expect_unchanged,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, close, find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_top_p_filter", "check_attend_with_cache"]

NEG_INF = float("-inf")

# ------------------------------------------------------------------------------------------------------------
# Exercise 3: top_p_filter
# ------------------------------------------------------------------------------------------------------------

# (shape, p, scale of the logits, seed); rows differ in how peaked they are, and shape[0] != V where it matters
_TOP_P_CASES: list = [
    ((10,), 0.5, 1.0, 0),
    ((3, 12), 0.8, 2.0, 1),
    ((2, 2, 9), 0.6, 3.0, 2),  # three rows whose top token alone exceeds p, one whose second token crosses it
    ((4, 16), 0.9, 1.0, 3),
    ((3, 10), 0.0, 2.0, 4),  # p = 0: only the top token of each row stays
]


def top_p_logits(shape: tuple[int, ...], scale: float, seed: int) -> Tensor:
    """The logits of a top-p case."""
    return core.random_tensor(*shape, seed=seed, scale=scale)


def _keep(logits: Tensor, keep: Tensor) -> Tensor:
    return logits.masked_fill(~keep, NEG_INF)


def _sorted_keep(logits: Tensor, p: float, rule, *, descending: bool = True, dim: int = -1) -> Tensor:
    """Keep-mask in vocabulary order: `rule(probs, running total)` applied to the probabilities sorted along `dim`."""
    probs = torch.softmax(logits, dim=dim)
    sorted_probs, order = torch.sort(probs, dim=dim, descending=descending)
    keep_sorted = rule(sorted_probs, torch.cumsum(sorted_probs, dim=dim))
    return torch.zeros_like(keep_sorted).scatter(dim, order, keep_sorted)


def _top_p_variants(logits: Tensor, p: float) -> list[Variant]:
    right = lambda probs, total: total - probs < p  # noqa: E731 - kept while the tokens above total less than p
    V = logits.shape[-1]

    def shifted_without_top(probs: Tensor, total: Tensor) -> Tensor:
        remove = total > p
        remove[..., 1:] = remove[..., :-1].clone()  # the shift keeps the crossing token, but not always the top one
        return ~remove

    def unsorted(x: Tensor) -> Tensor:
        probs = torch.softmax(x, dim=-1)
        return _keep(x, torch.cumsum(probs, dim=-1) - probs < p)

    def raw_total(x: Tensor) -> Tensor:
        s, order = torch.sort(x, dim=-1, descending=True)
        keep = torch.cumsum(s, dim=-1) - s < p
        return _keep(x, torch.zeros_like(keep).scatter(-1, order, keep))

    def fraction_of_vocabulary(x: Tensor) -> Tensor:
        k = max(1, math.ceil(p * V))
        return _keep(x, x >= torch.topk(x, k, dim=-1).values[..., -1:])

    def sorted_order(x: Tensor) -> Tensor:
        s = torch.sort(x, dim=-1, descending=True).values
        probs = torch.softmax(s, dim=-1)
        return _keep(s, torch.cumsum(probs, dim=-1) - probs < p)

    variants: list[Variant] = [
        (
            lambda: _keep(logits, _sorted_keep(logits, p, right)),
            "with p = 0 every token became -inf: the top token is always kept, also when p = 0 (the 0 above it "
            "is not less than 0), so never drop the first token of the sorted order.",
        ),
        (
            lambda: _keep(logits, _sorted_keep(logits, p, lambda probs, total: total <= p)),
            "the token whose probability carries the running total across p was dropped; it is kept. Drop a token "
            "only when the tokens ranked above it already total >= p: (cumsum - probs) >= p, not cumsum > p.",
        ),
        (
            lambda: _keep(logits, _sorted_keep(logits, p, shifted_without_top)),
            "where the most probable token alone has probability above p, every token became -inf. The top token "
            "is always kept (after shifting the mask right, set its first entry to False).",
        ),
        (
            lambda: _keep(logits, _sorted_keep(logits, p, right, descending=False)),
            "the probabilities were sorted in ascending order, so the least likely tokens were kept: sort with "
            "descending=True (most probable first).",
        ),
        (
            lambda: _keep(logits, _sorted_keep(logits, p, right, dim=0)),
            "the probabilities were computed or sorted over the wrong axis (dim 0): softmax, sort and cumsum run "
            "over the last dimension, the vocabulary (dim=-1).",
        ),
        (
            lambda: raw_total(logits),
            "the running total was taken over the logits themselves; take it over probabilities: softmax first.",
        ),
        (
            lambda: unsorted(logits),
            "the tokens were not sorted by probability before the running total: the nucleus is the most probable "
            "tokens, so sort (descending) first and scatter the decision back.",
        ),
        (
            lambda: fraction_of_vocabulary(logits),
            "p was used as a fraction of the vocabulary (the top p·V tokens); p is a probability mass.",
        ),
        (
            lambda: logits.masked_fill(_keep(logits, _sorted_keep(logits, p, right)).isinf(), 0.0),
            "dropped tokens got logit 0; they must get -inf (probability exactly 0 after the softmax).",
        ),
        (
            lambda: torch.softmax(_keep(logits, _sorted_keep(logits, p, right)), dim=-1),
            "this returns probabilities; return the logits, with -inf for the dropped tokens.",
        ),
        (
            lambda: sorted_order(logits),
            "the result is in sorted order: put every logit back at its token's position (scatter with the "
            "indices of the sort, or mask the original logits).",
        ),
    ]
    return variants


def _top_p_mistake(logits: Tensor, p: float, got: Tensor, expected: Tensor) -> str | None:
    variants = _top_p_variants(logits, p)
    return find_mistake(variants, lambda v: _same_filtered(got, v), lambda v: _same_filtered(v, expected))


def _same_filtered(got: Any, expected: Tensor) -> bool:
    if not isinstance(got, Tensor) or tuple(got.shape) != tuple(expected.shape) or not got.is_floating_point():
        return False
    dropped = expected.isneginf()
    if not torch.equal(got.isneginf(), dropped):
        return False
    return torch.allclose(got[~dropped].double(), expected[~dropped].double(), atol=1e-6, rtol=1e-6)


@keeps_rng
def check_top_p_filter(answer: Any, cases: list | None = None) -> Passed:
    """Check `top_p_filter(logits (..., V), p) -> (..., V)` token by token. A case is `(shape, p, scale, seed)`."""
    name = Graded(generation.top_p_filter)
    check_definition(answer, name)
    run = tagged_cases(cases, _TOP_P_CASES)
    for tag, (shape, p, scale, seed) in run:
        logits = top_p_logits(tuple(shape), scale, seed)
        expected = generation.top_p_filter(logits, p)
        what = call_label(name, f"logits of shape {tuple(shape)}, p={p}", tag)
        given = logits.clone()
        got = call_without_grad(name, answer, given, p, what=what)
        expect_unchanged(name, {"logits": (given, logits)}, what)
        if not isinstance(got, Tensor):
            raise GradingError(name, f"{what} should return a tensor of shape {tuple(shape)}, got {describe(got)}.")
        if tuple(got.shape) != tuple(shape):
            raise GradingError(
                name, f"{what} returned shape {tuple(got.shape)}, expected {tuple(shape)} (the input's)."
            )
        if _same_filtered(got, expected):
            continue
        mistake = _top_p_mistake(logits, p, got, expected)
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        kept, wanted = int((~got.isneginf()).sum()), int((~expected.isneginf()).sum())
        detail = f" kept {kept} tokens, expected {wanted}" if tag is None else ""
        raise GradingError(
            name,
            f"{what}:{detail} — keep, in each row, the most probable tokens until their total reaches p (the token "
            "that crosses p included), leave their logits as they were and set the rest to -inf.",
        )
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 4: attend_with_cache
# ------------------------------------------------------------------------------------------------------------

# (B, H, P cached, T new, D, seed): one new token, a chunk, a prefill into an empty cache, P == T
_CACHE_CASES: list = [(1, 2, 5, 1, 4, 0), (2, 3, 4, 3, 8, 1), (1, 1, 0, 4, 4, 2), (2, 2, 3, 3, 5, 3)]
_CACHE_ORDER = "(B, H, P + T, D)"


def cache_inputs(B: int, H: int, P: int, T: int, D: int, seed: int) -> dict[str, Tensor]:
    """q, k, v (B, H, T, D) and k_cache, v_cache (B, H, P, D) of a case."""
    g = core.generator(seed)
    new = {n: torch.randn(B, H, T, D, generator=g) for n in ("q", "k", "v")}
    return {**new, **{n: torch.randn(B, H, P, D, generator=g) for n in ("k_cache", "v_cache")}}


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, scale: float, dim: int = -1) -> Tensor:
    scores = q @ k.transpose(-2, -1) / scale  # (B, H, T, P + T)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, NEG_INF)
    return torch.softmax(scores, dim=dim) @ v  # (B, H, T, D)


def _cache_variants(x: dict[str, Tensor]) -> list[Variant]:
    q, k, v, kc, vc = x["q"], x["k"], x["v"], x["k_cache"], x["v_cache"]
    P, T, D = kc.shape[2], q.shape[2], q.shape[3]
    keys, values = torch.cat([kc, k], 2), torch.cat([vc, v], 2)  # (B, H, P + T, D)
    shifted = torch.ones(T, P + T, dtype=torch.bool).tril(P)  # (T, P + T)
    return [
        (
            lambda: _attend(q, k, v, torch.ones(T, T, dtype=torch.bool).tril(), math.sqrt(D)),
            "the cached keys and values were not used: the new queries attend to the P cached positions too "
            "(the cache saves recomputing them; it does not replace them).",
        ),
        (
            lambda: _attend(q, keys, values, torch.ones(T, P + T, dtype=torch.bool).tril(), math.sqrt(D)),
            "the causal mask is aligned to the top-left corner: new query i sits at position P + i, so it may "
            "attend keys 0..P + i — torch.ones(T, P + T).tril(diagonal=P).",
        ),
        (
            lambda: _attend(q, keys, values, None, math.sqrt(D)),
            "there is no causal mask: with several new positions, each one attended to the new positions after "
            "it. Allow query i the keys 0..P + i.",
        ),
        (
            lambda: _attend(q, keys, values, torch.ones(T, P + T, dtype=torch.bool).tril(P - 1), math.sqrt(D)),
            "the mask hides each query's own position: query i may attend key P + i, itself (diagonal=P, not P - 1).",
        ),
        (
            lambda: _attend(q, keys, values, ~shifted, math.sqrt(D)),
            "the mask is inverted: True = may attend, and a new query may attend the keys up to its own position.",
        ),
        (lambda: _attend(q, keys, values, shifted, 1.0), "the scores were not scaled: divide q kᵀ by sqrt(D)."),
        (
            lambda: _attend(q, keys, values, shifted, math.sqrt(P + T)),
            "the scores were divided by the square root of the number of keys; the scale is sqrt(D), the head size.",
        ),
        (
            lambda: _attend(q, keys, values, shifted, math.sqrt(D), dim=-2),
            "the softmax ran over the queries (dim=-2); each query's weights over the keys must sum to 1 (dim=-1).",
        ),
    ]


def _check_cache(name: str, what: str, x: dict[str, Tensor], got: Any, expected: Tensor, which: str) -> None:
    """`got` must be the cache `which` ("keys" / "values") with the new entries appended along the positions."""
    old, new = (x["k_cache"], x["k"]) if which == "keys" else (x["v_cache"], x["v"])
    if not isinstance(got, Tensor):
        raise GradingError(
            name, f"{what}: the returned {which} should be a tensor {_CACHE_ORDER}, got {describe(got)}."
        )
    if close(got, expected, 0, 0):
        return
    P, T = old.shape[2], new.shape[2]
    variants = [
        (lambda: old, f"the new {which} were not appended: return torch.cat([cache, new], dim=2), (B, H, P + T, D)."),
        (
            lambda: new,
            f"only the new {which} came back; the cache holds all P + T positions: torch.cat([cache, new], dim=2).",
        ),  # fmt: skip
        (
            lambda: torch.cat([new, old], 2),
            f"the new {which} went in front of the cached ones; the cache keeps positions in order, cached first.",
        ),
    ] + [
        (
            lambda dim=dim: torch.cat([old, new], dim),
            f"the {which} were concatenated along dim {dim}; positions are dim 2: (B, H, P + T, D).",
        )
        for dim in (0, 1, 3)
    ]
    mistake = find_mistake(variants, lambda v: close(got, v, 0, 0), lambda v: close(v, expected, 0, 0))
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    raise GradingError(
        name,
        f"{what}: the returned {which} have shape {tuple(got.shape)} (expected {tuple(expected.shape)} = "
        f"(B, H, P + T, D) with P={P}, T={T}) or other values than torch.cat([cache, new], dim=2).",
    )


def _matches(value: Tensor):
    """Equal to `value` within tolerance, NaN where it is NaN (a row whose every key is masked)."""
    return lambda candidate: (
        close(value, candidate)
        or (
            isinstance(candidate, Tensor)
            and candidate.shape == value.shape
            and torch.allclose(value, candidate, atol=1e-5, rtol=1e-4, equal_nan=True)
        )
    )


_CAT_HINT = (
    lambda message: "Sizes of tensors must match" in message or "size mismatch" in message,
    "concatenate the cache and the new entries along the positions, dim=2: (B, H, P, D) + (B, H, T, D) -> "
    "(B, H, P + T, D).",
)


@keeps_rng
def check_attend_with_cache(answer: Any, cases: list | None = None) -> Passed:
    """Check `attend_with_cache(q, k, v, k_cache, v_cache) -> (out, keys, values)`: the cache grown along the
    positions and the output of the new queries over all keys. A case is `(B, H, P, T, D, seed)`."""
    name = Graded(ref.attend_with_cache)
    check_definition(answer, name)
    run = tagged_cases(cases, _CACHE_CASES)
    for tag, (B, H, P, T, D, seed) in run:
        x = cache_inputs(B, H, P, T, D, seed)
        out, keys, values = ref.attend_with_cache(**x)
        shown = f"q, k, v of shape {(B, H, T, D)}, k_cache, v_cache of shape {(B, H, P, D)}"
        what = call_label(name, shown, tag)
        given = {n: t.clone() for n, t in x.items()}
        got = call_without_grad(name, answer, *given.values(), what=what, hints=[_CAT_HINT])
        expect_unchanged(name, {n: (given[n], x[n]) for n in x}, what)
        if not (isinstance(got, tuple | list) and len(got) == 3):
            raise GradingError(name, f"{what} should return three tensors (out, keys, values), got {describe(got)}.")
        _check_cache(name, what, x, got[1], keys, "keys")
        _check_cache(name, what, x, got[2], values, "values")
        result = got[0]
        if not isinstance(result, Tensor) or tuple(result.shape) != tuple(out.shape):
            shape = tuple(result.shape) if isinstance(result, Tensor) else describe(result)
            raise GradingError(
                name, f"{what}: out should have shape {(B, H, T, D)} (one row per new query), got {shape}."
            )
        if close(result, out):
            continue
        mistake = find_mistake(_cache_variants(x), _matches(result), _matches(out))
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        core.expect_close(
            name, result, out, what,
            hint="softmax(q kᵀ / sqrt(D), keys 0..P + i allowed for query i) @ values, over the grown cache.",
        )  # fmt: skip
    return Passed(name, 2 * len(run), hidden=cases is not None)
