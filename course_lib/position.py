"""Position: how a transformer learns where each token sits (Lesson 03).

Attention treats its input as a set: shuffle the tokens and the outputs shuffle the same way
(`permutation_equivariance_error` measures this). Order has to be added to the input, and this module holds
the three ways the course compares, side by side:

    sinusoidal_position_encoding  a fixed table of sines and cosines (Vaswani et al., 2017), added to x
    PositionEncoding              that table in a buffer, as an nn.Module
    LearnedPositionEmbedding      one trainable vector per position (GPT-2's `wpe`), added to x
    apply_rope                    rotary embedding (Su et al., 2021): rotate channel pairs of q and k instead
    rope_rotate_half              the same rotation on the "rotate half" channel layout (GPT-NeoX, Llama)

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from course_lib import _checks

__all__ = [
    "sinusoidal_position_encoding",
    "PositionEncoding",
    "LearnedPositionEmbedding",
    "rope_angles",
    "apply_rope",
    "rope_rotate_half",
    "offset_dot_products",
    "permutation_equivariance_error",
]


# ------------------------------------------------------------------------------------------------------------
# Absolute positions: added to the token embeddings
# ------------------------------------------------------------------------------------------------------------


def sinusoidal_position_encoding(max_len: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The sinusoidal table: PE[p, 2i] = sin(p / base**(2i/d_model)), PE[p, 2i+1] = cos(same).

    Lesson 03, exercise `sinusoidal_position_encoding`. Returns float32 (max_len, d_model); positions from 0.
    """
    _checks.positive_int("max_len", max_len)
    _checks.positive_even("d_model", d_model, "sin/cos pairs")
    _checks.positive_number("base", base)
    # float64 for the angles: at p ~ 10^4 a float32 angle would already be off in the third decimal.
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,)
    angle = position / base ** (two_i / d_model)  # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)  # even channels
    pe[:, 1::2] = torch.cos(angle)  # odd channels, same frequency as the channel before
    return pe.float()


class PositionEncoding(nn.Module):
    """Adds the sinusoidal table to its input: x (..., T, d_model) -> x + pe[:T].

    Lesson 03, exercise `PositionEncoding` (argument order as in the toy model of Lesson 08). The table is a
    persistent buffer: it moves with `.to(device)` and is saved in the state dict, but it is not trained.
    The models of lessons 07-08 check their inputs before calling it: it checks only what its contract says.
    """

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_position_encoding(max_len, d_model))  # (max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        T = x.shape[-2]
        if self.max_len < T:  # the table has no row for those positions
            raise ValueError(f"`x` has T={T}, more than max_len={self.max_len}")
        return x + self.pe[:T]  # (..., T, d_model) + (T, d_model)


class LearnedPositionEmbedding(nn.Module):
    """One trainable vector per position, added to x (..., T, d_model) — GPT-2's `wpe`.

    Lesson 03 (learned positions). `init_std` 0.02 is Hugging Face GPT-2's `initializer_range` (OpenAI's original
    code drew the position table with 0.01); `generator` makes the init repeatable.
    Unlike the sinusoidal table it cannot say anything about positions >= max_len: it never saw them.
    """

    def __init__(
        self, d_model: int, max_len: int, init_std: float = 0.02, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        _checks.positive_ints(d_model=d_model, max_len=max_len)
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)  # (max_len, d_model) table of positions
        nn.init.normal_(self.embedding.weight, mean=0.0, std=init_std, generator=generator)

    def forward(self, x: Tensor) -> Tensor:
        _checks.tensor("x", x, "..., T<=max_len, d_model", d_model=self.d_model, max_len=self.max_len)
        positions = torch.arange(x.shape[-2], device=x.device)  # (T,)
        return x + self.embedding(positions)  # (..., T, d_model) + (T, d_model)


# ------------------------------------------------------------------------------------------------------------
# Rotary position embedding: rotate pairs of channels of q and k by an angle proportional to the position
# ------------------------------------------------------------------------------------------------------------


def rope_angles(T: int, D: int, base: float = 10000.0, dtype: torch.dtype = torch.float32) -> Tensor:
    """Rotation angles p * base**(-2i/D) for positions p < T and pairs i < D/2, shape (T, D/2). Lesson 03."""
    _checks.positive_int("T", T)
    _checks.positive_even("D", D, "channel pairs")
    _checks.positive_number("base", base)
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    position = torch.arange(T, dtype=torch.float64)  # (T,)
    return torch.outer(position, inv_freq).to(dtype)  # (T, D/2)


