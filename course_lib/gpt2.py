"""GPT-2, built from the course's own blocks (Lesson 10; lesson 11 trains it).

    GPT2Config             frozen dataclass: sizes, dropout, vocabulary padding, attention path; presets
                           small / medium / large / xl (OpenAI's four sizes) and tiny (for tests)
    GPT2                   lesson 09's GPT (embeddings -> pre-LN TransformerBlocks -> final LayerNorm -> tied
                           head) with a config, GPT-2's initialisation, vocabulary padding and a KV cache
                           forward(idx, targets=None, cache=None) -> (logits, loss); attention_maps(idx)
    KVCache                every layer's keys and values so far, so generation feeds one new token per step
    attend_with_cache      one attention step with the cache: append k, v, attend (exercise; defined in
                           course_lib.multihead, whose MultiHeadAttention calls it in every layer)
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

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import _checks
from course_lib.gpt import GPT, init_gpt2
from course_lib.multihead import LayerCache, attend_with_cache

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
    """The keys and values every layer has computed so far: one LayerCache per block, in `layers`.

    Lesson 10. A forward pass with the cache feeds T new positions: in every block the attention appends their
    keys and values behind the P = `length` cached ones (attend_with_cache) and attends to all P + T of them.
    It starts empty, (B, H, 0, D) per layer; the model refuses to grow it past its context_length.
    """

    def __init__(self, config: GPT2Config, batch_size: int, device=None, dtype: torch.dtype = torch.float32):
        _checks.positive_int("batch_size", batch_size)
        empty = torch.zeros(batch_size, config.n_heads, 0, config.d_head, device=device, dtype=dtype)  # (B, H, 0, D)
        self.layers = [LayerCache(keys=empty, values=empty) for _ in range(config.n_layers)]  # never written in place

    @property
    def length(self) -> int:
        """Positions cached so far (P)."""
        return self.layers[0].keys.shape[2]

    @property
    def batch_size(self) -> int:
        return self.layers[0].keys.shape[0]


class GPT2(GPT):
    """GPT-2: lesson 09's GPT with what GPT-2 adds — a config, GPT-2's initialisation, vocabulary padding, a cache.

    Lesson 10. forward(idx (B, T) long, targets (B, T) long or None, cache KVCache or None) -> logits
    (B, T, vocab_size) and the mean cross-entropy (targets equal to -100 are ignored), or None without targets.
    With vocabulary padding the head computes padded_vocab_size logits; the padding columns are cut off, so the
    softmax never gives probability to ids the tokenizer cannot produce.
    """

    def __init__(self, config: GPT2Config) -> None:
        _checks.instance("config", config, GPT2Config, "a GPT2Config")
        c = config
        super().__init__(
            c.padded_vocab_size, c.context_length, c.d_model, c.n_heads, c.n_layers, c.dropout, use_sdpa=c.use_sdpa
        )
        self.config = config
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation (`course_lib.gpt.init_gpt2`): N(0, 0.02), the residual projections scaled down."""
        init_gpt2(self, self.config.n_layers)

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty KVCache for this model, on its device and in its dtype."""
        weight = self.tok_emb.weight
        return KVCache(self.config, batch_size, device=weight.device, dtype=weight.dtype)

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if not torch.compiler.is_compiling():  # a compiled graph leaves the checks out: nothing in it but the model
            self._check_inputs(idx, targets, cache)
        B, T = idx.shape
        x = self._embed(idx, start=0 if cache is None else cache.length)  # (B, T, C)
        layer_caches = [None] * len(self.blocks) if cache is None else cache.layers
        for block, layer_cache in zip(self.blocks, layer_caches, strict=True):
            x = block(x, cache=layer_cache)  # lesson 06's block; with a cache its attention reads and grows it
        logits = self.lm_head(self.ln_f(x))  # (B, T, Vp)
        if self.config.padded_vocab_size != self.config.vocab_size:
            logits = logits[..., : self.config.vocab_size]  # (B, T, V): padding ids are not tokens
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))  # mean over the B*T positions
        return logits, loss

    def _embed(self, idx: Tensor, start: int = 0) -> Tensor:
        """Token plus learned position embeddings (positions start..start+T-1), then dropout: (B, T) -> (B, T, C)."""
        positions = torch.arange(start, start + idx.shape[1], device=idx.device)  # (T,)
        return self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, C)

    def _check_inputs(self, idx: Tensor, targets: Tensor | None = None, cache: KVCache | None = None) -> None:
        """The mistakes a caller can make, each named: ids (B, T) of the vocabulary that fit the context."""
        _checks.tensor("idx", idx, "B, T", integer=True)
        B, T = idx.shape
        start = 0 if cache is None else cache.length  # absolute position of idx[:, 0]
        if start + T > self.config.context_length:
            where = f" after {start} cached positions" if cache is not None else ""
            raise ValueError(
                f"idx has T={T} positions{where}, more than the model's context_length {self.config.context_length}"
            )
        if cache is not None and cache.batch_size != B:
            raise ValueError(f"the cache was made for batch size {cache.batch_size}, idx has {B} rows")
        if idx.device.type == "cpu":
            # Ids in the padding rows would pass the embedding silently. (Skipped on GPUs, where reading the
            # ids back would stall every step.)
            _checks.indices("idx", idx, self.config.vocab_size, "token ids of the vocabulary")
        if targets is not None:
            _checks.tensor("targets", targets, "B, T", integer=True, B=B, T=T)

    @torch.no_grad()
    def attention_maps(self, idx: Tensor) -> list[Tensor]:
        """Every block's attention weights, for plots: idx (B, T) -> n_layers tensors (B, H, T, T).

        Lesson 10. The same pass as forward (in the model's current mode), each block asked for its weights,
        which always takes the explicit path (SDPA never forms them).
        """
        self._check_inputs(idx)
        x = self._embed(idx)  # (B, T, C)
        maps = []
        for block in self.blocks:
            x, weights = block(x, need_weights=True)  # (B, T, C), (B, H, T, T)
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
