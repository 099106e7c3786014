"""From GPT-2's block to today's open models, one change at a time: the pieces (Lesson 12).

    rms_norm, RMSNorm     scale each vector by its root mean square; no mean taken out, no bias   (exercise)
    rope_cos_sin          the cos and sin of RoPE's angles, computed once per length and head size
    rotate_pairs          RoPE with precomputed angles: lesson 03's apply_rope, inside attention
    rope_attention        causal attention whose queries and keys are rotated first, values not    (exercise)
    SwiGLU, swiglu_hidden the gated feed-forward w2(silu(w1 x) * w3 x) and its parameter-matched width (exercise)
    repeat_kv             grouped-query attention: each key/value head serves n_rep query heads      (exercise)
    kv_cache_bytes        what a KV cache holds: keys and values of every layer, KV head and position
    GPT2_SMALL, LLAMA2_7B, LLAMA3_8B   attention shapes of published models, for the cache arithmetic
    ModernAttention       H query heads, H_kv key/value heads, QK-norm, RoPE at positions P..P+T-1 after a
                          KV cache of P, no biases                                                     (exercise)
    ModernBlock           Llama's block: x + attn(ln1(x)), then x + mlp(ln2(x)), RMSNorm and SwiGLU    (exercise)

`course_lib.modern_gpt` stacks ModernBlocks into a model (and has a switchable block that turns GPT-2's into this
one change at a time), `course_lib.ladder` trains it one switch at a time, and `course_lib.llama_weights` loads a
Hugging Face Llama checkpoint into it.

Shape legend: B batch, T time (new positions), P positions already cached, H query heads, H_kv key/value heads,
D head size, C d_model channels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.multihead import LayerCache
from course_lib.position import rope_angles

__all__ = [
    "GPT2_SMALL",
    "LLAMA2_7B",
    "LLAMA3_8B",
    "AttentionShape",
    "ModernAttention",
    "ModernBlock",
    "RMSNorm",
    "SwiGLU",
    "kv_cache_bytes",
    "repeat_kv",
    "rms_norm",
    "rope_attention",
    "rope_cos_sin",
    "rotate_pairs",
    "swiglu_hidden",
]


# ------------------------------------------------------------------------------------------------------------
# RMSNorm: LayerNorm without the mean and without the bias
# ------------------------------------------------------------------------------------------------------------


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """Divide each vector by its root mean square, then scale: x / sqrt(mean(x**2) + eps) * weight.

    Lesson 12, exercise `rms_norm`; equals `F.rms_norm(x, (C,), weight, eps)` and `nn.RMSNorm`. Over the last
    dimension, ε inside the square root, computed in the input's dtype (a bf16 x and weight give bf16).
    x: (..., C), weight: (C,) -> (..., C).
    """
    _checks.tensors(x=(x, "..., C"), weight=(weight, "C"))
    _checks.positive_number("eps", eps)
    rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)  # (..., 1): no mean subtracted
    return x / rms * weight  # (..., C)


class RMSNorm(nn.Module):
    """`rms_norm` with a learned gain `weight` (C,), starting at 1 (no bias: there is no shift to learn back).

    `norm`: the function to normalise with, `rms_norm`'s contract (the course's own computation when None)."""

    def __init__(self, d_model: int, eps: float = 1e-6, norm: Callable[[Tensor, Tensor, float], Tensor] | None = None):
        super().__init__()
        _checks.positive_int("d_model", d_model)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.norm = norm  # another rms_norm(x, weight, eps) to run (lesson 12 passes the learner's); None: ours

    def forward(self, x: Tensor) -> Tensor:
        if self.norm is not None:
            return self.norm(x, self.weight, self.eps)
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # as rms_norm, without its checks
        return x / rms * self.weight


# ------------------------------------------------------------------------------------------------------------
# Rotary position embedding inside attention
# ------------------------------------------------------------------------------------------------------------


def rope_cos_sin(T: int, D: int, base: float = 10000.0, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """cos and sin of the angles p * base**(-2i/D) for positions p < T and pairs i < D/2: (T, D/2) each.

    A model computes them once (a buffer) rather than at every forward, as lesson 03's apply_rope does."""
    angle = rope_angles(T, D, base, torch.float64)  # (T, D/2), in float64: large p * frequency stay exact
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each interleaved pair (x[..., 2i], x[..., 2i+1]) at position p by the angle whose cos and sin are
    cos[p, i], sin[p, i]: lesson 03's apply_rope with the angles given. x (..., T, D), cos, sin (T, D/2)."""
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, D/2): first and second member of each pair
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, D/2, 2)
    return rotated.flatten(-2)  # (..., T, D): pairs back in interleaved order


