"""Grader of lesson 10's `forward_with_cache`, re-exported by `course_lib.grading.gpt2`, which the test cells import.

The check builds a course GPT (`course_lib.gpt.GPT`, where the answer lives: `core.make`) with random weights, its
LayerNorms moved off (1, 0) so that a LayerNorm left out shows, and an empty `KVCache` for it, and feeds the answer
a prompt and then a few chunks of new tokens, one call per chunk, as generation does. After each call it compares
two things with the course's own cached forward pass on a copy of the model (`course_lib.gpt.forward_with_cache`,
which is `GPT.forward(idx, cache=cache)`): the logits returned, and what every layer of the cache holds.

A wrong cache is named by what it holds: nothing new (not grown), the keys grown but not the values, only the new
positions, the new before the cached, the new ones twice, keys and values swapped, every block writing to the first
layer's cache. Wrong logits are compared with the known wrong passes, each recomputed here over the same chunks:
the positions not offset (rows 0 .. T - 1 of the position table after a cache of P), the causal triangle not
shifted by P, no causal mask, the scores not scaled, heads split (and merged) without the transpose, `ln1`, `ln2`
or `ln_f` left out, `out_proj` left out, the attention's residual left out. Heads not split at all cannot go into
the cache's (B, H, P, D) and raise an error, to which a hint is added.

Shape legend: B batch, T new positions, P cached positions, L layers, H heads, D head size, C d_model,
V vocabulary.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import gpt2 as ref
from course_lib.gpt import GPT, KVCache
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, tagged_cases
from course_lib.grading.kit.diagnose import close, find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_forward_with_cache", "cache_state", "empty_cache", "gpt_with_cache"]

# (B, n_layers, n_heads, d_model, vocab_size, context_length, chunks, seed): a prompt of chunks[0] tokens, then a
# call per later chunk. One case feeds every token alone from an empty cache, one has a single head.
_CASES: list = [
    (2, 2, 2, 16, 23, 16, (5, 1, 1, 3), 0),
    (1, 3, 4, 24, 31, 20, (3, 2, 1), 1),
    (2, 2, 1, 8, 17, 12, (1, 1, 1, 1), 2),
]
_ATOL = 1e-4


# ------------------------------------------------------------------------------------------------------------
# What the check builds (module-level functions of the graders, so that `core.make` can build them in a sandbox)


def gpt_with_cache(vocab_size: int, context_length: int, d_model: int, n_heads: int, n_layers: int, seed: int) -> GPT:
    """The course's GPT with random weights, its LayerNorms' gains and biases moved off 1 and 0, in eval mode."""
    torch.manual_seed(seed)
    model = GPT(vocab_size, context_length, d_model, n_heads, n_layers)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.copy_(1.0 + 0.3 * torch.randn_like(module.weight))
                module.bias.copy_(0.3 * torch.randn_like(module.bias))
    return model.eval()


def empty_cache(model: nn.Module, batch_size: int) -> KVCache:
    """An empty KVCache of `model`'s sizes."""
    return KVCache.for_model(model, batch_size)


def cache_state(cache: Any) -> list:
    """What each layer of `cache` holds: [(keys, values), ...] (None where a layer has no such tensor)."""
    state = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        state.append(tuple(t.detach().clone() if isinstance(t, Tensor) else None for t in (keys, values)))
    return state


# ------------------------------------------------------------------------------------------------------------
# Known wrong passes, recomputed over the same chunks


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, scale: float) -> Tensor:
    scores = q @ k.transpose(-2, -1) / scale  # (B, H, T, P + T)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)


