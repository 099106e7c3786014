"""The GPT you assemble in lesson 09 from your own blocks; lesson 10 loads GPT-2's weights into it.

    GPT            token + learned position embeddings -> n_layers pre-LN TransformerBlocks (lesson 06) -> final
                   LayerNorm -> output head tied to the token embedding; forward(idx, targets=None, cache=None)
                   -> (logits, loss); new_cache(batch_size) -> an empty KVCache
    KVCache        every layer's keys and values so far, so that generation feeds one new token per step (lesson 10);
                   KVCache.for_model(model, batch_size) makes an empty one for any model with these module names
    forward_with_cache   T new tokens after the P cached ones -> logits, the cache grown (lesson 10, exercise)
    init_gpt2      GPT-2's initialisation, for any model with these module names (the learner's GPT included)
    attention_maps every layer's attention weights, for any model with these module names (the learner's GPT too)

This forward pass is the course's only decoder-only one. The other decoders subclass GPT and differ in their
parts, built in their own constructors under the same names: `course_lib.gpt2.GPT2` (a config, a padded
vocabulary), lesson 09's ablation ladder (`char_ladder.LadderGPT`), lesson 12's `modern_gpt.ModernGPT` (RMSNorm,
RoPE, SwiGLU, ...), lesson 06's deep stacks (`deep_stacks.StackLM`).

Shape legend: B batch, T time (new positions), P positions already cached, C d_model channels, H heads,
D head size (C / H), V vocab_size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import TransformerBlock
from course_lib.modern import RMSNorm
from course_lib.multihead import LayerCache

__all__ = ["GPT", "KVCache", "attention_maps", "forward_with_cache", "init_gpt2"]


class KVCache:
    """The keys and values every layer has computed so far: one LayerCache per block, in `layers`.

    Lesson 10. A forward pass with the cache feeds T new positions: in every block the attention appends their
    keys and values behind the P = `length` cached ones (`multihead.attend_with_cache`) and attends to all P + T
    of them. It starts empty, (B, H, 0, D) per layer; `GPT.new_cache` makes one of the model's sizes.
    """

    def __init__(
        self,
        n_layers: int,
        batch_size: int,
        n_heads: int,
        d_head: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        _checks.positive_ints(n_layers=n_layers, batch_size=batch_size, n_heads=n_heads, d_head=d_head)
        empty = torch.zeros(batch_size, n_heads, 0, d_head, device=device, dtype=dtype)  # (B, H, 0, D)
        self.layers = [LayerCache(keys=empty, values=empty) for _ in range(n_layers)]  # never written in place

    @classmethod
    def for_model(cls, model: nn.Module, batch_size: int) -> KVCache:
        """An empty cache for `model` (its layers, heads and head size), on its device and in its dtype: any model
        with lesson 09 GPT's module names (`tok_emb`, `blocks`, each block's `attn.n_heads`), yours included."""
        weight = model.tok_emb.weight  # (V, C)
        n_heads = model.blocks[0].attn.n_heads
        d_head = weight.shape[1] // n_heads
        return cls(len(model.blocks), batch_size, n_heads, d_head, device=weight.device, dtype=weight.dtype)

    @property
    def length(self) -> int:
        """Positions cached so far (P)."""
        return self.layers[0].keys.shape[2]

    @property
    def batch_size(self) -> int:
        return self.layers[0].keys.shape[0]


class GPT(nn.Module):
    """A decoder-only transformer: what every position predicts is the token after it.

    Lesson 09, exercise `GPT`. `tok_emb` (V, C) and `pos_emb` (context_length, C) are added and pass `drop`, then
    the `blocks` (causal pre-LN TransformerBlocks), `ln_f` and `lm_head`, whose weight *is* `tok_emb.weight`:
    one matrix both embeds a token and scores it as the next one (weight tying). idx (B, T) long -> logits
    (B, T, V), and the mean cross-entropy over all B * T positions when `targets` (B, T) are given (targets equal
    to -100 are ignored).
    `use_sdpa` routes attention through F.scaled_dot_product_attention (the same function, fused kernels).
    `block` is the block class, called as `block(d_model, n_heads, dropout=dropout)`: lesson 10 passes your lesson 06
    `TransformerBlock` (any class with its contract and module names).
    Lesson 10: with `cache` (a KVCache holding P positions) idx holds the T positions after them; each block gets
    its layer's part of the cache, which grows by T. Only blocks whose forward takes `cache=` can use one (the
    course's TransformerBlock does).
    """

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        dropout: float = 0.0,
        *,
        use_sdpa: bool = False,
        block: Callable[..., nn.Module] = TransformerBlock,
    ) -> None:
        super().__init__()
        options = {"use_sdpa": True} if use_sdpa else {}  # only the course's block takes this option
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)  # learned positions (lesson 03)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(block(d_model, n_heads, dropout=dropout, **options) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)  # pre-LN leaves the stream un-normalised after the last block
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: one (V, C) matrix, counted once

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[Tensor, Tensor | None]:
        T = idx.shape[1]
        start = 0 if cache is None else cache.length  # P: the position of idx[:, 0]
        if start + T > self.context_length:
            after = f" after {start} cached positions" if cache is not None else ""
            limit = f"more than the model's context_length {self.context_length}"
            raise ValueError(f"idx has T={T} positions{after}, {limit}")
        x = self.tok_emb(idx)  # (B, T, C)
        if self.pos_emb is not None:  # learned positions; a RoPE model (lesson 12) rotates q and k instead
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))  # (B, T, C) + (T, C)
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x) if cache is None else block(x, cache=cache.layers[i])  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # mean over the B * T positions

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty KVCache for this model (its layers, heads and head size), on its device and in its dtype."""
        return KVCache.for_model(self, batch_size)