def rope_attention(q: Tensor, k: Tensor, v: Tensor, base: float = 10000.0) -> Tensor:
    """Causal attention with rotary positions: rotate q and k (never v), then softmax(q k^T / sqrt(D)) v.

    Lesson 12, exercise `rope_attention`. Each head's queries and keys are rotated over their own D channels,
    positions 0..T-1, interleaved pairs (lesson 03's apply_rope): the score of query m and key n then depends on
    their positions only through m - n. Values carry content, not position, and are not rotated.
    q, k, v: (B, H, T, D) -> (B, H, T, D).
    """
    _checks.tensors(q=(q, "..., T, D"), k=(k, "..., T, D"), v=(v, "..., T, D"))
    _checks.positive_even("q.shape[-1]", q.shape[-1], "channel pairs")
    T, D = q.shape[-2], q.shape[-1]
    cos, sin = rope_cos_sin(T, D, base, q.dtype)  # (T, D/2) each
    q, k = rotate_pairs(q, cos, sin), rotate_pairs(k, cos, sin)  # positions enter here, and only here
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T)
    allowed = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T): key n <= query m
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, H, T, T)
    return weights @ v  # (B, H, T, D)


# ------------------------------------------------------------------------------------------------------------
# SwiGLU: a gated feed-forward network
# ------------------------------------------------------------------------------------------------------------


def swiglu_hidden(d_model: int, multiple_of: int = 1) -> int:
    """The hidden width that gives SwiGLU the parameters of a 4x GELU MLP: 2/3 of 4 * d_model, rounded up to a
    multiple of `multiple_of` (Llama's rule: int(2 * 4 * d / 3), then up to a multiple of 256 gives 11,008
    for d = 4,096). Three d x h matrices instead of two d x 4d ones: 3 h = 8 d when h = 8 d / 3."""
    _checks.positive_ints(d_model=d_model, multiple_of=multiple_of)
    hidden = int(2 * 4 * d_model / 3)
    return multiple_of * math.ceil(hidden / multiple_of)


class SwiGLU(nn.Module):
    """The gated feed-forward network of Llama and most open models since: w2(silu(w1(x)) * w3(x)).

    Lesson 12, exercise `SwiGLU`. `w1` (the gate, through SiLU) and `w3` (the value) map d_model -> d_hidden,
    `w2` maps back d_hidden -> d_model; all three without bias unless `bias=True`. The gate decides, per hidden
    unit and per token, how much of the value passes. x: (..., d_model) -> (..., d_model).
    """

    def __init__(self, d_model: int, d_hidden: int, bias: bool = False) -> None:
        super().__init__()
        _checks.positive_ints(d_model=d_model, d_hidden=d_hidden)
        self.w1 = nn.Linear(d_model, d_hidden, bias=bias)  # gate
        self.w3 = nn.Linear(d_model, d_hidden, bias=bias)  # value
        self.w2 = nn.Linear(d_hidden, d_model, bias=bias)  # back to the residual stream

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_hidden) inside, (..., d_model) out


