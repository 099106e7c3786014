"""A GPT written as a learner writes lesson 09's, without course_lib: the contract's module names and nothing more.

Lesson 10 loads GPT-2's weights into the learner's own class, so the loaders and the generation loop are tested on
this one too, not only on the course's `GPT` (whose blocks are the course's). Differences from the course's on
purpose: attention by hand with a registered-per-call mask, q/k/v split with `chunk`, GELU written out, and no
`context_length` attribute (generation must read the context from the position table).

`forward_with_cache` is lesson 10's last exercise as a learner writes it for this model, without course_lib: the
model's parts run one by one, the new keys and values appended to the cache it is given (any object with
`layers[i].keys` / `.values`, as the course's KVCache has), the mask shifted by hand, the positions offset.

Shape legend: B batch, T time, C d_model, H heads, D head size, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class LearnerAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (B, T, C) each
        q, k, v = (t.reshape(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.n_heads)  # (B, H, T, T)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class LearnerFeedForward(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        h = self.fc1(x)
        h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))  # GELU, tanh form
        return self.fc2(h)


class LearnerBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = LearnerAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = LearnerFeedForward(d_model)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class LearnerGPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, n_heads, n_layers, dropout=0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([LearnerBlock(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx: Tensor, targets: Tensor | None = None):
        B, T = idx.shape
        if self.pos_emb.num_embeddings < T:
            raise ValueError(f"T={T} is longer than the context")
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def forward_with_cache(model: nn.Module, idx: Tensor, cache) -> Tensor:
    """T new tokens idx (B, T) after the P positions in `cache` -> logits (B, T, V); every layer's cache grows by T."""
    B, T = idx.shape
    P = cache.layers[0].keys.shape[2]
    x = model.drop(model.tok_emb(idx) + model.pos_emb(torch.arange(P, P + T, device=idx.device)))
    for block, layer in zip(model.blocks, cache.layers, strict=True):
        attn = block.attn
        H = attn.n_heads
        q, k, v = attn.qkv(block.ln1(x)).chunk(3, dim=-1)  # (B, T, C) each
        q, k, v = (t.reshape(B, T, H, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        layer.keys = torch.cat([layer.keys, k], dim=2)  # (B, H, P + T, D)
        layer.values = torch.cat([layer.values, v], dim=2)
        scores = q @ layer.keys.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, P + T)
        # new query i is position P + i: it may not read keys after P + i
        future = torch.triu(torch.ones(T, P + T, dtype=torch.bool, device=idx.device), diagonal=P + 1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        out = (weights @ layer.values).transpose(1, 2).reshape(B, T, -1)  # (B, T, C)
        x = x + attn.out_proj(out)
        x = x + block.mlp(block.ln2(x))
    return model.lm_head(model.ln_f(x))
