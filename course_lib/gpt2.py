"""GPT-2, built from the course's own blocks (Lesson 10; lesson 11 trains it).

    GPT2Config             frozen dataclass: sizes, dropout, vocabulary padding, attention path; presets
                           small / medium / large / xl (OpenAI's four sizes) and tiny (for tests)
    GPT2                   token + learned position embeddings -> n_layers pre-LN TransformerBlocks (lesson 06)
                           -> final LayerNorm -> output head tied to the token embedding
                           forward(idx, targets=None, cache=None) -> (logits, loss); attention_maps(idx)
    KVCache                every layer's keys and values so far, so generation feeds one new token per step
    attend_with_cache      the same idea for one attention step, written plainly: append k, v, attend (exercise)
    gpt2_parameter_count   the parameter count from the sizes alone (Lesson 10, exercise)
    gpt2_flops_per_token   FLOPs (not multiply-adds: one multiply-add = 2 FLOPs) per token, forward or training

Names of the same weights in three code bases (layer i; HF = Hugging Face `GPT2LMHeadModel`, whose `Conv1D`
stores its weights as (in, out), the transpose of an nn.Linear's; `course_lib.gpt2_weights` converts):

    this course                  nanoGPT                            Hugging Face
    tok_emb.weight               transformer.wte.weight             transformer.wte.weight
    pos_emb.weight               transformer.wpe.weight             transformer.wpe.weight
    blocks.i.ln1.{weight,bias}   transformer.h.i.ln_1.*             transformer.h.i.ln_1.*
    blocks.i.attn.qkv.*          transformer.h.i.attn.c_attn.*      transformer.h.i.attn.c_attn.*    (transposed)
    blocks.i.attn.out_proj.*     transformer.h.i.attn.c_proj.*      transformer.h.i.attn.c_proj.*    (transposed)
    blocks.i.ln2.{weight,bias}   transformer.h.i.ln_2.*             transformer.h.i.ln_2.*
    blocks.i.mlp.fc1.*           transformer.h.i.mlp.c_fc.*         transformer.h.i.mlp.c_fc.*       (transposed)
    blocks.i.mlp.fc2.*           transformer.h.i.mlp.c_proj.*       transformer.h.i.mlp.c_proj.*     (transposed)
    ln_f.{weight,bias}           transformer.ln_f.*                 transformer.ln_f.*
    lm_head.weight (= tok_emb)   lm_head.weight (= wte)             lm_head.weight (= wte)

Shape legend: B batch, T time (new positions), P positions already cached, C d_model channels, H heads,
D head size (C / H), V vocabulary (Vp padded), L layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.attention import attention_weights
from course_lib.blocks import TransformerBlock
from course_lib.multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = ["GPT2Config", "GPT2", "KVCache", "attend_with_cache", "gpt2_parameter_count", "gpt2_flops_per_token"]


@dataclass(frozen=True)
class GPT2Config:
    """The sizes and options of a GPT-2. Defaults are GPT-2 small (124M parameters)."""

    vocab_size: int = 50257  # tokens the tokenizer can produce (GPT-2's BPE: 50,000 merges + 256 bytes + 1)
    context_length: int = 1024  # most positions the model sees at once (rows of the position table)
    n_layers: int = 12  # transformer blocks
    n_heads: int = 12  # attention heads per block
    d_model: int = 768  # width of the residual stream; each head gets d_model // n_heads channels
    dropout: float = 0.0  # on embeddings, attention weights and sublayer outputs (0 for fine-tuning / eval)
    pad_vocab_multiple: int = 1  # round the embedding rows up to a multiple of this (64: faster matmuls)
    use_sdpa: bool = False  # attention in F.scaled_dot_product_attention instead of the explicit path

    def __post_init__(self) -> None:
        _checks.positive_ints(
            vocab_size=self.vocab_size,
            context_length=self.context_length,
            n_layers=self.n_layers,
            pad_vocab_multiple=self.pad_vocab_multiple,
        )
        _checks.divisible("d_model", self.d_model, "n_heads", self.n_heads)
        _checks.probability("dropout", self.dropout)
        if not isinstance(self.use_sdpa, bool):
            raise TypeError(f"use_sdpa must be a bool, got {self.use_sdpa!r}")

    @property
    def padded_vocab_size(self) -> int:
        """Rows of the embedding / output head: vocab_size rounded up to a multiple of pad_vocab_multiple."""
        m = self.pad_vocab_multiple
        return (self.vocab_size + m - 1) // m * m

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    # OpenAI's four released sizes (Radford et al. 2019, table 2, with the corrected parameter counts).
    @classmethod
    def small(cls, **overrides: object) -> GPT2Config:
        return replace(cls(), **overrides)  # 124M

    @classmethod
    def medium(cls, **overrides: object) -> GPT2Config:
        return replace(cls(n_layers=24, n_heads=16, d_model=1024), **overrides)  # 355M

    @classmethod
    def large(cls, **overrides: object) -> GPT2Config:
        return replace(cls(n_layers=36, n_heads=20, d_model=1280), **overrides)  # 774M

    @classmethod
    def xl(cls, **overrides: object) -> GPT2Config:
        return replace(cls(n_layers=48, n_heads=25, d_model=1600), **overrides)  # 1558M

    @classmethod
    def tiny(cls, **overrides: object) -> GPT2Config:
        """8,656 parameters: the same architecture, for tests that must run in milliseconds."""
        return replace(cls(vocab_size=97, context_length=32, n_layers=2, n_heads=2, d_model=16), **overrides)


class KVCache:
    """The keys and values every layer has computed so far, in buffers sized for the whole context.

    Lesson 10. `length` positions are filled; a forward pass with the cache attends its T new queries to the
    P = length cached keys plus their own T, writes the new keys and values behind the old ones, and then moves
    `length` on by T. Keys: layer -> (B, H, context_length, D) buffers.
    """

    def __init__(self, config: GPT2Config, batch_size: int, device=None, dtype: torch.dtype = torch.float32):
        _checks.positive_int("batch_size", batch_size)
        self.max_length = config.context_length
        shape = (batch_size, config.n_heads, config.context_length, config.d_head)  # (B, H, context, D)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.length = 0  # positions filled

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store the new keys/values (B, H, T, D) of `layer`; return all of them so far (B, H, P + T, D)."""
        P, T = self.length, k.shape[2]
        self.keys[layer][:, :, P : P + T] = k
        self.values[layer][:, :, P : P + T] = v
        return self.keys[layer][:, :, : P + T], self.values[layer][:, :, : P + T]