# ------------------------------------------------------------------------------------------------------------
# Grouped-query attention and the KV cache it shrinks
# ------------------------------------------------------------------------------------------------------------


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Repeat every key/value head n_rep times, consecutively: output head h is input head h // n_rep.

    Lesson 12, exercise `repeat_kv`. With H = H_kv * n_rep query heads, query heads h*n_rep .. h*n_rep + n_rep - 1
    share key/value head h (a group). n_rep == 1 returns x itself. x: (B, H_kv, T, D) -> (B, H_kv * n_rep, T, D).
    """
    _checks.tensor("x", x, "B, H_kv, T, D")
    _checks.positive_int("n_rep", n_rep)
    if n_rep == 1:
        return x  # as many key/value heads as query heads: nothing to share
    B, H_kv, T, D = x.shape
    repeated = x[:, :, None].expand(B, H_kv, n_rep, T, D)  # (B, H_kv, n_rep, T, D), a view: no copy yet
    return repeated.reshape(B, H_kv * n_rep, T, D)  # (B, H, T, D): the copies of head h sit next to each other


@dataclass(frozen=True)
class AttentionShape:
    """What sets the size of a model's KV cache."""

    name: str
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (= n_heads without grouped-query attention)
    d_head: int
    context_length: int  # the longest sequence it was trained for


# GPT-2 small: 12 layers of 12 heads of 64, 1,024 positions (OpenAI's released configuration).
GPT2_SMALL = AttentionShape("GPT-2 small", 12, 12, 12, 64, 1024)
# Llama 2 7B: 32 layers, d_model 4,096 in 32 heads of 128, 4,096 positions; multi-head attention (Touvron et al.,
# 2023, "Llama 2", Table 1: of the Llama 2 models only 34B and 70B use grouped-query attention).
LLAMA2_7B = AttentionShape("Llama-2-7B", 32, 32, 32, 128, 4096)
# Llama 3 8B: the same 32 layers of 32 query heads of 128, but 8 key/value heads (Llama Team, 2024, "The Llama 3 Herd
# of Models", Table 3); 8,192 positions (Meta's model card of April 2024 says 8k; the configuration released with the
# weights, 8,192).
LLAMA3_8B = AttentionShape("Llama-3-8B", 32, 32, 8, 128, 8192)


def kv_cache_bytes(shape: AttentionShape, seq_len: int, batch_size: int = 1, bytes_per_value: int = 2) -> int:
    """Bytes of a KV cache: keys and values (2) for every layer, KV head, position and channel of a head.

    2 * n_layers * n_kv_heads * d_head * seq_len * batch_size * bytes_per_value (2 for bf16 or fp16, 4 for fp32).
    Query heads do not count: queries are used once and never cached.
    """
    _checks.positive_ints(seq_len=seq_len, batch_size=batch_size, bytes_per_value=bytes_per_value)
    return 2 * shape.n_layers * shape.n_kv_heads * shape.d_head * seq_len * batch_size * bytes_per_value


# ------------------------------------------------------------------------------------------------------------
# The modern attention and block: every piece above, in Llama's arrangement
# ------------------------------------------------------------------------------------------------------------


