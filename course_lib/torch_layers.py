"""Our encoder and decoder layers as PyTorch's, and the three mask conventions between them (Lesson 06).

PyTorch ships the 2017 layers as `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` (and stacks of
them, `nn.TransformerEncoder` / `nn.TransformerDecoder`). `to_torch(ours)` builds PyTorch's module with our
weights, renamed: qkv -> self_attn.in_proj_*, cross_attn q_proj + kv_proj -> multihead_attn.in_proj_* (stacked
[q; k; v]), mlp.fc1 / mlp.fc2 -> linear1 / linear2; norms and output projections keep their names.

Three mask conventions meet here:

    the course, F.scaled_dot_product_attention (bool)   True  = may attend
    nn.Transformer*, nn.MultiheadAttention (bool)       True  = blocked        `blocked_mask(allowed)`
    float ("additive") masks, added to the scores       0.0   = may attend, -inf = blocked   `float_mask(allowed)`

PyTorch's key-padding masks (B, S) follow its bool rule too: True marks padding. `allowed_mask` converts
either PyTorch form back to ours.

Shape legend: B batch, S source / memory positions, T target positions, C / d_model channels.
"""

from __future__ import annotations

import functools
import re

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import Decoder, DecoderLayer, Encoder, EncoderLayer

__all__ = ["blocked_mask", "float_mask", "allowed_mask", "to_torch"]


def blocked_mask(allowed: Tensor) -> Tensor:
    """Our bool mask (True = may attend) in nn.Transformer's convention (True = blocked): its negation."""
    _checks.tensor("allowed", allowed)
    _checks.mask("allowed", allowed, tuple(allowed.shape))
    return ~allowed


def float_mask(allowed: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Our bool mask as an additive float mask: 0 where attention is allowed, -inf where it is blocked."""
    _checks.tensor("allowed", allowed)
    _checks.mask("allowed", allowed, tuple(allowed.shape))
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, float("-inf"))


def allowed_mask(torch_mask: Tensor) -> Tensor:
    """PyTorch's mask (bool, True = blocked; or float, -inf = blocked) in our convention (True = may attend)."""
    _checks.tensor("torch_mask", torch_mask)
    if torch_mask.dtype == torch.bool:
        return ~torch_mask
    if not torch_mask.dtype.is_floating_point:
        raise TypeError(f"`torch_mask` must be a bool or float tensor, got {torch_mask.dtype}")
    return torch_mask != float("-inf")  # a finite float entry is a bias on an allowed score


_ACTIVATIONS = {  # our FeedForward's names -> what PyTorch's layers accept
    "relu": "relu",
    "gelu": "gelu",  # exact (erf) GELU
    # A plain callable: PyTorch treats an nn.GELU module as exact GELU in its fused fast path.
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
}

# Our parameter names -> PyTorch's (applied to every key; the cross-attention's q and kv are stacked separately).
_RENAMES = [
    (r"self_attn\.qkv\.(weight|bias)$", r"self_attn.in_proj_\1"),
    (r"cross_attn\.out_proj\.", "multihead_attn.out_proj."),
    (r"mlp\.fc1\.", "linear1."),
    (r"mlp\.fc2\.", "linear2."),
]


def _torch_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Our state dict under PyTorch's names: [q; k; v] of the cross-attention become one in_proj matrix."""
    theirs = {}
    for key, value in state.items():
        if ".kv_proj." in key:
            continue  # stacked under the q_proj key below
        if ".q_proj." in key:
            value = torch.cat([value, state[key.replace(".q_proj.", ".kv_proj.")]])  # (3C, C) or (3C,)
            key = re.sub(r"cross_attn\.q_proj\.(weight|bias)$", r"multihead_attn.in_proj_\1", key)
        for pattern, replacement in _RENAMES:
            key = re.sub(pattern, replacement, key)
        theirs[key] = value
    return theirs


def _torch_layer(ours: EncoderLayer | DecoderLayer) -> nn.Module:
    """An empty PyTorch layer of the same sizes and order as `ours` (batch_first, LayerNorm eps 1e-5)."""
    attn, fc1 = ours.self_attn, ours.mlp.fc1
    kind = nn.TransformerEncoderLayer if isinstance(ours, EncoderLayer) else nn.TransformerDecoderLayer
    if isinstance(ours, DecoderLayer) and ours.cross_attn.d_memory != attn.d_model:
        raise ValueError(
            f"nn.TransformerDecoderLayer needs d_memory == d_model, got {ours.cross_attn.d_memory} and {attn.d_model}"
        )
    return kind(
        attn.d_model,
        attn.n_heads,
        dim_feedforward=fc1.out_features,
        dropout=ours.dropout.p,
        activation=_ACTIVATIONS[ours.mlp.activation],
        batch_first=True,
        norm_first=ours.norm_first,
    )


def to_torch(ours: EncoderLayer | DecoderLayer | Encoder | Decoder) -> nn.Module:
    """PyTorch's module computing what `ours` computes, with our weights copied (in eval mode, or with dropout 0).

    EncoderLayer -> nn.TransformerEncoderLayer, DecoderLayer -> nn.TransformerDecoderLayer, Encoder / Decoder ->
    nn.TransformerEncoder / nn.TransformerDecoder (with `norm` when ours has a final LayerNorm). All batch_first.
    Call PyTorch's modules with masks in its convention: `src_key_padding_mask=~padding_mask`,
    `tgt_mask=blocked_mask(causal_mask(T))` (its decoder layer is not causal unless told), ...
    """
    _checks.instance("ours", ours, (EncoderLayer, DecoderLayer, Encoder, Decoder), "one of our layers or stacks")
    if isinstance(ours, Encoder | Decoder):
        layer = _torch_layer(ours.layers[0])
        norm = nn.LayerNorm(layer.norm1.normalized_shape) if isinstance(ours.norm, nn.LayerNorm) else None
        if isinstance(ours, Encoder):
            theirs = nn.TransformerEncoder(layer, len(ours.layers), norm=norm, enable_nested_tensor=False)
        else:
            theirs = nn.TransformerDecoder(layer, len(ours.layers), norm=norm)
    else:
        theirs = _torch_layer(ours)
    theirs.load_state_dict(_torch_state(ours.state_dict()))  # strict: every parameter has a counterpart
    return theirs.train(ours.training)
