"""Tests of course_lib.modern (Lesson 12) against PyTorch's own RMSNorm, a complex-number RoPE, loops over heads,
published sizes and the bytes of real tensors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import modern
from course_lib.position import apply_rope


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ------------------------------------------------------------------------------------------------------------
# rms_norm


@pytest.mark.parametrize(("shape", "eps", "dtype"), [((4, 16), 1e-6, torch.float32), ((2, 3, 8), 0.1, torch.float64)])
def test_rms_norm_matches_pytorchs_functional_and_module(shape, eps, dtype):
    x, weight = _randn(*shape, dtype=dtype) * 3 + 1, _randn(shape[-1], seed=1, dtype=dtype)
    ours = modern.rms_norm(x, weight, eps)
    torch.testing.assert_close(ours, F.rms_norm(x, shape[-1:], weight, eps))
    module = torch.nn.RMSNorm(shape[-1], eps=eps, dtype=dtype)
    with torch.no_grad():
        module.weight.copy_(weight)
    torch.testing.assert_close(ours, module(x))


def test_rms_norm_keeps_bf16_and_agrees_to_bf16_precision():
    x, weight = _randn(8, 64).bfloat16(), _randn(64, seed=1).bfloat16()
    ours = modern.rms_norm(x, weight)
    assert ours.dtype == torch.bfloat16
    exact = modern.rms_norm(x.double(), weight.double())
    assert (ours.double() - exact).abs().max().item() < 0.05  # bf16 keeps 8 bits: ~0.4 % a rounding
    torch.testing.assert_close(ours, F.rms_norm(x, (64,), weight, 1e-6), atol=0.05, rtol=0.02)


def test_rms_norm_is_layer_norm_of_nothing_but_the_scale():
    x = _randn(5, 12, dtype=torch.float64)
    centred = x - x.mean(dim=-1, keepdim=True)
    ones = torch.ones(12, dtype=torch.float64)
    torch.testing.assert_close(modern.rms_norm(centred, ones, 1e-5), F.layer_norm(x, (12,), eps=1e-5))
    out = modern.rms_norm(x, ones, 1e-12)  # with a negligible eps, every row has a root mean square of 1
    torch.testing.assert_close(out.pow(2).mean(dim=-1), torch.ones(5, dtype=torch.float64))


def test_rms_norm_keeps_eps_inside_the_root_and_leaves_its_input():
    x = torch.zeros(2, 4)
    assert torch.equal(modern.rms_norm(x, torch.ones(4)), torch.zeros(2, 4))  # 0 / sqrt(eps), not NaN
    y = _randn(3, 4)
    before = y.clone()
    modern.rms_norm(y, torch.ones(4))
    assert torch.equal(y, before)


def test_rms_norm_module_is_the_function_with_a_gain_at_one():
    norm = modern.RMSNorm(16, eps=1e-6)
    assert [name for name, _ in norm.named_parameters()] == ["weight"] and torch.equal(norm.weight, torch.ones(16))
    x = _randn(3, 5, 16)
    torch.testing.assert_close(norm(x), modern.rms_norm(x, norm.weight, 1e-6))


def test_rms_norm_refuses_bad_arguments():
    with pytest.raises(ValueError, match="weight"):
        modern.rms_norm(torch.ones(2, 4), torch.ones(3))
    with pytest.raises(ValueError, match="eps"):
        modern.rms_norm(torch.ones(2, 4), torch.ones(4), eps=0)


# ------------------------------------------------------------------------------------------------------------
# RoPE inside attention


def _complex_rope(x: torch.Tensor, base: float = 10000.0, start: int = 0) -> torch.Tensor:
    """RoPE written as complex multiplication: pair (a, b) is a + ib, turned by e^(i p θ_i)."""
    T, D = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angles = torch.arange(start, start + T, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).reshape(x.shape)


def _causal_attention(q, k, v):
    T, D = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return scores.softmax(dim=-1) @ v


@pytest.mark.parametrize(("T", "D", "base"), [(1, 2, 10000.0), (7, 8, 10000.0), (12, 16, 500.0)])
def test_rotate_pairs_is_the_complex_rotation_and_lesson_03s_apply_rope(T, D, base):
    x = _randn(2, 3, T, D, dtype=torch.float64)
    cos, sin = modern.rope_cos_sin(T, D, base, torch.float64)
    ours = modern.rotate_pairs(x, cos, sin)
    torch.testing.assert_close(ours, _complex_rope(x, base))
    torch.testing.assert_close(ours, apply_rope(x, base))


def test_rope_attention_matches_complex_rope_then_causal_attention():
    q, k, v = (_randn(2, 3, 9, 8, seed=s, dtype=torch.float64) for s in range(3))
    expected = _causal_attention(_complex_rope(q), _complex_rope(k), v)
    torch.testing.assert_close(modern.rope_attention(q, k, v), expected)
    sdpa = F.scaled_dot_product_attention(_complex_rope(q), _complex_rope(k), v, is_causal=True)
    torch.testing.assert_close(modern.rope_attention(q, k, v), sdpa)


@settings(max_examples=25, deadline=None)
@given(start=st.integers(0, 5000), T=st.integers(1, 10), seed=st.integers(0, 1000))
def test_rope_attention_depends_only_on_distances(start, T, seed):
    """Shifting every position by `start` turns each score's two vectors by the same extra angle: nothing changes."""
    q, k, v = (_randn(1, 2, T, 8, seed=seed + s, dtype=torch.float64) for s in range(3))
    shifted = _causal_attention(_complex_rope(q, start=start), _complex_rope(k, start=start), v)
    torch.testing.assert_close(modern.rope_attention(q, k, v), shifted)


