"""Tests of course_lib.position (Lesson 03) against direct formulas, complex arithmetic and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.position import (
    LearnedPositionEmbedding,
    PositionEncoding,
    apply_rope,
    offset_dot_products,
    permutation_equivariance_error,
    rope_angles,
    rope_rotate_half,
    sinusoidal_position_encoding,
)


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ------------------------------------------------------------------------------------------------------------
# sinusoidal table
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("max_len", "d_model", "base"), [(1, 2, 10000.0), (17, 8, 10000.0), (50, 6, 100.0)])
def test_sinusoidal_matches_per_element_formula(max_len: int, d_model: int, base: float) -> None:
    pe = sinusoidal_position_encoding(max_len, d_model, base)
    assert pe.shape == (max_len, d_model)
    assert pe.dtype == torch.float32
    for p in range(max_len):
        for j in range(d_model):
            i = j // 2
            angle = p / base ** (2 * i / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[p, j].item() == pytest.approx(expected, abs=1e-6), (p, j)


def test_sinusoidal_first_row_and_bounds() -> None:
    pe = sinusoidal_position_encoding(200, 32)
    assert torch.equal(pe[0, 0::2], torch.zeros(16))  # sin(0)
    assert torch.equal(pe[0, 1::2], torch.ones(16))  # cos(0)
    assert pe.abs().max().item() <= 1.0
    # Each (sin, cos) pair lies on the unit circle, so every row has norm sqrt(d_model / 2).
    torch.testing.assert_close(pe.norm(dim=-1), torch.full((200,), 4.0))


def test_sinusoidal_rows_are_distinct() -> None:
    pe = sinusoidal_position_encoding(512, 64)
    distances = torch.cdist(pe.double(), pe.double())  # (512, 512)
    off_diagonal = distances + torch.eye(512, dtype=torch.float64) * 1e9
    assert off_diagonal.min().item() > 0.1


@pytest.mark.parametrize("k", [1, 3, 10, 37])
def test_sinusoidal_dot_product_depends_only_on_offset(k: int) -> None:
    d_model, base = 16, 10000.0
    pe = sinusoidal_position_encoding(120, d_model, base).double()
    dots = (pe[:-k] * pe[k:]).sum(-1)  # <PE[p], PE[p+k]> for every p
    # sin a sin b + cos a cos b = cos(a - b): the dot product is sum_i cos(k * w_i), whatever p is.
    expected = sum(math.cos(k / base ** (2 * i / d_model)) for i in range(d_model // 2))
    torch.testing.assert_close(dots, torch.full_like(dots, expected), atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((10, 7), "d_model"),
        ((0, 8), "max_len"),
        ((10, 0), "d_model"),
        ((-3, 8), "max_len"),
        ((4, 8, 0.0), "base"),
    ],
)
def test_sinusoidal_rejects_bad_arguments(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sinusoidal_position_encoding(*args)


# ------------------------------------------------------------------------------------------------------------
# PositionEncoding and LearnedPositionEmbedding modules
# ------------------------------------------------------------------------------------------------------------


def test_position_encoding_buffer_and_forward() -> None:
    module = PositionEncoding(d_model=6, max_len=10)
    state = module.state_dict()
    assert list(state) == ["pe"]
    assert list(module.parameters()) == []
    torch.testing.assert_close(state["pe"], sinusoidal_position_encoding(10, 6), atol=0, rtol=0)

    for shape in [(7, 6), (3, 7, 6), (2, 3, 10, 6)]:
        x = _randn(*shape, dtype=torch.float32)
        out = module(x)
        assert out.shape == x.shape
        T = shape[-2]
        # every batch element gets the same table rows added
        torch.testing.assert_close(out - x, sinusoidal_position_encoding(10, 6)[:T].expand(shape))


def test_position_encoding_errors() -> None:
    module = PositionEncoding(d_model=4, max_len=5)
    with pytest.raises(ValueError, match="max_len=5"):
        module(torch.zeros(2, 6, 4))
    with pytest.raises(ValueError, match="d_model"):
        PositionEncoding(d_model=3, max_len=5)


def test_learned_position_embedding() -> None:
    a = LearnedPositionEmbedding(8, 12, generator=torch.Generator().manual_seed(1))
    b = LearnedPositionEmbedding(8, 12, generator=torch.Generator().manual_seed(1))
    assert list(a.state_dict()) == ["embedding.weight"]
    torch.testing.assert_close(a.embedding.weight, b.embedding.weight, atol=0, rtol=0)
    assert a.embedding.weight.std().item() == pytest.approx(0.02, rel=0.3)

    x = _randn(3, 5, 8, dtype=torch.float32)
    out = a(x)
    torch.testing.assert_close(out, x + a.embedding.weight[:5])
    out.sum().backward()
    # positions 0..4 were used by 3 batch elements each, positions 5.. not at all
    torch.testing.assert_close(a.embedding.weight.grad[:5], torch.full((5, 8), 3.0))
    assert a.embedding.weight.grad[5:].abs().max().item() == 0
    with pytest.raises(ValueError, match="max_len=12"):
        a(torch.zeros(1, 13, 8))


# ------------------------------------------------------------------------------------------------------------
# RoPE
# ------------------------------------------------------------------------------------------------------------


def _rope_by_complex_numbers(x: torch.Tensor, base: float) -> torch.Tensor:
    """Independent reference: pair (a, b) is the complex number a + ib, multiplied by e^(i p theta_i)."""
    T, D = x.shape[-2], x.shape[-1]
    theta = torch.tensor([base ** (-2 * i / D) for i in range(D // 2)], dtype=torch.float64)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    rotation = torch.polar(torch.ones_like(angles), angles)  # (T, D/2) complex
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())  # (..., T, D/2)
    return torch.view_as_real(z * rotation).reshape(x.shape)  # (..., T, D)


@pytest.mark.parametrize(("shape", "base"), [((5, 2), 10000.0), ((2, 7, 8), 10000.0), ((2, 3, 9, 16), 500.0)])
def test_rope_matches_complex_multiplication(shape: tuple[int, ...], base: float) -> None:
    x = _randn(*shape, dtype=torch.float32)
    out = apply_rope(x, base)
    assert out.shape == x.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), _rope_by_complex_numbers(x, base), atol=1e-5, rtol=1e-5)
    # position 0 is not rotated
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :])


def test_rope_preserves_norms_of_each_pair() -> None:
    x = _randn(3, 20, 12)
    out = apply_rope(x)
    pair_norms = lambda t: t.reshape(3, 20, 6, 2).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pair_norms(out), pair_norms(x))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))


def test_rope_angles_table() -> None:
    angles = rope_angles(4, 6, base=100.0)
    expected = torch.tensor([[p * 100.0 ** (-2 * i / 6) for i in range(3)] for p in range(4)])
    torch.testing.assert_close(angles, expected)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(0, 30),
    n=st.integers(0, 30),
    shift=st.integers(0, 30),
    half_d=st.integers(1, 8),
    seed=st.integers(0, 10_000),
)
def test_rope_scores_depend_only_on_relative_offset(m: int, n: int, shift: int, half_d: int, seed: int) -> None:
    D = 2 * half_d
    q, k = _randn(D, seed=seed), _randn(D, seed=seed + 1)
    T = max(m, n) + shift + 1
    queries = q.expand(T, D)  # the same query vector at every position
    keys = k.expand(T, D)
    rq, rk = apply_rope(queries), apply_rope(keys)
    score = rq[m] @ rk[n]
    shifted = rq[m + shift] @ rk[n + shift]
    assert score.item() == pytest.approx(shifted.item(), abs=1e-9 * (1 + q.norm() * k.norm()).item())


def test_rotate_half_is_a_channel_permutation_of_interleaved() -> None:
    D = 8
    x = _randn(2, 6, D, dtype=torch.float32)
    # interleaved position 2i holds half-layout channel i, position 2i+1 holds channel i + D/2
    perm = torch.tensor([c for i in range(D // 2) for c in (i, i + D // 2)])
    assert perm.tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    torch.testing.assert_close(apply_rope(x[..., perm]), rope_rotate_half(x)[..., perm])
    # applied to the same channels, the two layouts disagree (D >= 4, T >= 2)
    assert (apply_rope(x) - rope_rotate_half(x)).abs().max().item() > 0.1
    # with one pair (D = 2) the two layouts coincide
    y = _randn(5, 2, dtype=torch.float32)
    torch.testing.assert_close(apply_rope(y), rope_rotate_half(y))


def test_rope_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="at least 2"):
        apply_rope(torch.zeros(4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        apply_rope([[1.0, 2.0]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="even"):
        rope_rotate_half(torch.zeros(2, 3, 7))


# ------------------------------------------------------------------------------------------------------------
# demonstration helpers
# ------------------------------------------------------------------------------------------------------------


def test_offset_dot_products_against_closed_form_and_loops() -> None:
    d_model = 10
    pe = sinusoidal_position_encoding(40, d_model).double()
    offsets = [-5, -1, 0, 2, 7]
    expected = torch.tensor(
        [sum(math.cos(k / 10000.0 ** (2 * i / d_model)) for i in range(d_model // 2)) for k in offsets],
        dtype=torch.float64,
    )
    torch.testing.assert_close(offset_dot_products(pe, offsets), expected)
    torch.testing.assert_close(offset_dot_products(pe, torch.tensor(offsets), reference=20), expected)

    # a random table: the mean over p of pe[p] . pe[p+k], computed with explicit loops
    table = _randn(9, 4)
    values = offset_dot_products(table)
    assert values.shape == (17,)
    for index, k in enumerate(range(-8, 9)):
        pairs = [(p, p + k) for p in range(9) if 0 <= p + k < 9]
        mean = sum(float(table[p] @ table[r]) for p, r in pairs) / len(pairs)
        assert values[index].item() == pytest.approx(mean)
    with pytest.raises(ValueError, match="offset"):
        offset_dot_products(table, [9])
    with pytest.raises(ValueError, match="outside"):
        offset_dot_products(table, [3], reference=7)


def _plain_attention(x: torch.Tensor) -> torch.Tensor:
    weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)  # (..., T, T)
    return weights @ x  # (..., T, C)


def test_permutation_equivariance_demo() -> None:
    x = _randn(2, 7, 8, dtype=torch.float32)
    assert permutation_equivariance_error(_plain_attention, x, seed=3) < 1e-5
    encoder = PositionEncoding(8, 16)
    with_positions = lambda t: _plain_attention(encoder(t))  # noqa: E731
    assert permutation_equivariance_error(with_positions, x, seed=3) > 0.1
    # an explicit permutation; the identity never shows a difference
    assert permutation_equivariance_error(with_positions, x, perm=torch.arange(7)) == 0.0
    with pytest.raises(ValueError, match="permutation"):
        permutation_equivariance_error(_plain_attention, x, perm=torch.tensor([0, 0, 1, 2, 3, 4, 5]))
