"""Transformer blocks: LayerNorm, the feed-forward network, residual connections, and the layers they make
(Lesson 06; lesson 07 builds its encoder-decoder from these, lessons 08-10 their decoder-only models).

    layer_norm         LayerNorm from scratch: over the last dimension, biased variance, ε inside the square root
    FeedForward        fc1 (d_model -> d_hidden) -> GELU (tanh, as GPT-2) -> fc2 (d_hidden -> d_model) -> dropout
    TransformerBlock   GPT-2's pre-LN block: x + attn(ln1(x)), then x + mlp(ln2(x))  (norm_first=False: post-LN)
    EncoderLayer       the 2017 encoder layer: self-attention, then feed-forward, each followed by add & norm
    DecoderLayer       the 2017 decoder layer: causal self-attention, cross-attention over the encoder's memory,
                       feed-forward, each followed by add & norm
    Encoder, Decoder   N such layers and an optional final LayerNorm (pre-LN stacks need it)

Post-LN (2017): x = norm(x + sublayer(x)) — the residual stream itself passes through every LayerNorm.
Pre-LN (GPT-2, `norm_first=True`): x = x + sublayer(norm(x)) — only additions touch the stream.
With copied weights the layers compute what `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer`
compute (`course_lib.torch_layers`; PyTorch adds one more dropout inside its feed-forward, so only with
dropout 0).

Masks are bool with True = may attend. Padding masks are (B, T) bool, True at real tokens; the layers turn them
into (B, 1, 1, T) so that they broadcast over heads and queries. PyTorch's nn.Transformer* layers use the
opposite convention (True = blocked); `torch_layers` converts.

Shape legend: B batch, T time (S source / memory, T target), H heads, D head size, C / d_model channels.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.multihead import LayerCache, MultiHeadAttention
from course_lib.multihead_cross import MultiHeadCrossAttention

__all__ = [
    "ACTIVATIONS",
    "layer_norm",
    "FeedForward",
    "TransformerBlock",
    "MultiHeadCrossAttention",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
]

# The feed-forward's non-linearity, by name: GPT-2 uses GELU's tanh approximation, the 2017 paper ReLU, and
# PyTorch's activation="gelu" is the exact (erf) GELU.
ACTIVATIONS = {
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "gelu": nn.GELU,
    "relu": nn.ReLU,
}


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalise each vector over its last dimension to mean 0 and variance 1, then scale and shift.

    Lesson 06, exercise `layer_norm`; equals `F.layer_norm(x, (C,), weight, bias, eps)`. The variance is the
    biased one (divide by C, not C - 1), and ε goes inside the square root, so a constant vector gives `bias`.
    x: (..., C), weight: (C,), bias: (C,) -> (..., C).
    """
    _checks.tensors(x=(x, "..., C"), weight=(weight, "C"), bias=(bias, "C"))
    _checks.positive_number("eps", eps)
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased: / C
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias  # (..., C)


class FeedForward(nn.Module):
    """The position-wise feed-forward network: every position alone, through a wider hidden layer and back.

    Lesson 06, exercise `FeedForward`. `activation` is one of ACTIVATIONS ("gelu_tanh" as GPT-2; "relu" as the
    2017 paper and PyTorch's default; "gelu" exact). The dropout acts on the output, before the residual add.
    x: (..., d_model) -> (..., d_model).
    """

    def __init__(self, d_model: int, d_hidden: int, dropout: float = 0.0, activation: str = "gelu_tanh") -> None:
        super().__init__()
        _checks.positive_ints(d_model=d_model, d_hidden=d_hidden)
        _checks.probability("dropout", dropout)
        _checks.one_of("activation", activation, tuple(ACTIVATIONS))
        self.activation = activation  # its name
        self.fc1 = nn.Linear(d_model, d_hidden)  # widen (usually 4x)
        self.act = ACTIVATIONS[activation]()
        self.fc2 = nn.Linear(d_hidden, d_model)  # back to the width of the residual stream
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.fc2(self.act(self.fc1(x))))  # (..., d_hidden) inside, (..., d_model) out