def attend_with_cache(
    q: Tensor, k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One step of causal self-attention with a growing cache: what KVCache and the model do, in four lines.

    Lesson 10, exercise `attend_with_cache`. q, k, v (B, H, T, D) belong to T new positions; k_cache, v_cache
    (B, H, P, D) hold the keys and values of the P positions before them (P = 0: an empty cache). The new keys
    and values go *after* the cached ones, so new query i sits at position P + i and may attend keys 0..P + i
    (the causal triangle shifted right by P; with T = 1 every key is allowed). Scores are scaled by sqrt(D).
    Returns (out (B, H, T, D), keys (B, H, P + T, D), values (B, H, P + T, D)): new tensors, the inputs unchanged.
    The cached keys are not recomputed: in a causal model a position's key and value never change later.
    """
    _checks.tensors(
        q=(q, "B, H, T, D"), k=(k, "B, H, T, D"), v=(v, "B, H, T, Dv"),
        k_cache=(k_cache, "B, H, P, D"), v_cache=(v_cache, "B, H, P, Dv"),
    )  # fmt: skip
    P, T = k_cache.shape[2], q.shape[2]
    keys = torch.cat([k_cache, k], dim=2)  # (B, H, P + T, D): the cached positions first, then the new ones
    values = torch.cat([v_cache, v], dim=2)  # (B, H, P + T, Dv)
    allowed = torch.ones(T, P + T, dtype=torch.bool, device=q.device).tril(diagonal=P)  # (T, P + T): keys 0..P+i
    weights = attention_weights(q, keys, allowed)  # (B, H, T, P + T)
    return weights @ values, keys, values  # (B, H, T, P + T) @ (B, H, P + T, Dv) -> (B, H, T, Dv)


def _cached_attention(attn: MultiHeadAttention, x: Tensor, cache: KVCache, layer: int) -> Tensor:
    """`attn`'s causal self-attention for T new positions, reading the cached keys and values of the earlier ones.

    The same weights and the same arithmetic as MultiHeadAttention.forward (lesson 05); what changes is that
    the keys come from the cache too, so query i (at absolute position P + i) may attend keys 0..P + i.
    x: (B, T, C) -> (B, T, C).
    """
    P, T = cache.length, x.shape[1]
    q, k, v = attn.qkv(x).split(attn.d_model, dim=-1)  # 3 x (B, T, C)
    q, k, v = (split_heads(t, attn.n_heads) for t in (q, k, v))  # each (B, H, T, D)
    k, v = cache.update(layer, k, v)  # (B, H, P + T, D)
    # Row i of the mask: True for keys 0..P+i. With one new token (T = 1) every key is allowed.
    keys_at = torch.arange(P + T, device=x.device)  # (P + T,)
    allowed = keys_at[None, :] <= (P + torch.arange(T, device=x.device))[:, None]  # (T, P + T)
    dropout_p = attn.dropout.p if attn.training else 0.0
    if attn.use_sdpa:
        # is_causal would align the triangle to the top-left corner, wrong once P > 0: pass the mask instead.
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)  # (B, H, T, D)
    else:
        weights = attn.dropout(attention_weights(q, k, allowed))  # (B, H, T, P + T)
        out = weights @ v  # (B, H, T, P + T) @ (B, H, P + T, D) -> (B, H, T, D)
    return attn.out_proj(merge_heads(out))  # (B, T, C)


class GPT2(nn.Module):
    """GPT-2: lesson 06's pre-LN TransformerBlocks between a tied embedding and output head.

    Lesson 10. forward(idx (B, T) long, targets (B, T) long or None, cache KVCache or None) -> logits
    (B, T, vocab_size) and the mean cross-entropy (targets equal to -100 are ignored), or None without targets.
    With vocabulary padding the head computes padded_vocab_size logits; the padding columns are cut off, so the
    softmax never gives probability to ids the tokenizer cannot produce.
    """

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        _checks.instance("config", config, GPT2Config, "a GPT2Config")
        self.config = config
        C, Vp = config.d_model, config.padded_vocab_size
        self.tok_emb = nn.Embedding(Vp, C)
        self.pos_emb = nn.Embedding(config.context_length, C)  # learned positions (not sinusoids)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(C, config.n_heads, dropout=config.dropout) for _ in range(config.n_layers)
        )
        for block in self.blocks:
            block.attn.use_sdpa = config.use_sdpa
        self.ln_f = nn.LayerNorm(C)  # pre-LN leaves the stream un-normalised after the last block
        self.lm_head = nn.Linear(C, Vp, bias=False)
        # Weight tying (Press & Wolf 2017): one (Vp, C) matrix both embeds tokens and scores them.
        self.lm_head.weight = self.tok_emb.weight
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """GPT-2's initialisation: N(0, 0.02) weights, zero biases, LayerNorms at (1, 0); the two projections
        that write into the residual stream (attn.out_proj, mlp.fc2) get std 0.02 / sqrt(2 * n_layers), since
        each block adds two terms to the stream and the variance of a sum grows with the number of terms."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                std = residual_std if name.endswith(("attn.out_proj", "mlp.fc2")) else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty KVCache for this model, on its device and in its dtype."""
        weight = self.tok_emb.weight
        return KVCache(self.config, batch_size, device=weight.device, dtype=weight.dtype)

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        _checks.tensor("idx", idx, "B, T", integer=True)
        B, T = idx.shape
        start = 0 if cache is None else cache.length  # absolute position of idx[:, 0]
        if start + T > self.config.context_length:
            where = f" after {start} cached positions" if cache is not None else ""
            raise ValueError(
                f"idx has T={T} positions{where}, more than the model's context_length {self.config.context_length}"
            )
        if cache is not None and cache.keys[0].shape[0] != B:
            raise ValueError(f"the cache was made for batch size {cache.keys[0].shape[0]}, idx has {B} rows")
        if idx.device.type == "cpu" and not torch.compiler.is_compiling():
            # Ids in the padding rows would pass the embedding silently. (Skipped on GPUs, where reading the
            # ids back would stall every step, and under torch.compile, where it would break the graph.)
            _checks.indices("idx", idx, self.config.vocab_size, "token ids of the vocabulary")
        positions = torch.arange(start, start + T, device=idx.device)  # (T,)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            if cache is None:
                x = block(x)  # lesson 06's block, unchanged
            else:  # the same pre-LN block, its attention reading the cache
                x = x + _cached_attention(block.attn, block.ln1(x), cache, i)
                x = x + block.mlp(block.ln2(x))
        if cache is not None:
            cache.length += T
        logits = self.lm_head(self.ln_f(x))  # (B, T, Vp)
        if self.config.padded_vocab_size != self.config.vocab_size:
            logits = logits[..., : self.config.vocab_size]  # (B, T, V): padding ids are not tokens
        if targets is None:
            return logits, None
        _checks.tensor("targets", targets, "B, T", integer=True, B=B, T=T)
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))  # mean over the B*T positions
        return logits, loss

    @torch.no_grad()
    def attention_maps(self, idx: Tensor) -> list[Tensor]:
        """Every block's attention weights, for plots: idx (B, T) -> n_layers tensors (B, H, T, T).

        Lesson 10. The same pass as forward (in the model's current mode), each attention asked for its weights,
        which always takes the explicit path (SDPA never forms them).
        """
        _checks.tensor("idx", idx, "B, T<=context_length", integer=True, context_length=self.config.context_length)
        positions = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, C)
        maps = []
        for block in self.blocks:
            attended, weights = block.attn(block.ln1(x), need_weights=True)  # (B, T, C), (B, H, T, T)
            x = x + attended
            x = x + block.mlp(block.ln2(x))
            maps.append(weights)
        return maps

    def num_parameters(self, exclude_positions: bool = False) -> int:
        """Distinct parameters (the tied matrix counts once); optionally without the position table."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.pos_emb.weight.numel() if exclude_positions else n


def gpt2_parameter_count(
    n_layers: int, n_heads: int, d_model: int, vocab_size: int, context_length: int, tied: bool = True
) -> int:
    """Parameters of a GPT-2 from its sizes: embeddings, L blocks of 12 C² + 13 C, a final LayerNorm.

    Lesson 10, exercise `gpt2_parameter_count`. Per block: ln1 and ln2 (2C each), qkv (3C² + 3C), out_proj
    (C² + C), fc1 (4C² + 4C), fc2 (4C² + C). The head has no bias; untied it adds its own V x C matrix.
    n_heads does not change the count (heads only group channels) but must divide d_model.
    GPT-2 small (12, 12, 768, 50257, 1024) -> 124,439,808.
    """
    _checks.positive_ints(n_layers=n_layers, vocab_size=vocab_size, context_length=context_length)
    _checks.divisible("d_model", d_model, "n_heads", n_heads)
    C = d_model
    embeddings = vocab_size * C + context_length * C
    per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C)
    head = 0 if tied else vocab_size * C
    return embeddings + n_layers * per_block + 2 * C + head


def gpt2_flops_per_token(config: GPT2Config, seq_len: int | None = None, training: bool = True) -> int:
    """FLOPs (one multiply-add counts as 2) to process one token, at sequence length `seq_len`.

    Lesson 10 (lesson 11's MFU uses it). Forward: 2 N for the matmuls with the N weights, where N is every
    parameter except the position table (a lookup, not a matmul; the tied token table is counted once, as the
    output head's matmul), plus 4 L C T for attention (q kᵀ and weights @ v, 2 C T each, counted as if every
    key were attended: the usual convention, not halved for the causal mask). Training is 3 x forward (the
    backward pass costs two forwards): 6 N + 12 L H D T, the formula of Kaplan et al. 2020 / PaLM.
    `seq_len` defaults to the context length. LayerNorms, softmax and biases' additions are left out.
    """
    _checks.instance("config", config, GPT2Config, "a GPT2Config")
    T = config.context_length if seq_len is None else seq_len
    _checks.positive_int("seq_len", T)
    c = config
    n = gpt2_parameter_count(c.n_layers, c.n_heads, c.d_model, c.padded_vocab_size, c.context_length)
    n -= c.context_length * c.d_model  # the position table is looked up, never multiplied
    forward = 2 * n + 4 * c.n_layers * c.n_heads * c.d_head * T
    return 3 * forward if training else forward
