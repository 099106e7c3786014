"""Multi-head attention, from a list of heads to one fused kernel call (Lesson 05).

Four versions of the same causal multi-head attention, each computing the same function as the one before
(tests copy the weights across and check that the outputs agree):

    MultiHeadAttentionWrapper   H separate CausalSelfAttention heads, outputs concatenated, then out_proj
    BatchedMultiHeadAttention   one W_query/W_key/W_value for all heads; split_heads/merge_heads regroup
    MultiHeadAttention          one fused qkv linear; optional mask; causal or not
    MultiHeadAttention(use_sdpa=True)   the same module routed through F.scaled_dot_product_attention

Helpers map our weights to and from `torch.nn.MultiheadAttention`, count parameters and time the versions.

Lesson 10 adds a KV cache to the same module, so that generation feeds one new token per step:

    attend_with_cache   T new queries over P cached and T new keys, the causal triangle shifted by P (exercise)
    LayerCache          one layer's keys and values so far; MultiHeadAttention(x, cache=...) grows it

Shape legend: B batch, T time (new positions), P positions already cached, H heads, D head size (d_head),
C / d_model channels (= H * D), V vocabulary.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.attention import (
    CausalSelfAttention,
    attention_weights,
    causal_mask,
    scaled_dot_product_attention,
)

__all__ = [
    "split_heads",
    "merge_heads",
    "MultiHeadAttentionWrapper",
    "BatchedMultiHeadAttention",
    "MultiHeadAttention",
    "attend_with_cache",
    "LayerCache",
    "to_torch_mha",
    "from_torch_mha",
    "count_parameters",
    "multihead_parameter_count",
    "benchmark_variants",
]


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """Cut the channels into n_heads groups of D and move heads next to the batch: head h owns h*D:(h+1)*D.

    Lesson 05, exercise `split_merge_heads`. x: (B, T, H*D) -> (B, H, T, D).
    """
    B, T, C = x.shape
    return x.reshape(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, T, H, D) -> (B, H, T, D)


def merge_heads(x: Tensor) -> Tensor:
    """Inverse of split_heads: put the heads' channels back side by side.

    Lesson 05, exercise `split_merge_heads`. x: (B, H, T, D) -> (B, T, H*D).
    """
    B, H, T, D = x.shape
    # After the transpose the memory is no longer in (B, T, H, D) order, so reshape makes a copy here.
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H, D) -> (B, T, H*D)


class MultiHeadAttentionWrapper(nn.Module):
    """Version 1: n_heads independent CausalSelfAttention heads of size d_out // n_heads, run one after the
    other; their outputs are concatenated (B, T, d_out) and mixed by an output projection out_proj.

    Lesson 05. x: (B, T, d_in) -> (B, T, d_out), or (out, weights (B, H, T, T)).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        n_heads: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        _checks.divisible("d_out", d_out, "n_heads", n_heads)  # the heads' own arguments are checked by each head
        self.d_in, self.d_out, self.n_heads = d_in, d_out, n_heads
        self.heads = nn.ModuleList(
            CausalSelfAttention(d_in, d_out // n_heads, context_length, dropout, qkv_bias) for _ in range(n_heads)
        )
        self.out_proj = nn.Linear(d_out, d_out)  # lets the heads' outputs mix: d_out -> d_out

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        results = [head(x, need_weights=True) for head in self.heads]  # H pairs: (B, T, D), (B, T, T)
        out = torch.cat([o for o, _ in results], dim=-1)  # (B, T, H*D)
        out = self.out_proj(out)  # (B, T, d_out)
        weights = torch.stack([w for _, w in results], dim=1)  # H x (B, T, T) -> (B, H, T, T)
        return (out, weights) if need_weights else out


class BatchedMultiHeadAttention(nn.Module):
    """Version 2: what changed — one d_in -> d_out projection each for Q, K, V serves all heads at once;
    split_heads gives every head its own D channels and one batched matmul attends all heads together.

    Lesson 05. x: (B, T, d_in) -> (B, T, d_out), or (out, weights (B, H, T, T)).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        n_heads: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        _checks.positive_ints(d_in=d_in, context_length=context_length)
        _checks.divisible("d_out", d_out, "n_heads", n_heads)
        _checks.probability("dropout", dropout)
        self.d_in, self.d_out, self.n_heads, self.context_length = d_in, d_out, n_heads, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        T = x.shape[1]
        if self.context_length < T:  # as CausalSelfAttention, whose heads it batches
            raise ValueError(f"`x` has T={T}, more than context_length={self.context_length}")
        q = split_heads(self.W_query(x), self.n_heads)  # (B, T, d_out) -> (B, H, T, D)
        k = split_heads(self.W_key(x), self.n_heads)  # (B, H, T, D)
        v = split_heads(self.W_value(x), self.n_heads)  # (B, H, T, D)
        weights = attention_weights(q, k, causal_mask(T, device=x.device))  # (B, H, T, T)
        weights = self.dropout(weights)
        out = merge_heads(weights @ v)  # (B, H, T, T) @ (B, H, T, D) -> (B, H, T, D) -> (B, T, d_out)
        out = self.out_proj(out)  # (B, T, d_out)
        return (out, weights) if need_weights else out

    @classmethod
    def from_wrapper(cls, wrapper: MultiHeadAttentionWrapper) -> BatchedMultiHeadAttention:
        """The batched module computing the same function: head h's weights become rows h*D:(h+1)*D."""
        first = wrapper.heads[0]
        batched = cls(
            wrapper.d_in,
            wrapper.d_out,
            first.context_length,
            wrapper.n_heads,
            first.dropout.p,
            qkv_bias=first.W_query.bias is not None,
        )
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                target = getattr(batched, name)
                per_head = [getattr(head, name) for head in wrapper.heads]
                target.weight.copy_(torch.cat([lin.weight for lin in per_head], dim=0))  # (H*D, d_in)
                if target.bias is not None:
                    target.bias.copy_(torch.cat([lin.bias for lin in per_head], dim=0))  # (H*D,)
        batched.out_proj.load_state_dict(wrapper.out_proj.state_dict())
        return batched


class MultiHeadAttention(nn.Module):
    """Version 3: what changed — one fused linear computes [q | k | v] in a single matmul; the module can be
    causal or not and takes an extra bool mask (True = keep), combined with the causal one.

    Version 4 is the same module with `use_sdpa=True`: attention runs in F.scaled_dot_product_attention
    (a fused kernel, where one applies, never writes the (B, H, T, T) weights to memory; SDPA's math fallback
    still computes them, it only does not return them). Asking for the weights falls back to the explicit path.
    Lesson 05, exercise `MultiHeadAttention`.
    x: (B, T, d_model), mask: bool broadcastable to (B, H, T, T) -> (B, T, d_model), or (out, weights
    (B, H, T, T)) where weights are exactly what multiplied V (after dropout, as in PyTorch).
    Lesson 10: with `cache` (a LayerCache of P earlier positions) the T new queries attend to the P cached keys
    and their own T through `attend_with_cache`, and the cache grows by T; `mask` then broadcasts to
    (B, H, T, P + T), and no weights are kept (None). For causal self-attention, the only kind that caches.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        causal: bool = False,
        bias: bool = True,
        use_sdpa: bool = False,
    ) -> None:
        super().__init__()
        _checks.divisible("d_model", d_model, "n_heads", n_heads)
        _checks.probability("dropout", dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.causal, self.use_sdpa = causal, use_sdpa
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)  # output [q | k | v], heads contiguous in each
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: LayerCache | None = None,
    ) -> Tensor | tuple[Tensor, Tensor | None]:
        q, k, v = self.qkv(x).split(self.d_model, dim=-1)  # (B, T, 3*d_model) -> 3 x (B, T, d_model)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))  # each (B, H, T, D)
        if cache is not None:  # lesson 10: the T new positions come after the P cached ones
            attend = self._attend
            if mask is not None:  # the caller's mask, on top of the shifted triangle
                attend = lambda q, k, v, shifted: self._attend(q, k, v, shifted & mask)
            out, cache.keys, cache.values = attend_with_cache(q, k, v, cache.keys, cache.values, attend)
            weights = None
        else:
            allowed = mask
            if self.causal:
                tril = causal_mask(x.shape[1], device=x.device)  # (T, T), built for this call's T
                allowed = tril if mask is None else tril & mask  # broadcasts to (B, H, T, T)
            out, weights = self._attend(q, k, v, allowed, need_weights, plain_causal=self.causal and mask is None)
        out = self.out_proj(merge_heads(out))  # (B, T, d_model)
        return (out, weights) if need_weights else out

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        allowed: Tensor | None,
        need_weights: bool = False,
        plain_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """q (B, H, Tq, D) attends to k, v (B, H, Tk, D) where `allowed` (True = keep; None: everywhere) ->
        (out (B, H, Tq, D), weights (B, H, Tq, Tk), or None from the fused kernel). `plain_causal`: `allowed`
        is just the causal triangle, which the fused kernel applies by itself (is_causal: its fastest kernels)."""
        if self.use_sdpa and not need_weights:
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=None if plain_causal else allowed,  # bool, True = take part (our convention too)
                dropout_p=self.dropout.p if self.training else 0.0,
                is_causal=plain_causal,
            )  # (B, H, Tq, D)
            return out, None
        weights = self.dropout(attention_weights(q, k, allowed))  # (B, H, Tq, Tk): what multiplies V
        return weights @ v, weights  # (B, H, Tq, Tk) @ (B, H, Tk, D) -> (B, H, Tq, D)

    @classmethod
    def from_batched(cls, batched: BatchedMultiHeadAttention, use_sdpa: bool = False) -> MultiHeadAttention:
        """The fused, causal module computing the same function as `batched` (needs d_in == d_out)."""
        if batched.d_in != batched.d_out:
            raise ValueError(f"`batched` must have d_in == d_out to fuse, got {batched.d_in} and {batched.d_out}")
        fused = cls(batched.d_out, batched.n_heads, batched.dropout.p, causal=True, use_sdpa=use_sdpa)
        linears = (batched.W_query, batched.W_key, batched.W_value)
        with torch.no_grad():
            fused.qkv.weight.copy_(torch.cat([lin.weight for lin in linears], dim=0))  # (3*d_model, d_model)
            biases = [lin.bias if lin.bias is not None else torch.zeros(batched.d_out) for lin in linears]
            fused.qkv.bias.copy_(torch.cat(biases))  # (3*d_model,)
        fused.out_proj.load_state_dict(batched.out_proj.state_dict())
        return fused


def attend_with_cache(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    attend: Callable[..., tuple[Tensor, Tensor | None]] = scaled_dot_product_attention,
) -> tuple[Tensor, Tensor, Tensor]:
    """One step of causal self-attention with a growing cache: what MultiHeadAttention does with a LayerCache.

    Lesson 10, exercise `attend_with_cache`. q, k, v (B, H, T, D) belong to T new positions; k_cache, v_cache
    (B, H, P, D) hold the keys and values of the P positions before them (P = 0: an empty cache). The new keys
    and values go *after* the cached ones, so new query i sits at position P + i and may attend keys 0..P + i
    (the causal triangle shifted right by P; with T = 1 every key is allowed). Scores are scaled by sqrt(D).
    Returns (out (B, H, T, D), keys (B, H, P + T, D), values (B, H, P + T, D)): new tensors, the inputs unchanged.
    The cached keys are not recomputed: in a causal model a position's key and value never change later.
    `attend(q, keys, values, allowed) -> (out, weights)` does the attention itself: lesson 04's
    scaled_dot_product_attention (which checks its arguments), or MultiHeadAttention's own (dropout, SDPA).
    """
    P, T = k_cache.shape[2], q.shape[2]
    keys = torch.cat([k_cache, k], dim=2)  # (B, H, P + T, D): the cached positions first, then the new ones
    values = torch.cat([v_cache, v], dim=2)  # (B, H, P + T, Dv)
    allowed = torch.ones(T, P + T, dtype=torch.bool, device=q.device).tril(diagonal=P)  # (T, P + T): keys 0..P+i
    out, _ = attend(q, keys, values, allowed)  # (B, H, T, P + T) weights @ (B, H, P + T, Dv) -> (B, H, T, Dv)
    return out, keys, values


@dataclass
class LayerCache:
    """The keys and values one attention layer has computed so far, (B, H, P, D) each (P = 0 when new).

    Lesson 10. MultiHeadAttention.forward(x, cache=layer_cache) attends its T new positions after these P and
    puts the grown (B, H, P + T, D) tensors back here; `course_lib.gpt.KVCache` holds one per layer.
    """

    keys: Tensor
    values: Tensor


def to_torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """An `nn.MultiheadAttention` (batch_first=True) with our weights: in_proj_weight rows are [q; k; v].

    Lesson 05. PyTorch's module has no `causal` flag and its bool masks mean the opposite of ours
    (True = NOT allowed): call it with `attn_mask=~causal_mask(T)` to reproduce a causal `ours`.
    """
    _checks.instance("ours", ours, MultiHeadAttention, "a MultiHeadAttention")
    bias = ours.qkv.bias is not None
    theirs = nn.MultiheadAttention(ours.d_model, ours.n_heads, dropout=ours.dropout.p, bias=bias, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.qkv.weight)  # (3*d_model, d_model)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)  # (d_model, d_model)
        if bias:
            theirs.in_proj_bias.copy_(ours.qkv.bias)
            theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs


def from_torch_mha(theirs: nn.MultiheadAttention, causal: bool = False) -> MultiHeadAttention:
    """Our MultiHeadAttention with the weights of `theirs` (kdim = vdim = embed_dim, no bias_k/zero_attn).

    Lesson 05. `causal` is ours to choose: PyTorch passes causality per call through `attn_mask`.
    """
    _checks.instance("theirs", theirs, nn.MultiheadAttention, "an nn.MultiheadAttention")
    if not theirs._qkv_same_embed_dim or theirs.bias_k is not None or theirs.add_zero_attn:
        raise ValueError("`theirs` must use kdim == vdim == embed_dim, add_bias_kv=False and add_zero_attn=False")
    bias = theirs.in_proj_bias is not None
    ours = MultiHeadAttention(theirs.embed_dim, theirs.num_heads, theirs.dropout, causal=causal, bias=bias)
    with torch.no_grad():
        ours.qkv.weight.copy_(theirs.in_proj_weight)
        ours.out_proj.weight.copy_(theirs.out_proj.weight)
        if bias:
            ours.qkv.bias.copy_(theirs.in_proj_bias)
            ours.out_proj.bias.copy_(theirs.out_proj.bias)
    return ours


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars in `module` (Lesson 05, cost comparison)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def multihead_parameter_count(d_model: int, qkv_bias: bool = True, out_bias: bool = True) -> int:
    """4 d_model² weights (Q, K, V, output) plus biases. The number of heads does not change it: heads only
    decide how the d_model channels are grouped. Lesson 05."""
    _checks.positive_int("d_model", d_model)
    return 4 * d_model * d_model + (3 * d_model if qkv_bias else 0) + (d_model if out_bias else 0)


def _median_seconds(variants: dict[str, Callable], x: Tensor, warmup: int, repeats: int) -> dict[str, float]:
    """Median seconds per variant; rounds interleave the variants so load changes hit all of them alike."""
    for fn in variants.values():
        for _ in range(warmup):  # first calls pay for allocations and kernel selection
            fn(x)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn(x)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def benchmark_variants(
    seq_lens: Sequence[int] = (64, 128, 256, 512),
    batch_size: int = 8,
    d_model: int = 256,
    n_heads: int = 8,
    repeats: int = 10,
    warmup: int = 2,
    num_threads: int | None = None,
    seed: int = 0,
) -> list[dict]:
    """Median forward time of each causal multi-head variant (same weights) at each sequence length.

    Lesson 05, "cost and speed". CPU, inference_mode; `num_threads` is set for the run and restored after
    (None, the default and what the lesson uses, keeps PyTorch's own choice; a benchmark may pin it). One dict
    per (variant, seq_len): `median_ms`, `speedup_vs_wrapper` (wrapper time / variant time, same run) and
    `max_abs_diff` (output vs the wrapper's).
    """
    _checks.positive_ints(batch_size=batch_size, repeats=repeats)
    _checks.int_between("warmup", warmup, 0)
    if num_threads is not None:
        _checks.positive_int("num_threads", num_threads)
    _checks.divisible("d_model", d_model, "n_heads", n_heads)
    if not seq_lens:
        raise ValueError("`seq_lens` must list at least one sequence length")
    for i, T in enumerate(seq_lens):
        _checks.positive_int(f"seq_lens[{i}]", T)

    with torch.random.fork_rng(devices=[]):  # weight init uses the global RNG; leave the caller's untouched
        torch.manual_seed(seed)
        wrapper = MultiHeadAttentionWrapper(d_model, d_model, max(seq_lens), n_heads).eval()
        batched = BatchedMultiHeadAttention.from_wrapper(wrapper).eval()  # the same weights, regrouped
        fused = MultiHeadAttention.from_batched(batched).eval()
        sdpa = MultiHeadAttention.from_batched(batched, use_sdpa=True).eval()
        torch_mha = to_torch_mha(fused).eval()
    masks = {T: ~causal_mask(T) for T in seq_lens}  # PyTorch's convention: True = NOT allowed
    variants: dict[str, Callable[[Tensor], Tensor]] = {
        "wrapper of heads": wrapper,
        "batched heads": batched,
        "fused QKV": fused,
        "fused QKV + SDPA": sdpa,
        "nn.MultiheadAttention": lambda x: torch_mha(x, x, x, attn_mask=masks[x.shape[1]], need_weights=False)[0],
    }
    generator = torch.Generator().manual_seed(seed)
    threads_before = torch.get_num_threads()
    rows: list[dict] = []
    try:
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        with torch.inference_mode():
            for T in seq_lens:
                x = torch.randn(batch_size, T, d_model, generator=generator)  # (B, T, d_model)
                reference = wrapper(x)
                seconds = _median_seconds(variants, x, warmup, repeats)
                for name, fn in variants.items():
                    row = dict(variant=name, seq_len=T, batch_size=batch_size, d_model=d_model, n_heads=n_heads)
                    row["median_ms"] = 1e3 * seconds[name]
                    row["speedup_vs_wrapper"] = seconds["wrapper of heads"] / seconds[name]
                    row["max_abs_diff"] = (fn(x) - reference).abs().max().item()
                    rows.append(row)
    finally:
        torch.set_num_threads(threads_before)
    return rows
