"""A character-level GPT: the decoder-only model of lesson 09, composed from lesson 06's blocks.

    CharGPT   token embedding + learned position embedding -> n_layers pre-LN TransformerBlocks (causal)
              -> final LayerNorm -> linear head to vocab_size logits; forward(idx, targets) -> (logits, loss)

`use_sdpa=True` routes every block's attention through F.scaled_dot_product_attention (the same function,
fused kernels); `need_weights` in `attention_maps` always takes the explicit path, so the weights can be drawn.

Shape legend: B batch, T time (T <= block_size), C d_model channels, V vocab_size, H heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import TransformerBlock

__all__ = ["CharGPT"]


class CharGPT(nn.Module):
    """A GPT over characters: `vocab_size` symbols, contexts of up to `block_size` of them."""

    def __init__(
        self,
        vocab_size: int,
        block_size: int,
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 4,
        dropout: float = 0.0,
        use_sdpa: bool = False,
    ) -> None:
        super().__init__()
        _checks.positive_ints(vocab_size=vocab_size, block_size=block_size, n_layers=n_layers)
        self.vocab_size, self.block_size = vocab_size, block_size
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_heads, dropout=dropout, use_sdpa=use_sdpa) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)  # pre-LN stacks need a norm after the last block
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """idx: (B, T) long -> logits (B, T, V), and the mean cross-entropy against `targets` (B, T) if given."""
        if not torch.compiler.is_compiling():  # a compiled graph leaves the check out: nothing in it but the model
            self._check_idx(idx)
        x = self._embed(idx)  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, self.vocab_size), targets.reshape(-1))
        return logits, loss

    def _embed(self, idx: Tensor) -> Tensor:
        """Token plus position embeddings, then dropout: (B, T) -> (B, T, C)."""
        positions = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        return self.drop(self.token_embedding(idx) + self.position_embedding(positions))  # (B, T, C)

    def _check_idx(self, idx: Tensor) -> None:
        _checks.tensor("idx", idx, "B, T", integer=True)
        if idx.shape[1] > self.block_size:
            raise ValueError(f"idx has T={idx.shape[1]} positions but the model's block_size is {self.block_size}")

    @torch.no_grad()
    def attention_maps(self, idx: Tensor) -> Tensor:
        """The attention weights of every layer and head for `idx` (B, T): (n_layers, B, H, T, T), for plotting.

        The same pass as `forward` (in the model's current mode), each block asked for its weights, which always
        takes the explicit path (SDPA never forms them).
        """
        self._check_idx(idx)
        x = self._embed(idx)  # (B, T, C)
        maps = []
        for block in self.blocks:
            x, weights = block(x, need_weights=True)  # (B, T, C), (B, H, T, T)
            maps.append(weights)
        return torch.stack(maps)  # (n_layers, B, H, T, T)
