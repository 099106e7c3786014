"""The GPT you assemble in lesson 09 from your own blocks; lesson 10 loads GPT-2's weights into it.

    GPT            token + learned position embeddings -> n_layers pre-LN TransformerBlocks (lesson 06) -> final
                   LayerNorm -> output head tied to the token embedding; forward(idx, targets=None) -> (logits, loss)
    init_gpt2      GPT-2's initialisation, for any model with these module names (the learner's GPT included)

`course_lib.gpt2.GPT2` is this model with a config, GPT-2's initialisation, vocabulary padding and a KV cache.

Shape legend: B batch, T time (T <= context_length), C d_model channels, V vocab_size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.blocks import TransformerBlock

__all__ = ["GPT", "init_gpt2"]


class GPT(nn.Module):
    """A decoder-only transformer: what every position predicts is the token after it.

    Lesson 09, exercise `GPT`. `tok_emb` (V, C) and `pos_emb` (context_length, C) are added and pass `drop`, then
    the `blocks` (causal pre-LN TransformerBlocks), `ln_f` and `lm_head`, whose weight *is* `tok_emb.weight`:
    one matrix both embeds a token and scores it as the next one (weight tying). idx (B, T) long -> logits
    (B, T, V), and the mean cross-entropy over all B * T positions when `targets` (B, T) are given.
    `use_sdpa` routes attention through F.scaled_dot_product_attention (the same function, fused kernels).
    `block` is the block class, called as `block(d_model, n_heads, dropout=dropout)`: lesson 10 passes your lesson 06
    `TransformerBlock` (any class with its contract and module names).
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

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        T = idx.shape[1]
        if idx.shape[1] > self.context_length:
            raise ValueError(f"idx has T={T} positions, more than the model's context_length {self.context_length}")
        positions = torch.arange(T, device=idx.device)  # (T,)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # mean over the B * T positions


@torch.no_grad()
def init_gpt2(model: nn.Module, n_layers: int) -> nn.Module:
    """GPT-2's initialisation, in place: N(0, 0.02) for linear and embedding weights, zero biases, LayerNorms at
    (1, 0), and std 0.02 / sqrt(2 * n_layers) for the two projections that write into the residual stream
    (`attn.out_proj`, `mlp.fc2`): each block adds two terms to the stream, and the variance of a sum grows with
    the number of its terms. Works on any model that uses these module names (yours from lesson 09 too)."""
    residual_std = 0.02 / math.sqrt(2 * n_layers)
    for name, module in model.named_modules():
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
    return model