def test_rope_attention_leaves_values_unrotated_and_refuses_odd_heads():
    q, k = _randn(1, 1, 6, 6), _randn(1, 1, 6, 6, seed=1)
    v = torch.eye(6)[None, None]  # value n is the unit vector e_n, unrotated: the output is the weights themselves
    weights = modern.rope_attention(q, k, v)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(1, 1, 6))
    assert torch.equal(weights.triu(1), torch.zeros(1, 1, 6, 6))  # causal
    expected = _causal_attention(_complex_rope(q), _complex_rope(k), v.double()).float()
    torch.testing.assert_close(weights, expected)
    with pytest.raises(ValueError, match="channel pairs"):
        modern.rope_attention(_randn(1, 1, 3, 5), _randn(1, 1, 3, 5), _randn(1, 1, 3, 5))


# ------------------------------------------------------------------------------------------------------------
# SwiGLU


def test_swiglu_computes_the_gated_formula():
    torch.manual_seed(0)
    layer = modern.SwiGLU(6, 10)
    assert [n for n, _ in layer.named_parameters()] == ["w1.weight", "w3.weight", "w2.weight"]
    x = _randn(2, 3, 6)
    gate, value = x @ layer.w1.weight.T, x @ layer.w3.weight.T
    expected = (gate * torch.sigmoid(gate) * value) @ layer.w2.weight.T
    torch.testing.assert_close(layer(x), expected)
    with_bias = modern.SwiGLU(6, 10, bias=True)
    assert sorted(n for n, _ in with_bias.named_parameters() if n.endswith("bias")) == ["w1.bias", "w2.bias", "w3.bias"]


@pytest.mark.parametrize(("d_model", "multiple_of", "published"), [(4096, 256, 11008), (768, 1, 2048)])
def test_swiglu_hidden_gives_published_widths(d_model, multiple_of, published):
    # Llama 2 7B's feed-forward is 11,008 wide (Meta's released configuration); Shazeer (2020) gave T5-base's
    # GLU variants d_ff = 2,048 instead of 3,072 to keep the parameters.
    assert modern.swiglu_hidden(d_model, multiple_of) == published


@given(d=st.integers(1, 5000))
def test_swiglu_hidden_keeps_the_parameter_count_of_a_4x_mlp(d):
    h = modern.swiglu_hidden(d)
    assert 8 * d * d - 3 * d < 3 * d * h <= 8 * d * d  # int(8d/3): within one column of each matrix


# ------------------------------------------------------------------------------------------------------------
# repeat_kv and the KV cache