class TransformerBlock(nn.Module):
    """GPT-2's block: pre-LN self-attention and feed-forward, each inside a residual connection.

    Lesson 06, exercise `TransformerBlock`. `ln1`, `ln2` are nn.LayerNorm(d_model); `attn` a MultiHeadAttention
    (causal by default; `use_sdpa` goes to it); `mlp` a FeedForward with d_hidden = 4 * d_model unless given.
    Dropout only where `attn` and `mlp` apply it. `norm_first=False` gives the post-LN order, for comparison
    (not GPT-2). The models of lessons 09-11 run every layer through this forward: `need_weights` also returns
    the attention weights (B, H, T, T), for plots; `cache` (lesson 10) is the layer's LayerCache, passed on to
    `attn`. x: (B, T, d_model), mask: bool broadcastable to (B, H, T, T) -> (B, T, d_model), or (out, weights).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_hidden: int | None = None,
        dropout: float = 0.0,
        causal: bool = True,
        norm_first: bool = True,
        use_sdpa: bool = False,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, causal=causal, use_sdpa=use_sdpa)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, 4 * d_model if d_hidden is None else d_hidden, dropout)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False, cache: LayerCache | None = None
    ) -> Tensor | tuple[Tensor, Tensor | None]:
        attended = self.attn(self.ln1(x) if self.norm_first else x, mask, need_weights=need_weights, cache=cache)
        attended, weights = attended if need_weights else (attended, None)  # (B, T, C), (B, H, T, T)
        if self.norm_first:
            x = x + attended  # the stream is only ever added to
            x = x + self.mlp(self.ln2(x))
        else:
            x = self.ln1(x + attended)  # post-LN: the stream itself is normalised
            x = self.ln2(x + self.mlp(x))
        return (x, weights) if need_weights else x


def _key_mask(padding: Tensor | None) -> Tensor | None:
    """A (B, T) padding mask (True = real token) as (B, 1, 1, T): it then blocks keys, for every head and query."""
    return None if padding is None else padding[:, None, None, :]  # (B, 1, 1, T)


class EncoderLayer(nn.Module):
    """The 2017 encoder layer: x = norm1(x + dropout(self_attn(x))); x = norm2(x + mlp(x)) (post-LN).

    Lesson 06, exercise `EncoderLayer`. Every position sees every other one (no causal mask); padding keys are
    blocked. `norm_first=True` gives the pre-LN order x + sublayer(norm(x)). `dropout` acts on the attention
    weights, on the attention output and on the feed-forward output.
    x: (B, S, d_model), padding_mask: (B, S) bool, True at real tokens -> (B, S, d_model), or
    (out, weights (B, H, S, S)).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_hidden: int | None = None,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, causal=False)
        self.norm1 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, 4 * d_model if d_hidden is None else d_hidden, dropout, activation)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        mask = _key_mask(padding_mask)  # (B, 1, 1, S)
        if self.norm_first:
            attended, weights = self.self_attn(self.norm1(x), mask, need_weights=True)  # (B, S, C), (B, H, S, S)
            x = x + self.dropout(attended)
            x = x + self.mlp(self.norm2(x))
        else:
            attended, weights = self.self_attn(x, mask, need_weights=True)
            x = self.norm1(x + self.dropout(attended))  # add, then norm
            x = self.norm2(x + self.mlp(x))
        return (x, weights) if need_weights else x


