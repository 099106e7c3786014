"""Multi-head cross-attention: the sibling of `multihead.MultiHeadAttention` for two sequences (Lesson 06).

Lesson 04's `CrossAttention` is one head; this is the multi-head version the encoder-decoder layers use. The
queries come from the decoder (x, Tq positions of width d_model), the keys and values from the memory — the
encoder's output, Tk positions of width d_memory, where Tk need not equal Tq. Projections:

    q_proj   d_model  -> d_model       reads the decoder
    kv_proj  d_memory -> 2 * d_model   reads the memory; output [k | v], heads contiguous inside each
    out_proj d_model  -> d_model       mixes the heads

Masks are bool, True = may attend, broadcastable to the scores (B, H, Tq, Tk); a memory padding mask (B, Tk)
becomes `padding[:, None, None, :]`. `to_torch_mha` / `from_torch_mha` map the weights to and from
`nn.MultiheadAttention(kdim=d_memory, vdim=d_memory)`.

Shape legend: B batch, Tq decoder (query) positions, Tk memory (key) positions, H heads, D head size,
C / d_model channels (= H * D).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.attention import attention_weights
from course_lib.multihead import merge_heads, split_heads

__all__ = ["MultiHeadCrossAttention", "to_torch_mha", "from_torch_mha"]


class MultiHeadCrossAttention(nn.Module):
    """Queries from `x`, keys and values from `memory`, in n_heads heads of size d_model // n_heads.

    Lesson 06 (used by `blocks.DecoderLayer`; lesson 07 plots its weights). What changed from
    MultiHeadAttention: the fused projection reads only the memory and makes [k | v]; q has its own projection.
    x: (B, Tq, d_model), memory: (B, Tk, d_memory), memory_mask: bool broadcastable to (B, H, Tq, Tk)
    -> (B, Tq, d_model), or (out, weights (B, H, Tq, Tk)) with the weights that multiplied V (after dropout).
    """

    def __init__(
        self, d_model: int, n_heads: int, d_memory: int | None = None, dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        d_memory = d_model if d_memory is None else d_memory
        _checks.divisible("d_model", d_model, "n_heads", n_heads)
        _checks.positive_int("d_memory", d_memory)
        _checks.probability("dropout", dropout)
        self.d_model, self.n_heads, self.d_memory = d_model, n_heads, d_memory
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # decoder -> queries
        self.kv_proj = nn.Linear(d_memory, 2 * d_model, bias=bias)  # memory -> [k | v]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        # Kept although it runs in every decoder layer: lesson 07's "spot the bug" decoder, which swaps x and
        # memory, trains without an error and fails only here, with this message, once generation makes the
        # two lengths differ.
        _checks.mask("memory_mask", memory_mask, (x.shape[0], self.n_heads, x.shape[1], memory.shape[1]))
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, Tq, C) -> (B, H, Tq, D)
        k, v = self.kv_proj(memory).split(self.d_model, dim=-1)  # (B, Tk, 2C) -> 2 x (B, Tk, C)
        k, v = split_heads(k, self.n_heads), split_heads(v, self.n_heads)  # (B, H, Tk, D) each
        weights = self.dropout(attention_weights(q, k, memory_mask))  # (B, H, Tq, Tk)
        out = self.out_proj(merge_heads(weights @ v))  # (B, H, Tq, D) -> (B, Tq, C)
        return (out, weights) if need_weights else out


def to_torch_mha(ours: MultiHeadCrossAttention) -> nn.MultiheadAttention:
    """An `nn.MultiheadAttention(batch_first=True, kdim=vdim=d_memory)` computing what `ours` computes.

    Call it as `theirs(x, memory, memory, key_padding_mask=~padding)`: PyTorch's bool masks mean "blocked".
    With d_memory == d_model PyTorch keeps one in_proj_weight [q; k; v]; otherwise three separate matrices.
    """
    _checks.instance("ours", ours, MultiHeadCrossAttention, "a MultiHeadCrossAttention")
    bias = ours.q_proj.bias is not None
    d_model, n_heads, d_memory = ours.d_model, ours.n_heads, ours.d_memory
    theirs = nn.MultiheadAttention(
        d_model, n_heads, dropout=ours.dropout.p, bias=bias, batch_first=True, kdim=d_memory, vdim=d_memory
    )
    k_weight, v_weight = ours.kv_proj.weight.split(ours.d_model)  # 2 x (d_model, d_memory)
    with torch.no_grad():
        if theirs._qkv_same_embed_dim:
            theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.kv_proj.weight]))  # (3C, C)
        else:
            theirs.q_proj_weight.copy_(ours.q_proj.weight)
            theirs.k_proj_weight.copy_(k_weight)
            theirs.v_proj_weight.copy_(v_weight)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.kv_proj.bias]))  # (3C,)
            theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs


def from_torch_mha(theirs: nn.MultiheadAttention) -> MultiHeadCrossAttention:
    """Our MultiHeadCrossAttention with the weights of `theirs` (kdim == vdim; no bias_k, no add_zero_attn)."""
    _checks.instance("theirs", theirs, nn.MultiheadAttention, "an nn.MultiheadAttention")
    if theirs.kdim != theirs.vdim or theirs.bias_k is not None or theirs.add_zero_attn:
        raise ValueError("`theirs` must have kdim == vdim, add_bias_kv=False and add_zero_attn=False")
    bias = theirs.in_proj_bias is not None
    ours = MultiHeadCrossAttention(theirs.embed_dim, theirs.num_heads, theirs.kdim, theirs.dropout, bias=bias)
    C = theirs.embed_dim
    with torch.no_grad():
        if theirs._qkv_same_embed_dim:
            q_weight, k_weight, v_weight = theirs.in_proj_weight.split(C)  # 3 x (C, C)
        else:
            q_weight, k_weight, v_weight = theirs.q_proj_weight, theirs.k_proj_weight, theirs.v_proj_weight
        ours.q_proj.weight.copy_(q_weight)
        ours.kv_proj.weight.copy_(torch.cat([k_weight, v_weight]))  # (2C, d_memory)
        ours.out_proj.weight.copy_(theirs.out_proj.weight)
        if bias:
            ours.q_proj.bias.copy_(theirs.in_proj_bias[:C])
            ours.kv_proj.bias.copy_(theirs.in_proj_bias[C:])
            ours.out_proj.bias.copy_(theirs.out_proj.bias)
    return ours