def _step(model: GPT, idx: Tensor, layers: list[list[Tensor]], mistake: str) -> Tensor:
    """One call of a pass with `mistake` on idx (B, T) after the cache `layers` ([keys, values] per layer)."""
    B, T = idx.shape
    P = layers[0][0].shape[2]
    start = 0 if mistake == "positions" else P
    x = model.drop(model.tok_emb(idx) + model.pos_emb(torch.arange(start, start + T)))  # (B, T, C)
    for block, layer in zip(model.blocks, layers, strict=True):
        attn = block.attn
        C = x.shape[-1]
        H = attn.n_heads
        D = C // H
        q, k, v = attn.qkv(x if mistake == "no_ln1" else block.ln1(x)).split(C, dim=-1)  # 3 x (B, T, C)
        if mistake.startswith("no_transpose"):
            q, k, v = (t.reshape(B, H, T, D) for t in (q, k, v))  # the wrong cut of (B, T, C)
        else:
            q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        keys, values = torch.cat([layer[0], k], dim=2), torch.cat([layer[1], v], dim=2)  # (B, H, P + T, D)
        shift = {"unshifted": 0}.get(mistake, P)
        allowed = None if mistake == "no_mask" else torch.ones(T, P + T, dtype=torch.bool).tril(shift)
        out = _attend(q, keys, values, allowed, 1.0 if mistake == "unscaled" else math.sqrt(D))
        layer[0], layer[1] = keys, values
        out = out.reshape(B, T, C) if mistake == "no_transpose_at_all" else out.transpose(1, 2).reshape(B, T, C)
        attended = out if mistake == "no_out_proj" else attn.out_proj(out)
        x = attended if mistake == "no_residual" else x + attended
        x = x + block.mlp(x if mistake == "no_ln2" else block.ln2(x))
    return model.lm_head(x if mistake == "no_ln_f" else model.ln_f(x))  # (B, T, V)


