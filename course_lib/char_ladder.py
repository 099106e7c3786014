"""The ablation ladder of lesson 09: a GPT whose parts are switched on one at a time, built from your classes.

    Parts        the component classes a ladder model is built from: a MultiHeadAttention class, a FeedForward
                 class and a layer_norm function (lessons 05 and 06: yours, or the course's)
    LayerNorm    an nn.Module around a layer_norm function: a weight and a bias of d_model, and eps
    Rung         one row of the ladder: which parts are on, and how large the model is
    LADDER       the lesson's rows, from a bigram model to a wider GPT with dropout
    LadderBlock  attention, then feed-forward, each optionally behind a LayerNorm and inside a residual connection
    LadderGPT    lesson 09's GPT (course_lib.gpt), its forward pass, with a rung's parts: token + position
                 embeddings -> n_layers LadderBlocks -> (final LayerNorm) -> head

With every part on (`LADDER[-2]`), a LadderGPT computes what lesson 09's GPT computes, except for one thing: its
head is a matrix of its own, not tied to the token embedding. Tying makes the bigram row's logits a symmetric
function of (this character, next character) — "q then u" as likely as "u then q" — so the first rows would not
be the models they are named after. And the lesson trains every rung from PyTorch's default initialisation, not
GPT-2's (`course_lib.gpt.init_gpt2`): GPT-2's small weights assume the residual connections and LayerNorm that keep a
signal alive through the blocks, and the first rungs have neither.

Shape legend: B batch, T time (T <= context_length), C d_model channels, V vocab_size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import FeedForward, layer_norm
from course_lib.gpt import GPT
from course_lib.multihead import MultiHeadAttention

__all__ = ["LADDER", "LadderBlock", "LadderGPT", "LayerNorm", "Parts", "Rung"]


@dataclass(frozen=True)
class Parts:
    """What a ladder model is built from; the defaults are the course's classes (lessons 05 and 06)."""

    attention: type[nn.Module] = MultiHeadAttention  # (d_model, n_heads, dropout=, causal=) -> (B, T, C) -> (B, T, C)
    feed_forward: type[nn.Module] = FeedForward  # (d_model, d_hidden, dropout) -> (..., C) -> (..., C)
    layer_norm: Callable[..., Tensor] = layer_norm  # (x, weight, bias, eps) -> x normalised over its last dim


class LayerNorm(nn.Module):
    """`fn(x, weight, bias, eps)` as a module with a learned weight (1s) and bias (0s): nn.LayerNorm, with the
    normalisation you wrote in lesson 06. x: (..., C) -> (..., C)."""

    def __init__(self, d_model: int, fn: Callable[..., Tensor] = layer_norm, eps: float = 1e-5) -> None:
        super().__init__()
        self.fn, self.eps = fn, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x, self.weight, self.bias, self.eps)


@dataclass(frozen=True)
class Rung:
    """One row of the ladder. n_layers = 0 is the bigram model: embeddings straight into the head."""

    name: str  # what this row adds, as the table shows it
    n_layers: int = 1  # blocks
    n_heads: int = 4  # attention heads per block (1: one head as wide as the model)
    feed_forward: bool = False  # a FeedForward after the attention in each block
    residual: bool = False  # x = x + sublayer(x) instead of x = sublayer(x)
    layer_norm: bool = False  # pre-LN: a LayerNorm before each sublayer, and one after the last block
    d_model: int = 32  # channels of the residual stream
    dropout: float = 0.0  # after the embeddings, on the attention weights, after the feed-forward

    def __post_init__(self) -> None:
        _checks.integer("n_layers", self.n_layers, minimum=0)
        _checks.positive_ints(n_heads=self.n_heads, d_model=self.d_model)
        _checks.divisible("d_model", self.d_model, "n_heads", self.n_heads)
        _checks.probability("dropout", self.dropout)


def _ladder() -> tuple[Rung, ...]:
    """Lesson 09's rungs: width 32 until the last, one block until residual connections make a second one help."""
    bigram = Rung("bigram", n_layers=0, d_model=32)
    one_head = replace(bigram, name="+ one self-attention head", n_layers=1, n_heads=1)
    heads = replace(one_head, name="+ multi-head (4 heads)", n_heads=4)
    mlp = replace(heads, name="+ feed-forward", feed_forward=True)
    residual = replace(mlp, name="+ residual connections, 2 blocks", residual=True, n_layers=2)
    norm = replace(residual, name="+ LayerNorm", layer_norm=True)
    wider = replace(norm, name="+ dropout 0.1, wider (d_model 64)", d_model=64, dropout=0.1)
    return bigram, one_head, heads, mlp, residual, norm, wider


LADDER = _ladder()


class LadderBlock(nn.Module):
    """Causal self-attention, then (optionally) a feed-forward of 4 * d_model hidden units. With `residual` each
    sublayer adds to the stream (x = x + f(x)), otherwise replaces it (x = f(x)); with `layer_norm` each reads
    the stream through a LayerNorm first (pre-LN, as GPT-2). The names are TransformerBlock's: ln1, attn, ln2,
    mlp. x: (B, T, C) -> (B, T, C)."""

    def __init__(self, rung: Rung, parts: Parts = Parts()) -> None:
        super().__init__()
        C = rung.d_model
        self.residual = rung.residual
        self.ln1 = LayerNorm(C, parts.layer_norm) if rung.layer_norm else nn.Identity()
        self.attn = parts.attention(C, rung.n_heads, dropout=rung.dropout, causal=True)
        self.ln2 = LayerNorm(C, parts.layer_norm) if rung.layer_norm and rung.feed_forward else nn.Identity()
        self.mlp = parts.feed_forward(C, 4 * C, rung.dropout) if rung.feed_forward else None

    def forward(self, x: Tensor) -> Tensor:
        h = self.attn(self.ln1(x))  # (B, T, C)
        x = x + h if self.residual else h
        if self.mlp is not None:
            h = self.mlp(self.ln2(x))  # (B, T, C)
            x = x + h if self.residual else h
        return x


class LadderGPT(GPT):
    """Lesson 09's GPT — its forward pass — with the parts of `rung` switched on: forward(idx (B, T), targets
    (B, T) or None) -> (logits (B, T, V), mean cross-entropy or None), as every model of lesson 09. `tok_emb`,
    `pos_emb`, `drop` (rung.dropout), the LadderBlocks, `ln_f` (a LayerNorm, or nothing) and an untied `lm_head`
    (see the module docstring)."""

    new_cache = None  # its blocks keep no KV cache: generation recomputes the window (course_lib.generate)

    def __init__(self, vocab_size: int, context_length: int, rung: Rung, parts: Parts = Parts()) -> None:
        _checks.positive_ints(vocab_size=vocab_size, context_length=context_length)
        nn.Module.__init__(self)  # GPT's parts, switched by the rung (GPT.__init__ would build lesson 09's)
        self.rung, self.context_length = rung, context_length
        C = rung.d_model
        self.tok_emb = nn.Embedding(vocab_size, C)
        self.pos_emb = nn.Embedding(context_length, C)
        self.drop = nn.Dropout(rung.dropout)
        self.blocks = nn.ModuleList(LadderBlock(rung, parts) for _ in range(rung.n_layers))
        self.ln_f = LayerNorm(C, parts.layer_norm) if rung.layer_norm else nn.Identity()
        self.lm_head = nn.Linear(C, vocab_size, bias=False)  # untied: see the module docstring