class DecoderLayer(nn.Module):
    """The 2017 decoder layer, three sublayers each followed by add & norm (post-LN):

        x = norm1(x + dropout(self_attn(x)))           causal: a position sees itself and the ones before
        x = norm2(x + dropout(cross_attn(x, memory)))  queries from x, keys and values from the encoder's memory
        x = norm3(x + mlp(x))

    Lesson 06; lesson 07 trains it. `norm_first=True` gives the pre-LN order. The memory may be longer or shorter
    than x and (`d_memory`) of another width. x: (B, T, d_model), memory: (B, S, d_memory), padding_mask:
    (B, T), memory_padding_mask: (B, S), True at real tokens -> (B, T, d_model), or with need_weights
    (out, self_weights (B, H, T, T), cross_weights (B, H, T, S)).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_hidden: int | None = None,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        d_memory: int | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, causal=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadCrossAttention(d_model, n_heads, d_memory=d_memory, dropout=dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, 4 * d_model if d_hidden is None else d_hidden, dropout, activation)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        padding_mask: Tensor | None = None,
        memory_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor, Tensor]:
        self_mask = _key_mask(padding_mask)  # (B, 1, 1, T), and'ed with the causal mask
        cross_mask = _key_mask(memory_padding_mask)  # (B, 1, 1, S)
        if self.norm_first:
            h, self_w = self.self_attn(self.norm1(x), self_mask, need_weights=True)  # (B, T, C), (B, H, T, T)
            x = x + self.dropout(h)
            h, cross_w = self.cross_attn(self.norm2(x), memory, cross_mask, need_weights=True)  # (B, H, T, S)
            x = x + self.dropout(h)
            x = x + self.mlp(self.norm3(x))
        else:
            h, self_w = self.self_attn(x, self_mask, need_weights=True)
            x = self.norm1(x + self.dropout(h))
            h, cross_w = self.cross_attn(x, memory, cross_mask, need_weights=True)
            x = self.norm2(x + self.dropout(h))
            x = self.norm3(x + self.mlp(x))
        return (x, self_w, cross_w) if need_weights else x


class Encoder(nn.Module):
    """N EncoderLayers and a final LayerNorm, by default only for pre-LN (a post-LN layer ends with one).

    Lesson 06 (lesson 07 trains it). x: (B, S, d_model), padding_mask: (B, S) -> the memory (B, S, d_model), or
    (memory, [weights (B, H, S, S) of each layer]). `layer`: the layer class, called as `EncoderLayer` is (lesson
    07 passes the learner's); the weights need a layer whose forward takes `need_weights`, as the course's does.
    """

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_hidden: int | None = None,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        final_norm: bool | None = None,
        layer: type[nn.Module] = EncoderLayer,
    ) -> None:
        super().__init__()
        _checks.positive_int("n_layers", n_layers)
        options = dict(d_hidden=d_hidden, dropout=dropout, activation=activation, norm_first=norm_first)
        self.layers = nn.ModuleList(layer(d_model, n_heads, **options) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model) if (norm_first if final_norm is None else final_norm) else nn.Identity()

    def forward(
        self, x: Tensor, padding_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        if not need_weights:
            for layer in self.layers:
                x = layer(x, padding_mask)
            return self.norm(x)
        all_weights = []
        for layer in self.layers:
            x, weights = layer(x, padding_mask, need_weights=True)
            all_weights.append(weights)
        return self.norm(x), all_weights


class Decoder(nn.Module):
    """N DecoderLayers reading the same memory, and a final LayerNorm (by default only for pre-LN).

    Lesson 06 (lesson 07 trains it). x: (B, T, d_model), memory: (B, S, d_memory) -> (B, T, d_model), or
    (out, [self weights (B, H, T, T)], [cross weights (B, H, T, S)]), one per layer. `layer`: the layer class,
    called as `DecoderLayer` is (lesson 07's "spot the bug" passes a broken one).
    """

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_hidden: int | None = None,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        final_norm: bool | None = None,
        d_memory: int | None = None,
        layer: type[nn.Module] = DecoderLayer,
    ) -> None:
        super().__init__()
        _checks.positive_int("n_layers", n_layers)
        options = dict(d_hidden=d_hidden, dropout=dropout, activation=activation, norm_first=norm_first)
        self.layers = nn.ModuleList(layer(d_model, n_heads, d_memory=d_memory, **options) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model) if (norm_first if final_norm is None else final_norm) else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        padding_mask: Tensor | None = None,
        memory_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor], list[Tensor]]:
        self_weights, cross_weights = [], []
        for layer in self.layers:
            x, self_w, cross_w = layer(x, memory, padding_mask, memory_padding_mask, need_weights=True)
            self_weights.append(self_w)
            cross_weights.append(cross_w)
        x = self.norm(x)
        return (x, self_weights, cross_weights) if need_weights else x