def _wrong_logits(case: tuple, chunks: list[Tensor], mistake: str) -> Tensor:
    """The last chunk's logits of a pass with `mistake` on a fresh copy of the case's model, after the earlier
    chunks went through it too."""
    model = _model_here(case)
    B, C = chunks[0].shape[0], model.tok_emb.weight.shape[1]
    H = model.blocks[0].attn.n_heads
    layers = [[torch.zeros(B, H, 0, C // H), torch.zeros(B, H, 0, C // H)] for _ in model.blocks]
    with torch.no_grad():
        for chunk in chunks:
            logits = _step(model, chunk, layers, mistake)
    return logits


def _model_here(case: tuple) -> GPT:
    """The case's model, built here without touching the grader's random state."""
    B, L, H, C, V, context, chunks, seed = case
    with torch.random.fork_rng(devices=[]):
        return gpt_with_cache(V, context, C, H, L, seed)


_NO_TRANSPOSE = (
    "q, k and v were reshaped straight to (B, H, T, D), which mixes positions and heads: reshape to (B, T, H, D), "
    "then .transpose(1, 2)."
)
_SHIFT = "new query i is position P + i and may read keys 0 .. P + i: torch.ones(T, P + T).tril(diagonal=P)"
_LOGIT_MISTAKES: list[tuple[str, str]] = [
    (
        "positions",
        "the new tokens read rows 0 .. T - 1 of the position table. They sit at positions P .. P + T - 1 after the "
        "P cached ones: add pos_emb(torch.arange(P, P + T)), with P = cache.length.",
    ),
    ("unshifted", "the causal mask is aligned to the top-left corner: " + _SHIFT + "."),
    ("no_mask", "there is no causal mask among the new positions: " + _SHIFT + " (attend_with_cache applies it)."),
    ("unscaled", "the attention scores were not divided by sqrt(D), the head size."),
    ("no_transpose", _NO_TRANSPOSE),
    ("no_transpose_at_all", _NO_TRANSPOSE + " Merge back with .transpose(1, 2).reshape(B, T, C)."),
    ("no_ln1", "the attention read the stream itself: project block.ln1(x), as the block does."),
    ("no_ln2", "the feed-forward read the stream itself: x = x + block.mlp(block.ln2(x))."),
    ("no_ln_f", "the final LayerNorm was left out: logits = model.lm_head(model.ln_f(x))."),
    (
        "no_out_proj",
        "the heads' merged output was added without the output projection: x = x + block.attn.out_proj(merged).",
    ),
    ("no_residual", "the attention's output replaced the stream instead of being added to it: x = x + attended."),
]


# ------------------------------------------------------------------------------------------------------------
# The cache after a call


def _same(a: Any, b: Tensor) -> bool:
    return isinstance(a, Tensor) and close(a, b, atol=1e-5)


def _check_cache(name: Graded, what: str, got: Any, before: list, after: list) -> None:
    """Each layer of the answer's cache must hold `after`: `before` (P positions) with the T new ones appended."""
    if not isinstance(got, list) or len(got) != len(after):
        raise GradingError(name, f"after {what} the cache does not have one layer per block ({len(after)}).")
    for i, ((keys, values), (old_k, old_v), (new_k, new_v)) in enumerate(zip(got, before, after, strict=True)):
        if _same(keys, new_k) and _same(values, new_v):
            continue
        where = f"after {what}, cache.layers[{i}]"
        if _same(keys, old_k) and _same(values, old_v):
            raise GradingError(name, f"{where} holds what it held before the call: the cache was not grown; {_STORE}.")
        grew = isinstance(keys, Tensor) and keys.dim() == 4 and keys.shape[2] > new_k.shape[2]
        if i == 0 and len(got) > 1 and grew and _same(got[1][0], before[1][0]):
            raise GradingError(
                name,
                f"{where}.keys grew by {keys.shape[2] - old_k.shape[2]} positions and the next layer's by none: "
                "every block wrote to the first layer's cache. Block i has its own, cache.layers[i].",
            )
        _check_tensor(name, f"{where}.keys", keys, old_k, new_k, new_v)
        _check_tensor(name, f"{where}.values", values, old_v, new_v, new_k)


_STORE = "store attend_with_cache's returned keys and values back in cache.layers[i] (.keys, .values)"


def _check_tensor(name: Graded, where: str, held: Any, old: Tensor, new: Tensor, other: Tensor) -> None:
    """`held` must be `new`: `old` (B, H, P, D) with this call's T positions appended; `other` is the other tensor
    of the layer (values for keys), for a swap."""
    if _same(held, new):
        return
    P = old.shape[2]
    fresh = new[:, :, P:]  # (B, H, T, D): this call's positions
    if _same(held, old):
        raise GradingError(name, f"{where} were not grown: they hold only the P cached positions; {_STORE}.")
    if P > 0 and _same(held, fresh):
        raise GradingError(name, f"{where} hold only this call's T positions: append them after the P cached ones.")
    if P > 0 and _same(held, torch.cat([fresh, old], dim=2)):
        raise GradingError(name, f"{where} hold the new positions before the cached ones: the cached come first.")
    if _same(held, torch.cat([new, fresh], dim=2)):
        raise GradingError(
            name,
            f"{where} hold this call's positions twice: attend_with_cache appends them already; store what it "
            "returns instead of appending again.",
        )
    if _same(held, other):
        raise GradingError(name, f"{where}: keys and values were swapped (.keys holds the k's, .values the v's).")
    shape = tuple(held.shape) if isinstance(held, Tensor) else describe(held)
    raise GradingError(
        name,
        f"{where} should be the (B, H, P + T, D) = {tuple(new.shape)} tensor of the cached and the new positions, "
        f"got {shape} with other values.",
    )


# ------------------------------------------------------------------------------------------------------------
# The check

_HINTS = [
    (
        lambda m: "has no attribute 'keys'" in m or "has no attribute 'values'" in m,
        "each layer of the cache, cache.layers[i], holds two tensors: .keys and .values, (B, H, P, D) each.",
    ),
    (
        lambda m: "Sizes of tensors must match" in m,
        "the cache holds (B, H, P, D) per layer: split q, k, v into attn.n_heads heads, (B, H, T, D), before "
        "attend_with_cache.",
    ),
    (
        lambda m: "must match the size of tensor" in m,
        "the scores (B, H, T, P + T) and the mask (T, P + T) disagree on P. Each block has its own layer of the "
        "cache, cache.layers[i], of P positions; is one layer used by two blocks?",
    ),
    (lambda m: "index out of range" in m, "positions P .. P + T - 1 are rows of pos_emb below its context length."),
    (
        lambda m: "unexpected keyword argument 'cache'" in m,
        "your classes' forwards take no cache: run the parts of each block one by one (ln1, attn.qkv, "
        "attend_with_cache, attn.out_proj, ln2, mlp).",
    ),
]


def _expect_logits(name: Graded, what: str, got: Any, expected: Tensor) -> Tensor | None:
    """The answer's logits if they have the expected form; a GradingError naming what came back otherwise."""
    if isinstance(got, tuple) and got and isinstance(got[0], Tensor):
        raise GradingError(
            name, f"{what} returned a tuple; return the logits (B, T, V) alone, as {tuple(expected.shape)} here."
        )
    core.expect_type(name, got, Tensor, what, "the logits, a tensor (B, T, V)")
    if tuple(got.shape) != tuple(expected.shape):
        raise GradingError(
            name,
            f"{what} returned logits of shape {tuple(got.shape)}, expected {tuple(expected.shape)}: one row of "
            "vocabulary scores per new token, (B, T, V).",
        )
    return got


@keeps_rng
def check_forward_with_cache(answer: Any, cases: list | None = None) -> Passed:
    """Check `forward_with_cache(model, idx, cache) -> logits`: a course GPT and an empty KVCache, fed a prompt and
    then chunks of new tokens, one call each; after every call the logits and every layer of the cache must be the
    course's cached forward pass's. A case is `(B, n_layers, n_heads, d_model, vocab_size, context_length, chunks,
    seed)`."""
    name = Graded(ref.forward_with_cache)
    check_definition(answer, name)
    run = tagged_cases(cases, _CASES)
    for tag, case in run:
        _feed(name, answer, tag, tuple(case))
    return Passed(name, sum(len(case[6]) for _, case in run), hidden=cases is not None)  # one check per call


def _feed(name: Graded, answer: Any, tag: str | None, case: tuple) -> None:
    """One case: the answer's model and cache fed chunk after chunk, each call checked against the reference's."""
    B, L, H, C, V, context, chunks, seed = case
    ids = torch.randint(V, (B, sum(chunks)), generator=core.generator(500 + seed))
    model = core.make(answer, gpt_with_cache, V, context, C, H, L, seed)
    cache = core.make(answer, empty_cache, model, B)
    local = _model_here(case)
    local_cache = empty_cache(local, B)
    fed: list[Tensor] = []
    for size in chunks:
        start = sum(t.shape[1] for t in fed)
        chunk = ids[:, start : start + size]  # (B, T)
        fed.append(chunk)
        before = cache_state(local_cache)
        with torch.no_grad():
            expected = ref.forward_with_cache(local, chunk, local_cache)  # (B, T, V)
        after = cache_state(local_cache)
        what = call_label(name, f"model, idx of shape {tuple(chunk.shape)}, a cache of {start} positions", tag)
        got = call_without_grad(name, answer, model, chunk.clone(), cache, what=what, hints=_HINTS)
        logits = _expect_logits(name, what, got, expected)
        _check_call(name, what, logits, expected, case, fed)
        _check_cache(name, what, core.make(model, cache_state, cache), before, after)
        core.expect_close(
            name, logits, expected, what, atol=_ATOL,
            hint="the logits should be the last T rows of a full forward pass over the P + T tokens.",
        )  # fmt: skip


def _check_call(name: Graded, what: str, logits: Tensor, expected: Tensor, case: tuple, fed: list[Tensor]) -> None:
    """The logits of the last chunk in `fed`: right, or a known wrong pass named. Other wrong logits are reported
    after the cache has been looked at (a wrong cache names the mistake better)."""
    if close(logits, expected, atol=_ATOL):
        return
    variants = [(lambda m=m: _wrong_logits(case, fed, m), text) for m, text in _LOGIT_MISTAKES]
    mistake = find_mistake(variants, lambda v: close(logits, v, atol=_ATOL), lambda v: close(v, expected, atol=_ATOL))
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