def _loop_repeat(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Query head h reads key/value head h // n_rep: one head at a time."""
    return torch.stack([x[:, h // n_rep] for h in range(x.shape[1] * n_rep)], dim=1)


@pytest.mark.parametrize(("H_kv", "n_rep"), [(1, 1), (1, 4), (2, 3), (4, 2)])
def test_repeat_kv_matches_a_loop_over_query_heads(H_kv, n_rep):
    x = _randn(2, H_kv, 5, 3)
    out = modern.repeat_kv(x, n_rep)
    assert torch.equal(out, _loop_repeat(x, n_rep))
    assert torch.equal(out, torch.repeat_interleave(x, n_rep, dim=1))
    if n_rep == 1:
        assert out is x


def test_repeat_kv_is_not_an_interleaving():
    x = torch.arange(2.0).view(1, 2, 1, 1)  # heads 0 and 1
    assert modern.repeat_kv(x, 2).flatten().tolist() == [0.0, 0.0, 1.0, 1.0]
    assert x.repeat(1, 2, 1, 1).flatten().tolist() == [0.0, 1.0, 0.0, 1.0]  # the mistake the grader names


def test_kv_cache_bytes_by_hand_and_published_shapes():
    assert modern.kv_cache_bytes(modern.GPT2_SMALL, 1024) == 2 * 12 * 12 * 64 * 1024 * 2 == 37_748_736
    assert modern.kv_cache_bytes(modern.LLAMA2_7B, 4096) == 2**31  # 2 GiB
    assert modern.kv_cache_bytes(modern.LLAMA3_8B, 4096) == 2**29  # a quarter: 8 instead of 32 KV heads
    assert modern.kv_cache_bytes(modern.LLAMA2_7B, 10, batch_size=3, bytes_per_value=4) == 2 * 32 * 32 * 128 * 120
    assert (modern.LLAMA3_8B.n_layers, modern.LLAMA3_8B.n_heads, modern.LLAMA3_8B.d_head) == (32, 32, 128)


def test_kv_cache_bytes_is_what_real_cache_tensors_hold():
    shape = modern.AttentionShape("toy", n_layers=3, n_heads=4, n_kv_heads=2, d_head=8, context_length=16)
    cache = [torch.zeros(2, 5, shape.n_kv_heads, 11, shape.d_head, dtype=torch.bfloat16) for _ in range(3)]  # k, v
    held = sum(t.numel() * t.element_size() for t in cache)
    assert modern.kv_cache_bytes(shape, seq_len=11, batch_size=5) == held


# ------------------------------------------------------------------------------------------------------------
# ModernAttention and ModernBlock


def test_modern_block_is_the_pre_norm_formula_by_hand():
    torch.manual_seed(0)
    block = modern.ModernBlock(16, 4, 2, 24, qk_norm=True, eps=1e-5, rope_base=500.0).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = _randn(2, 5, 16)
    with torch.no_grad():
        h = x + block.attn(F.rms_norm(x, (16,), block.ln1.weight, 1e-5))
        expected = h + block.mlp(F.rms_norm(h, (16,), block.ln2.weight, 1e-5))
        torch.testing.assert_close(block(x), expected)
    assert block.attn.rope_base == 500.0 and block.ln1.eps == 1e-5 and block.attn.qk_norm
    assert sorted(dict(block.named_parameters())) == [
        "attn.k_norm.weight", "attn.out_proj.weight", "attn.q_norm.weight", "attn.qkv.weight", "ln1.weight",
        "ln2.weight", "mlp.w1.weight", "mlp.w2.weight", "mlp.w3.weight",
    ]  # fmt: skip


def test_modern_attention_without_qk_norm_has_no_norms_and_refuses_heads_that_do_not_divide():
    layer = modern.ModernAttention(16, 4, 2)
    assert not hasattr(layer, "q_norm") and not hasattr(layer, "k_norm")
    assert (layer.n_heads, layer.n_kv_heads, layer.d_head) == (4, 2, 4) and layer.qkv.bias is None
    with pytest.raises(ValueError, match="n_kv_heads"):
        modern.ModernAttention(16, 4, 3)
    with pytest.raises(ValueError, match="RoPE"):
        modern.ModernAttention(12, 4, 2)  # D = 3: no channel pairs


@pytest.mark.parametrize("P", [1, 4])
def test_after_a_cache_the_new_positions_are_rotated_where_they_are(P):
    """The output for the T new positions after a cache of P equals the last T rows of the whole sequence's, and the
    cache then holds the whole sequence's rotated keys (what a no-cache call computes for them)."""
    torch.manual_seed(1)
    layer = modern.ModernAttention(16, 4, 2, qk_norm=True, rope_base=100.0).eval()
    x = _randn(2, P + 3, 16, seed=2)
    from course_lib.multihead import LayerCache

    with torch.no_grad():
        whole = layer(x)
        cache = LayerCache(keys=torch.zeros(2, 2, 0, 4), values=torch.zeros(2, 2, 0, 4))
        layer(x[:, :P], cache=cache)
        torch.testing.assert_close(layer(x[:, P:], cache=cache), whole[:, P:], atol=1e-6, rtol=1e-5)
        everything = LayerCache(keys=torch.zeros(2, 2, 0, 4), values=torch.zeros(2, 2, 0, 4))
        layer(x, cache=everything)
    torch.testing.assert_close(cache.keys, everything.keys)
    torch.testing.assert_close(cache.values, everything.values)
    assert cache.keys.shape == (2, 2, P + 3, 4)
