"""The character GPT that the training-loop tests and the CPU-recipe benchmark train (not a lesson's model).

    CharGPT   lesson 09's GPT (course_lib.gpt), its forward pass, with an untied output head that has a bias;
              CharGPT(vocab_size, block_size, d_model=128, n_layers=4, n_heads=4, dropout=0.0, use_sdpa=False)

nanoGPT's Tiny Shakespeare size by default. Seeded the same, it starts from the weights it had when its recipe was
measured (tests/benchmarks/RESULTS_char_recipe.md): its parts are built in the same order, under GPT's names.

Shape legend: B batch, T time (T <= block_size), C d_model channels, V vocab_size.
"""

from __future__ import annotations

from torch import nn

from course_lib import _checks
from course_lib.blocks import TransformerBlock
from course_lib.gpt import GPT


class CharGPT(GPT):
    """A GPT over characters: `vocab_size` symbols, contexts of up to `block_size` of them; its head is a matrix
    of its own, with a bias. forward(idx (B, T), targets (B, T) or None) -> (logits (B, T, V), loss or None)."""

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
        _checks.positive_ints(vocab_size=vocab_size, block_size=block_size, n_layers=n_layers)
        nn.Module.__init__(self)  # GPT's parts with an untied head (GPT.__init__ would tie it)
        self.context_length = self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_heads, dropout=dropout, use_sdpa=use_sdpa) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size)