def apply_rope(x: Tensor, base: float = 10000.0) -> Tensor:
    """Rotate each interleaved pair (x[..., 2i], x[..., 2i+1]) at position p by p * base**(-2i/D).

    Lesson 03, exercise `apply_rope`. x (..., T, D) -> (..., T, D). Applied to q and k (not v), it makes
    <rope(q)_m, rope(k)_n> depend on the positions only through m - n.
    """
    _checks.tensor("x", x, "..., T, D")
    _checks.positive_even("x.shape[-1]", x.shape[-1], "channel pairs")
    angle = rope_angles(x.shape[-2], x.shape[-1], base, torch.float64)  # (T, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)  # (T, D/2) each
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, D/2): first and second member of each pair
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, D/2, 2)
    return rotated.flatten(-2)  # (..., T, D): pairs back in interleaved order


def rope_rotate_half(x: Tensor, base: float = 10000.0) -> Tensor:
    """RoPE on the "rotate half" layout: channel i is paired with channel i + D/2 (GPT-NeoX, HF Llama).

    Lesson 03, for comparison. x (..., T, D) -> (..., T, D). It equals `apply_rope` after reordering the
    channels as [0, D/2, 1, D/2+1, ...]; without that reordering the two give different results.
    """
    _checks.tensor("x", x, "..., T, D")
    _checks.positive_even("x.shape[-1]", x.shape[-1], "channel pairs")
    angle = rope_angles(x.shape[-2], x.shape[-1], base, torch.float64)  # (T, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)  # (T, D/2) each
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]  # (..., T, D/2): first and second half of the channels
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, D)


# ------------------------------------------------------------------------------------------------------------
# Helpers for the lesson's demonstrations
# ------------------------------------------------------------------------------------------------------------


def offset_dot_products(
    pe: Tensor, offsets: Sequence[int] | Tensor | None = None, reference: int | None = None
) -> Tensor:
    """Dot products pe[p] . pe[p + k] for each offset k: the data of the dot-product-vs-distance plot.

    Lesson 03. pe (L, C) -> (K,) float. With `reference=None` each value is the mean over all positions p
    where both rows exist (for the sinusoidal table every p gives the same value); with `reference=p0` it is
    pe[p0] . pe[p0 + k]. `offsets` defaults to every offset -(L-1) .. L-1; they may be negative.
    """
    _checks.tensor("pe", pe, "L, C")
    L = pe.shape[0]
    if offsets is None:
        offsets = range(-(L - 1), L)
    offsets = [int(k) for k in (offsets.tolist() if isinstance(offsets, Tensor) else offsets)]
    if any(abs(k) >= L for k in offsets):
        raise ValueError(f"every offset must satisfy |k| < max_len={L}, got {offsets}")
    if reference is not None:
        _checks.int_between("reference", reference, 0, L - 1, note="a position of `pe`")
    values = []
    for k in offsets:
        if reference is None:
            first, second = (pe[: L - k], pe[k:]) if k >= 0 else (pe[-k:], pe[: L + k])  # (L-|k|, C) each
            values.append((first * second).sum(-1).mean())
        else:
            if not 0 <= reference + k < L:
                raise ValueError(f"reference + offset = {reference + k} is outside 0..{L - 1}")
            values.append(pe[reference] @ pe[reference + k])  # (C,) @ (C,) -> ()
    return torch.stack(values)  # (K,)


def permutation_equivariance_error(
    fn: Callable[[Tensor], Tensor], x: Tensor, perm: Tensor | None = None, seed: int = 0
) -> float:
    """max |fn(x)[perm] - fn(x[perm])| with tokens permuted along dim -2; ~0 means fn ignores order.

    Lesson 03 (attention is permutation-equivariant). x (..., T, C). `perm` defaults to a random permutation
    of T drawn with `seed`. Attention alone gives ~1e-7; adding a position encoding first makes it large.
    """
    _checks.tensor("x", x, "..., T, C")
    T = x.shape[-2]
    if perm is None:
        perm = torch.randperm(T, generator=torch.Generator().manual_seed(seed))
    if sorted(perm.tolist()) != list(range(T)):
        raise ValueError(f"`perm` must be a permutation of 0..{T - 1}, got {perm.tolist()}")
    with torch.no_grad():
        permuted_after = fn(x)[..., perm, :]  # (..., T, C)
        permuted_before = fn(x[..., perm, :])  # (..., T, C)
    return (permuted_after - permuted_before).abs().max().item()