class ModernAttention(nn.Module):
    """Causal self-attention as Llama has it: grouped-query heads, RoPE, optional QK-norm, no biases.

    Lesson 12, exercise `ModernAttention`. D = d_model // n_heads. `qkv` (d_model -> (H + 2 H_kv) D, no bias)
    computes [q | k | v]: H*D query channels, then H_kv*D key and H_kv*D value channels, each head's D contiguous;
    `out_proj` (d_model -> d_model, no bias). With `qk_norm`, `q_norm` and `k_norm` (RMSNorm over a head's D
    channels, eps 1e-6) normalise each head's queries and keys *before* the rotation (without it the module has
    neither). Queries and keys are rotated in interleaved pairs as lesson 03's apply_rope, base `rope_base`; values
    never. Each key/value head serves n_heads // n_kv_heads consecutive query heads (`repeat_kv`); causal; scores
    divided by sqrt(D). x: (B, T, d_model) -> (B, T, d_model). ValueError unless n_heads % n_kv_heads == 0.

    With `cache` (a LayerCache holding the rotated keys and the values of P earlier positions, (B, H_kv, P, D) each)
    the T new positions are P..P+T-1: that is where they are rotated (rotating them at 0..T-1 again is the classic
    bug of RoPE with a KV cache), their keys and values are appended to the cache (still H_kv heads: the cache is
    what grouped-query attention shrinks), and query i attends keys 0..P+i (lesson 10's `attend_with_cache`).
    `use_sdpa` (not part of the exercise) routes the attention through F.scaled_dot_product_attention.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int,
        qk_norm: bool = False,
        rope_base: float = 10000.0,
        *,
        use_sdpa: bool = False,
    ) -> None:
        super().__init__()
        _checks.divisible("d_model", d_model, "n_heads", n_heads)
        _checks.divisible("n_heads", n_heads, "n_kv_heads", n_kv_heads)
        _checks.positive_even("d_model // n_heads", d_model // n_heads, "RoPE rotates channel pairs")
        _checks.positive_number("rope_base", rope_base)
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_model // n_heads
        self.qk_norm, self.rope_base, self.use_sdpa = qk_norm, rope_base, use_sdpa
        D = self.d_head
        self.qkv = nn.Linear(d_model, (n_heads + 2 * n_kv_heads) * D, bias=False)  # [q | k | v]
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        if qk_norm:
            self.q_norm = RMSNorm(D)  # over each head's D channels, one gain per channel shared by the heads
            self.k_norm = RMSNorm(D)

    def forward(self, x: Tensor, cache: LayerCache | None = None) -> Tensor:
        B, T, C = x.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * D, H_kv * D, H_kv * D], dim=-1)
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        v = v.view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)  # before the rotation: the norm sees the projection's channels
        P = 0 if cache is None else cache.keys.shape[2]  # positions already cached: the new ones are P..P+T-1
        cos, sin = rope_cos_sin(P + T, D, self.rope_base, q.dtype)  # (P + T, D/2) each
        q, k = rotate_pairs(q, cos[P:], sin[P:]), rotate_pairs(k, cos[P:], sin[P:])  # at P..P+T-1, not 0..T-1
        if cache is not None:
            k = torch.cat([cache.keys, k], dim=2)  # (B, H_kv, P + T, D): cached first
            v = torch.cat([cache.values, v], dim=2)
            cache.keys, cache.values = k, v  # H_kv heads kept, not H
        k, v = repeat_kv(k, H // H_kv), repeat_kv(v, H // H_kv)  # (B, H, P + T, D): a key/value head per group
        allowed = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(diagonal=P)  # query i: keys 0..P+i
        if self.use_sdpa:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if P == 0 else allowed, is_causal=P == 0)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, P + T)
            out = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v  # (B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class ModernBlock(nn.Module):
    """Llama's block: pre-norm residuals around ModernAttention and SwiGLU, both norms RMSNorm.

    Lesson 12, exercise `ModernBlock`. `ln1`, `ln2`: RMSNorm(d_model, eps) (computed with `rms_norm`); `attn`:
    ModernAttention(d_model, n_heads, n_kv_heads, qk_norm, rope_base); `mlp`: SwiGLU(d_model, d_hidden), no biases.
    forward(x) = x + attn(ln1(x)), then + mlp(ln2(...)): GPT-2's order, as Llama, Mistral and Qwen keep it (OLMo 2
    normalises each sublayer's output instead, x + norm(attn(x)); Gemma 2 and 3 normalise both sides).
    `cache` (a LayerCache) goes to the attention. x: (B, T, d_model) -> (B, T, d_model).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int,
        d_hidden: int,
        qk_norm: bool = False,
        eps: float = 1e-6,
        rope_base: float = 10000.0,
        *,
        use_sdpa: bool = False,
    ) -> None:
        super().__init__()
        _checks.positive_number("eps", eps)
        self.ln1 = RMSNorm(d_model, eps)
        self.attn = ModernAttention(d_model, n_heads, n_kv_heads, qk_norm, rope_base, use_sdpa=use_sdpa)
        self.ln2 = RMSNorm(d_model, eps)
        self.mlp = SwiGLU(d_model, d_hidden)

    def forward(self, x: Tensor, cache: LayerCache | None = None) -> Tensor:
        x = x + self.attn(self.ln1(x), cache=cache)
        return x + self.mlp(self.ln2(x))
