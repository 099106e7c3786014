"""Attention, one step at a time (Lesson 04).

The versions stand side by side, each adding one idea to the one before:

    simple_self_attention       softmax(x xᵀ) x: no weights, no scaling
    scaled_dot_product_attention   q kᵀ / sqrt(dk), an optional mask, returns the weights too
    SelfAttention               trainable W_query, W_key, W_value
    CausalSelfAttention         + a causal mask built for the actual length, + dropout on the weights
    CrossAttention              queries from the decoder, keys and values from the encoder's memory

and `train_step`, one optimisation step of a model whose logits are (B, T, V): how the lesson's toy attention
models (course_lib.attention_toys) learn.

Masks follow PyTorch's convention: a bool tensor where True means "may attend". Masked scores become -inf
before the softmax, so they get exactly zero weight.

Shape legend: B batch, T time (Tq queries, Tk keys), H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks

__all__ = [
    "simple_self_attention",
    "attention_weights",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "SelfAttention",
    "CausalSelfAttention",
    "CrossAttention",
    "train_step",
]


# ------------------------------------------------------------------------------------------------------------
# Functions
# ------------------------------------------------------------------------------------------------------------


def simple_self_attention(x: Tensor) -> Tensor:
    """Every token becomes a weighted average of all tokens, weighted by dot-product similarity.

    Lesson 04, exercise `simple_self_attention`. No trainable weights and no scaling: the token vectors play
    the roles of query, key and value at once.  x: (T, C) -> (T, C).
    """
    _checks.tensor("x", x, "T, C")
    scores = x @ x.T  # (T, C) @ (C, T) -> (T, T)
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1
    return weights @ x  # (T, T) @ (T, C) -> (T, C)


def attention_weights(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(q kᵀ / sqrt(dk)) with masked scores set to -inf: the weights before they multiply V.

    Lesson 04 (used by every attention module of lessons 04-10, inside their forward: it checks nothing, and
    `scaled_dot_product_attention` checks the arguments a learner passes).
    q: (..., Tq, dk), k: (..., Tk, dk), mask: bool, broadcastable to (..., Tq, Tk) -> (..., Tq, Tk).
    """
    scores = q @ k.transpose(-2, -1)  # (..., Tq, dk) @ (..., dk, Tk) -> (..., Tq, Tk)
    # Without the 1/sqrt(dk) the scores' variance grows with dk and the softmax saturates to one-hot rows.
    scores = scores / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # exp(-inf) = 0: masked keys get zero weight
    return torch.softmax(scores, dim=-1)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention, returning the output and the weights (for heatmaps).

    Lesson 04, exercise `scaled_dot_product_attention`. Matches `F.scaled_dot_product_attention` (which
    returns only the output). A query row whose keys are all masked is outside the contract (NaN weights).
    q: (..., Tq, dk), k: (..., Tk, dk), v: (..., Tk, dv), mask: bool broadcastable to (..., Tq, Tk),
    True = keep -> out (..., Tq, dv), weights (..., Tq, Tk).
    """
    _checks.tensors(q=(q, "..., Tq, dk"), k=(k, "..., Tk, dk"), v=(v, "..., Tk, dv"))
    _checks.mask("mask", mask, (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2]))
    weights = attention_weights(q, k, mask)  # (..., Tq, Tk)
    return weights @ v, weights  # (..., Tq, Tk) @ (..., Tk, dv) -> (..., Tq, dv)


def causal_mask(T: int, device: torch.device | str | None = None) -> Tensor:
    """Bool (T, T) mask, True on and below the diagonal: position t may attend to positions 0..t only.

    Lesson 04, exercise `causal_mask`. Build it for the actual length of each batch, not once for the maximum.
    """
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)


def padding_mask(lengths: Tensor | list[int], T: int | None = None) -> Tensor:
    """Key-padding mask (B, T): True at the first `lengths[b]` positions (real tokens), False at padding.

    Lesson 04, section "padding mask". Add the broadcast dimensions for the scores you mask:
    `mask[:, None, :]` for (B, Tq, Tk) and `mask[:, None, None, :]` for (B, H, Tq, Tk). Passing the (B, T)
    mask as it is would line B up with Tq, a silent bug when B == Tq.
    lengths: (B,) ints, T defaults to max(lengths) -> (B, T) bool.
    """
    lengths = torch.as_tensor(lengths)  # (B,)
    ints = not (lengths.dtype.is_floating_point or lengths.dtype == torch.bool)
    if lengths.dim() != 1 or not ints or len(lengths) == 0 or lengths.min() < 1:
        raise ValueError(f"`lengths` must be a non-empty 1-D sequence of ints >= 1, got {lengths.tolist()}")
    T = int(lengths.max()) if T is None else T
    _checks.int_between("T", T, int(lengths.max()), note="the longest of `lengths`")
    positions = torch.arange(T, device=lengths.device)  # (T,)
    return positions[None, :] < lengths[:, None]  # (1, T) < (B, 1) -> (B, T)


# ------------------------------------------------------------------------------------------------------------
# Modules: each forward can return the attention weights for plotting with `need_weights=True`.
# ------------------------------------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    """Self-attention with trainable query, key and value projections (one head, not causal).

    Lesson 04, exercise `SelfAttention`. x: (B, T, d_in) -> (B, T, d_out), or (out, weights (B, T, T)).
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        _checks.positive_ints(d_in=d_in, d_out=d_out)
        self.d_in, self.d_out = d_in, d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x: (B, T, d_in); mask: optional bool broadcastable to (B, T, T), True = keep."""
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)  # each (B, T, d_out)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, T, d_out), (B, T, T)
        return (out, weights) if need_weights else out


class CausalSelfAttention(nn.Module):
    """SelfAttention + a causal mask (no peeking at later tokens) + dropout on the attention weights.

    Lesson 04, exercise `CausalSelfAttention`. The mask is built per call for the actual T, so the state dict
    holds only the three linears and any T <= context_length works.
    x: (B, T, d_in) -> (B, T, d_out), or (out, weights (B, T, T)) where weights are what multiplied V.
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float = 0.0, qkv_bias: bool = False
    ) -> None:
        super().__init__()
        _checks.positive_ints(d_in=d_in, d_out=d_out, context_length=context_length)
        _checks.probability("dropout", dropout)
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)  # new: randomly drops attention weights while training

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x: (B, T, d_in); mask: optional bool (e.g. key padding) broadcastable to (B, T, T), True = keep."""
        T = x.shape[1]
        if self.context_length < T:  # lesson 04's contract, though the mask would fit any T
            raise ValueError(f"`x` has T={T}, more than context_length={self.context_length}")
        allowed = causal_mask(T, device=x.device)  # (T, T), new: built for this call's T
        if mask is not None:
            allowed = allowed & mask  # (B, T, T): causal and not padding
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)  # each (B, T, d_out)
        weights = attention_weights(q, k, allowed)  # (B, T, T)
        weights = self.dropout(weights)  # the returned weights are the ones that multiply V
        out = weights @ v  # (B, T, T) @ (B, T, d_out) -> (B, T, d_out)
        return (out, weights) if need_weights else out


class CrossAttention(nn.Module):
    """Encoder-decoder attention: queries from the decoder `x`, keys and values from the encoder `memory`.

    Lesson 04, exercise `CrossAttention`. Scores are scaled by sqrt(d_model); the output has one row per
    decoder position (Tq), whatever the memory length Tk.
    x: (B, Tq, d_model), memory: (B, Tk, d_memory) -> (B, Tq, d_model), or (out, weights (B, Tq, Tk)).
    """

    def __init__(self, d_model: int, d_memory: int | None = None, qkv_bias: bool = False) -> None:
        super().__init__()
        d_memory = d_model if d_memory is None else d_memory
        _checks.positive_ints(d_model=d_model, d_memory=d_memory)
        self.d_model, self.d_memory = d_model, d_memory
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)  # reads the decoder
        self.W_key = nn.Linear(d_memory, d_model, bias=qkv_bias)  # reads the encoder
        self.W_value = nn.Linear(d_memory, d_model, bias=qkv_bias)  # reads the encoder

    def forward(
        self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """memory_mask: optional bool broadcastable to (B, Tq, Tk), True = keep (e.g. encoder padding)."""
        _checks.tensors(
            x=(x, "B, Tq, d_model"), memory=(memory, "B, Tk, d_memory"), d_model=self.d_model, d_memory=self.d_memory
        )
        _checks.mask("memory_mask", memory_mask, (*x.shape[:2], memory.shape[1]))  # (B, Tq, Tk)
        q = self.W_query(x)  # (B, Tq, d_model)
        k = self.W_key(memory)  # (B, Tk, d_model)
        v = self.W_value(memory)  # (B, Tk, d_model)
        out, weights = scaled_dot_product_attention(q, k, v, memory_mask)  # (B, Tq, d_model), (B, Tq, Tk)
        return (out, weights) if need_weights else out


# ------------------------------------------------------------------------------------------------------------
# Training: one step
# ------------------------------------------------------------------------------------------------------------


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: Tensor, targets: Tensor) -> float:
    """One optimisation step on the mean cross-entropy of every position; returns that loss (before the step).

    Lesson 04, exercise `train_step`. `model(inputs)` gives logits (B, T, V); targets: (B, T) class ids.
    """
    _checks.tensor("targets", targets, "B, T", integer=True)
    optimizer.zero_grad()  # gradients add up across backward() calls: clear the last step's first
    logits = model(inputs)  # (B, T, V)
    _checks.tensors(**{"model(inputs)": (logits, "B, T, V"), "targets": (targets, "B, T")})
    V = logits.shape[-1]
    # F.cross_entropy wants raw logits (it applies log-softmax itself) with the classes in dimension 1:
    # flatten the B*T predictions into one axis.
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))  # (B*T, V), (B*T,) -> ()
    loss.backward()
    optimizer.step()
    return loss.item()
