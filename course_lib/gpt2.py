"""GPT-2, built from the course's own blocks (Lesson 10; lesson 11 trains it).

    GPT2Config             frozen dataclass: sizes, dropout, vocabulary padding, attention path; presets
                           small / medium / large / xl (OpenAI's four sizes) and tiny (for tests)
    GPT2                   lesson 09's GPT (embeddings -> pre-LN TransformerBlocks -> final LayerNorm -> tied
                           head), its forward pass and KV cache, with a config, GPT-2's initialisation and
                           vocabulary padding: forward(idx, targets=None, cache=None) -> (logits, loss)
    PaddedHead             the tied output head of a padded vocabulary: logits for the real ids only
    KVCache                every layer's keys and values so far (defined in course_lib.gpt, with the GPT)
    attend_with_cache      one attention step with the cache: append k, v, attend (exercise; defined in
                           course_lib.multihead, whose MultiHeadAttention calls it in every layer)
    forward_with_cache     the logits of T new tokens after the P cached ones, the cache grown (exercise; defined
                           in course_lib.gpt: GPT's own forward with `cache=`)
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
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import TransformerBlock
from course_lib.gpt import GPT, KVCache, forward_with_cache, init_gpt2
from course_lib.multihead import attend_with_cache

__all__ = [
    "GPT2Config",
    "GPT2",
    "KVCache",
    "PaddedHead",
    "attend_with_cache",
    "forward_with_cache",
    "gpt2_parameter_count",
    "gpt2_flops_per_token",
]


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


class PaddedHead(nn.Linear):
    """The output head of a vocabulary padded to `padded_vocab_size` rows: it computes a logit for every row (a
    matmul of a friendlier size) and returns the first `vocab_size`, so the softmax never gives probability to
    ids the tokenizer cannot produce. (..., C) -> (..., V). Its weight is the (Vp, C) tied token table."""

    def __init__(self, d_model: int, vocab_size: int, padded_vocab_size: int) -> None:
        super().__init__(d_model, padded_vocab_size, bias=False)
        self.vocab_size = vocab_size

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x)[..., : self.vocab_size]  # (..., Vp) -> (..., V)


class GPT2(GPT):
    """GPT-2: lesson 09's GPT — its forward pass and its KV cache — with a config, GPT-2's initialisation and
    vocabulary padding.

    Lesson 10. The parts are GPT's, built from the config: `tok_emb` (Vp, C) with Vp = padded_vocab_size,
    `pos_emb`, `drop`, course TransformerBlocks (`use_sdpa` from the config), `ln_f`, and the tied head, a
    `PaddedHead` when the vocabulary is padded. forward(idx (B, T) long, targets (B, T) long or None, cache
    KVCache or None) -> logits (B, T, vocab_size) and the mean cross-entropy (targets equal to -100 are ignored),
    or None without targets; its inputs are checked first, each mistake named.
    """

    def __init__(self, config: GPT2Config) -> None:
        _checks.instance("config", config, GPT2Config, "a GPT2Config")
        nn.Module.__init__(self)  # GPT's parts, built here from the config (GPT.__init__ would build lesson 09's)
        c = self.config = config
        self.context_length = c.context_length
        self.tok_emb = nn.Embedding(c.padded_vocab_size, c.d_model)  # rows past vocab_size: padding, no token
        self.pos_emb = nn.Embedding(c.context_length, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.n_heads, dropout=c.dropout, use_sdpa=c.use_sdpa) for _ in range(c.n_layers)
        )
        self.ln_f = nn.LayerNorm(c.d_model)
        self.lm_head = PaddedHead(c.d_model, c.vocab_size, c.padded_vocab_size)  # (B, T, C) -> (B, T, V)
        self.lm_head.weight = self.tok_emb.weight  # tied, as in GPT
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation (`course_lib.gpt.init_gpt2`): N(0, 0.02), the residual projections scaled down."""
        init_gpt2(self, self.config.n_layers)

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """GPT's forward pass, after the checks (which a compiled graph leaves out: nothing in it but the model)."""
        if not torch.compiler.is_compiling():
            self._check_inputs(idx, targets, cache)
        return super().forward(idx, targets, cache)

    def _check_inputs(self, idx: Tensor, targets: Tensor | None, cache: KVCache | None) -> None:
        """The mistakes a caller can make, each named: ids (B, T) of the vocabulary, targets of the same shape,
        a cache made for this batch. (GPT's forward refuses a T that does not fit the context.)"""
        _checks.tensor("idx", idx, "B, T", integer=True)
        B, T = idx.shape
        if cache is not None and cache.batch_size != B:
            raise ValueError(f"the cache was made for batch size {cache.batch_size}, idx has {B} rows")
        if idx.device.type == "cpu":
            # Ids in the padding rows would pass the embedding silently. (Skipped on GPUs, where reading the
            # ids back would stall every step.)
            _checks.indices("idx", idx, self.config.vocab_size, "token ids of the vocabulary")
        if targets is not None:
            _checks.tensor("targets", targets, "B, T", integer=True, B=B, T=T)

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
