"""One GPT whose switches turn GPT-2's block into the block of today's open models (Lesson 12).

    ModernConfig    the sizes and the switches: norm ("layer" | "rms"), position ("learned" | "rope"), mlp ("gelu" |
                    "swiglu"), n_kv_heads (grouped-query attention), bias, qk_norm, tie_weights; with every switch at
                    its modern setting (`is_modern`), Llama's architecture (`llama_weights.config_from_llama`)
    SwitchAttention causal attention with [q | k | v] from one linear, optional QK-norm, RoPE and shared KV heads
    SwitchBlock     pre-norm block with the switches: x + attn(ln1(x)), then x + mlp(ln2(x))
    ModernGPT       lesson 09's GPT (course_lib.gpt), its forward pass, with the parts the switches choose:
                    embeddings -> blocks -> final norm -> output head; forward(idx, targets, cache) -> (logits, loss).
                    Its blocks are `modern.ModernBlock`s (the lesson's exercise: a KV cache too) once every switch is
                    modern, SwitchBlocks on the way there
    ModernParts     whose rms_norm, rope_attention, SwiGLU, repeat_kv, ModernBlock and newton_schulz the model and
                    its optimizer run: the course's, or the learner's

Every switch is initialised by GPT-2's rule, `course_lib.gpt.init_gpt2` (the residual projections, SwiGLU's `w2`
among them, scaled by 1/sqrt(2 n_layers)). With every switch at GPT-2's setting (`ModernConfig(...)` as it comes)
the model is lesson 09's GPT: the same module names, the same state-dict keys, and, seeded the same, the same
initial weights (tests/test_modern_gpt.py). A SwitchBlock with every switch modern computes what a ModernBlock with
the same weights computes (the same names, the same initial draws); the model uses the ModernBlock then.

Shape legend: B batch, T time, H query heads, H_kv key/value heads, D head size, C d_model, V vocab_size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks, modern
from course_lib.blocks import FeedForward
from course_lib.gpt import GPT, KVCache
from course_lib.modern import RMSNorm, SwiGLU, repeat_kv, rope_cos_sin, rotate_pairs, swiglu_hidden
from course_lib.optimizers import newton_schulz

__all__ = ["COURSE_PARTS", "ModernConfig", "ModernGPT", "ModernParts", "SwitchAttention", "SwitchBlock"]


@dataclass(frozen=True)
class ModernConfig:
    """A GPT's sizes and its switches; the defaults of the switches are GPT-2's."""

    vocab_size: int
    context_length: int
    d_model: int = 64
    n_heads: int = 4  # query heads
    n_layers: int = 4
    n_kv_heads: int | None = None  # key/value heads; None: one per query head (GPT-2); fewer: grouped-query
    norm: str = "layer"  # "layer": LayerNorm (GPT-2); "rms": RMSNorm (Llama and most open models since)
    position: str = "learned"  # "learned": a table added to the embeddings (GPT-2); "rope": rotate q and k
    mlp: str = "gelu"  # "gelu": fc2(GELU(fc1 x)), 4 d wide (GPT-2); "swiglu": w2(silu(w1 x) * w3 x), 8/3 d wide
    bias: bool = True  # biases in the linears and LayerNorms (GPT-2); False: none anywhere
    qk_norm: bool = False  # RMSNorm over each head's queries and keys before the scores (and before RoPE)
    tie_weights: bool = True  # the output head is the token embedding's matrix (GPT-2); False: a matrix of its own
    rope_base: float = 10000.0  # RoPE's base (Llama 2: 10,000; Llama 3: 500,000)
    use_sdpa: bool = False  # attention through F.scaled_dot_product_attention (fused kernels, the same function)
    mlp_hidden: int | None = None  # the feed-forward's hidden width; None: 4 d (GELU) or swiglu_hidden(d) (SwiGLU)
    norm_eps: float | None = None  # the norms' epsilon; None: 1e-5 for LayerNorm (GPT-2's), 1e-6 for RMSNorm

    def __post_init__(self) -> None:
        _checks.positive_ints(vocab_size=self.vocab_size, context_length=self.context_length, n_layers=self.n_layers)
        _checks.divisible("d_model", self.d_model, "n_heads", self.n_heads)
        _checks.divisible("n_heads", self.n_heads, "n_kv_heads", self.kv_heads)
        _checks.one_of("norm", self.norm, ("layer", "rms"))
        _checks.one_of("position", self.position, ("learned", "rope"))
        _checks.one_of("mlp", self.mlp, ("gelu", "swiglu"))
        _checks.positive_number("rope_base", self.rope_base)
        if self.mlp_hidden is not None:
            _checks.positive_int("mlp_hidden", self.mlp_hidden)
        if self.norm_eps is not None:
            _checks.positive_number("norm_eps", self.norm_eps)
        if self.position == "rope":
            _checks.positive_even("d_model // n_heads", self.d_head, "RoPE rotates channel pairs")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def d_hidden(self) -> int:
        """The feed-forward's hidden width: `mlp_hidden`, else 4 d for GELU and 2/3 of that for SwiGLU (the same
        parameter count)."""
        if self.mlp_hidden is not None:
            return self.mlp_hidden
        return 4 * self.d_model if self.mlp == "gelu" else swiglu_hidden(self.d_model)

    @property
    def eps(self) -> float:
        """The norms' epsilon: `norm_eps`, else nn.LayerNorm's 1e-5 (GPT-2's) or RMSNorm's 1e-6."""
        if self.norm_eps is not None:
            return self.norm_eps
        return 1e-5 if self.norm == "layer" else 1e-6

    @property
    def is_modern(self) -> bool:
        """Every switch of the block at its modern setting (RMSNorm, RoPE, SwiGLU, no biases): a ModernBlock."""
        return self.norm == "rms" and self.position == "rope" and self.mlp == "swiglu" and not self.bias

    def replace(self, **changes: object) -> ModernConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ModernParts:
    """The implementations of lesson 12's exercises that a model (and its optimizer) runs: the course's as they come,
    the learner's where the lesson passes them, so that the ladder trains models built from their code.

    Each must follow its exercise's contract: `rms_norm(x, weight, eps)`, `rope_attention(q, k, v, base)` (causal,
    q and k rotated in interleaved pairs), `SwiGLU(d_model, d_hidden, bias)` with linears `w1`, `w2`, `w3`,
    `repeat_kv(x, n_rep)`, `ModernBlock(d_model, n_heads, n_kv_heads, d_hidden, qk_norm, eps, rope_base)` and
    `newton_schulz(G, steps)` (for Muon, `ladder.rung_optimizers`). The first four build the SwitchBlocks of a model
    whose switches are not all modern; `ModernBlock` builds the blocks of one whose switches are (its code uses the
    learner's other answers by itself). None for `rms_norm` or `rope_attention`: the course's own computation,
    with RoPE's angles computed once per model (a buffer) instead of at every call. With `use_sdpa`, attention runs
    through PyTorch's fused kernel and `rope_attention` is not called."""

    rms_norm: Callable[[Tensor, Tensor, float], Tensor] | None = None
    rope_attention: Callable[[Tensor, Tensor, Tensor, float], Tensor] | None = None
    SwiGLU: type[nn.Module] = SwiGLU
    repeat_kv: Callable[[Tensor, int], Tensor] = repeat_kv
    ModernBlock: type[nn.Module] = modern.ModernBlock
    newton_schulz: Callable[..., Tensor] = newton_schulz


COURSE_PARTS = ModernParts()


def _norm(config: ModernConfig, width: int, parts: ModernParts) -> nn.Module:
    if config.norm == "rms":
        return RMSNorm(width, config.eps, norm=parts.rms_norm)
    return nn.LayerNorm(width, eps=config.eps, bias=config.bias)  # eps 1e-5, as GPT-2


class SwitchAttention(nn.Module):
    """Causal self-attention with the lesson's switches (`modern.ModernAttention` once they are all modern).

    `qkv` computes [q | k | v] in one matmul: H * D query channels, then H_kv * D key and H_kv * D value channels
    (with H_kv = H, GPT-2's fused layout). Each head's queries and keys may be normalised (`qk_norm`) and rotated
    (RoPE, with `position="rope"`: the angles of positions 0..context_length-1, `rope_cos` and `rope_sin`, are
    computed once, in buffers outside the state dict); each key/value head then serves H / H_kv query heads
    (repeat_kv). `parts` (ModernParts): whose rms_norm, rope_attention and repeat_kv run. x: (B, T, C) -> (B, T, C).
    """

    def __init__(self, config: ModernConfig, parts: ModernParts = COURSE_PARTS) -> None:
        super().__init__()
        C, H, H_kv, D = config.d_model, config.n_heads, config.kv_heads, config.d_head
        self.n_heads, self.n_kv_heads, self.d_head, self.use_sdpa = H, H_kv, D, config.use_sdpa
        self.rope_base, self.rope_attention, self.repeat_kv = config.rope_base, parts.rope_attention, parts.repeat_kv
        self.qkv = nn.Linear(C, (H + 2 * H_kv) * D, bias=config.bias)  # [q | k | v]
        self.out_proj = nn.Linear(C, C, bias=config.bias)
        self.q_norm = RMSNorm(D, norm=parts.rms_norm) if config.qk_norm else None  # each head's D channels, eps 1e-6
        self.k_norm = RMSNorm(D, norm=parts.rms_norm) if config.qk_norm else None
        self.rope = config.position == "rope"
        if self.rope:
            cos, sin = rope_cos_sin(config.context_length, D, config.rope_base)  # (context_length, D/2) each
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * D, H_kv * D, H_kv * D], dim=-1)
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        v = v.view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # every query and key of length ~sqrt(D) times its gain
        k, v = self.repeat_kv(k, H // H_kv), self.repeat_kv(v, H // H_kv)  # (B, H, T, D): a KV head per group
        if self.rope and self.rope_attention is not None and not self.use_sdpa:
            out = self.rope_attention(q, k, v, self.rope_base)  # rotates q and k itself; (B, H, T, D)
            return self.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, T, C)
        if self.rope:  # the rotation commutes with repeat_kv: each copy of a key head is rotated alike
            cos, sin = self.rope_cos[:T], self.rope_sin[:T]  # (T, D/2) each
            q, k = rotate_pairs(q, cos, sin), rotate_pairs(k, cos, sin)  # values are not rotated
        if self.use_sdpa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T)
            allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)
            out = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v  # (B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class SwitchBlock(nn.Module):
    """Pre-norm block (GPT-2's order, which Llama, Mistral and Qwen keep): x + attn(ln1(x)), then x + mlp(ln2(x)).

    `ln1`, `ln2` are LayerNorms or RMSNorms (the names stay GPT-2's, so that the state dicts line up); `mlp` is
    lesson 06's FeedForward (GELU, tanh approximation) or a SwiGLU (`parts.SwiGLU`). It keeps no KV cache."""

    def __init__(self, config: ModernConfig, parts: ModernParts = COURSE_PARTS) -> None:
        super().__init__()
        self.ln1 = _norm(config, config.d_model, parts)
        self.attn = SwitchAttention(config, parts)
        self.ln2 = _norm(config, config.d_model, parts)
        if config.mlp == "gelu":
            self.mlp = FeedForward(config.d_model, config.d_hidden)
            if not config.bias:
                self.mlp.fc1.bias, self.mlp.fc2.bias = None, None  # nn.Linear's forward skips a None bias
        else:
            self.mlp = parts.SwiGLU(config.d_model, config.d_hidden, bias=config.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ModernGPT(GPT):
    """Lesson 09's GPT — its forward pass — with the switches of `ModernConfig` choosing its parts.

    `tok_emb` (V, C), then `pos_emb` (context_length, C) when positions are learned (None with RoPE: each
    block's attention rotates queries and keys instead); `drop` (p = 0: the lesson trains without dropout); the
    `blocks`, `ln_f` (LayerNorm or RMSNorm) and `lm_head`, tied to `tok_emb` unless `tie_weights=False`. idx (B, T)
    long -> (logits (B, T, V), the mean cross-entropy over all positions when `targets` (B, T) are given, else None).
    `parts`: whose implementations of lesson 12's exercises it runs (`ModernParts`; the course's by default).

    With every switch modern (`config.is_modern`, Llama's architecture) the blocks are `parts.ModernBlock`s and the
    model keeps a KV cache (`new_cache`: H_kv heads a layer, so generation feeds one token a step); otherwise they are
    SwitchBlocks, which keep none (`new_cache` is None: generation recomputes the window, course_lib.generate).
    """

    def __init__(self, config: ModernConfig, parts: ModernParts = COURSE_PARTS) -> None:
        nn.Module.__init__(self)  # GPT's parts, chosen by the switches (GPT.__init__ would build lesson 09's)
        self.config = config
        self.context_length = config.context_length
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.context_length, config.d_model) if config.position == "learned" else None
        self.drop = nn.Dropout(0.0)
        self.blocks = nn.ModuleList(_block(config, parts) for _ in range(config.n_layers))
        self.ln_f = _norm(config, config.d_model, parts)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight  # one (V, C) matrix embeds a token and scores it
        if not config.is_modern:
            self.new_cache = None  # SwitchBlocks keep no KV cache: generation recomputes the window

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty KVCache for this model: a layer's cache holds its H_kv key/value heads (grouped-query attention
        keeps fewer heads, the point of it), on the model's device and in its dtype."""
        c, weight = self.config, self.tok_emb.weight
        return KVCache(c.n_layers, batch_size, c.kv_heads, c.d_head, device=weight.device, dtype=weight.dtype)


def _block(config: ModernConfig, parts: ModernParts) -> nn.Module:
    """A ModernBlock (`parts.ModernBlock`, the contract's arguments) when every switch is modern, else a SwitchBlock."""
    if not config.is_modern:
        return SwitchBlock(config, parts)
    fast = {"use_sdpa": True} if config.use_sdpa and parts.ModernBlock is modern.ModernBlock else {}  # ours only
    return parts.ModernBlock(
        config.d_model,
        config.n_heads,
        config.kv_heads,
        config.d_hidden,
        qk_norm=config.qk_norm,
        eps=config.eps,
        rope_base=config.rope_base,
        **fast,
    )