def forward_with_cache(model: GPT, idx: Tensor, cache: KVCache) -> Tensor:
    """The logits of T new tokens after the P positions in `cache`, which grows by T: one step of cached generation.

    Lesson 10, exercise `forward_with_cache`. `model` has lesson 09 GPT's module names; idx (B, T) long holds the
    tokens at positions P .. P + T - 1, so they read rows P .. P + T - 1 of `pos_emb`. In each block i the layer
    normalised by `ln1` is projected by `attn.qkv` into q, k, v ([q | k | v], split into `attn.n_heads` heads of
    D), and `multihead.attend_with_cache` appends k, v to `cache.layers[i]` (keys, values (B, H, P, D) ->
    (B, H, P + T, D), stored back there) and attends the T new queries over all P + T positions, the causal
    triangle shifted by P; the heads are merged and `attn.out_proj` adds the result to the stream, then
    `mlp(ln2(x))` as in the block. `ln_f` and `lm_head` give the logits (B, T, V), which equal the last T rows of a
    full forward pass over all P + T tokens.

    The course's GPT does exactly this in its own forward: `GPT.forward(idx, cache=cache)` shifts the positions and
    hands each block its layer of the cache, which the block passes to its MultiHeadAttention (lesson 05, with a
    `cache=` argument added in lesson 10), which calls attend_with_cache. This reference is that forward pass, so
    it needs blocks whose forward takes `cache=` (the course's); a model whose classes take no cache (yours, as
    lesson 05's and 06's contracts have it) is run through its parts one by one, as the exercise asks.
    """
    logits, _ = model(idx, cache=cache)
    return logits


_NORMS = (nn.LayerNorm, nn.RMSNorm, RMSNorm)
_RESIDUAL_PROJECTIONS = ("attn.out_proj", "mlp.fc2", "mlp.w2")  # the linears that write into the residual stream


@torch.no_grad()
def init_gpt2(model: nn.Module, n_layers: int | None = None) -> nn.Module:
    """GPT-2's initialisation, in place: N(0, 0.02) for linear and embedding weights, zero biases, norms at gain
    1 (and bias 0), and std 0.02 / sqrt(2 * n_layers) for the projections that write into the residual stream
    (`attn.out_proj`, and `mlp.fc2` or lesson 12's SwiGLU `mlp.w2`): each block adds two terms to the stream,
    and the variance of a sum grows with the number of its terms. `n_layers` defaults to len(model.blocks).
    Works on any model that uses these module names (yours from lesson 09 too, lesson 12's ModernGPT with every
    switch); modules are visited in `named_modules` order, so the same seed gives the same weights."""
    n_layers = len(model.blocks) if n_layers is None else n_layers
    _checks.positive_int("n_layers", n_layers)
    residual_std = 0.02 / math.sqrt(2 * n_layers)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            std = residual_std if name.endswith(_RESIDUAL_PROJECTIONS) else 0.02
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, _NORMS):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:  # RMSNorm has none, a bias=False LayerNorm neither
                nn.init.zeros_(module.bias)
    return model


@torch.no_grad()
def attention_maps(model: nn.Module, idx: Tensor) -> Tensor:
    """The attention weights of every layer and head of `model` on `idx` (B, T): (n_layers, B, H, T, T), for plots.

    Lessons 09 and 10. Any model with GPT's module names will do, whoever wrote its classes: the same pass as its
    forward, in the model's current mode, where each block's `attn` (a MultiHeadAttention, lesson 05) is also
    asked for its weights (`need_weights=True`, always the explicit path: SDPA never forms them) on the input
    that block normalises, `ln1(x)`; the block itself then computes x as usual.
    """
    T = idx.shape[1]
    x = model.drop(model.tok_emb(idx) + model.pos_emb(torch.arange(T, device=idx.device)))  # (B, T, C)
    maps = []
    for block in model.blocks:
        _, weights = block.attn(block.ln1(x), need_weights=True)  # (B, H, T, T)
        maps.append(weights)
        x = block(x)  # (B, T, C)
    return torch.stack(maps)  # (n_layers, B, H, T, T)
