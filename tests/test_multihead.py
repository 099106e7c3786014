"""Tests of course_lib.multihead (Lesson 05): the four versions agree with each other and with PyTorch; and
lesson 10's cached attention (attend_with_cache, MultiHeadAttention with a LayerCache) equals full attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_lib.attention import CausalSelfAttention, causal_mask, padding_mask
from course_lib.multihead import (
    BatchedMultiHeadAttention,
    LayerCache,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    attend_with_cache,
    benchmark_variants,
    count_parameters,
    from_torch_mha,
    merge_heads,
    multihead_parameter_count,
    split_heads,
    to_torch_mha,
)

ATOL = 1e-5
FAST = settings(max_examples=25, deadline=None)


def _close(a, b, atol=ATOL):
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-4)


# ------------------------------------------------------------------------------------- split / merge


@FAST
@given(
    B=st.integers(1, 3),
    T=st.integers(1, 5),
    H=st.integers(1, 4),
    D=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_split_merge_are_exact_inverses_and_heads_own_their_channels(B, T, H, D, seed):
    x = torch.randn(B, T, H * D, generator=torch.Generator().manual_seed(seed))
    heads = split_heads(x, H)
    assert heads.shape == (B, H, T, D)
    for h in range(H):
        assert torch.equal(heads[:, h], x[..., h * D : (h + 1) * D])
    assert torch.equal(merge_heads(heads), x)
    y = torch.randn(B, H, T, D)
    assert torch.equal(split_heads(merge_heads(y), H), y)


# -------------------------------------------------------------------------- the versions agree


def _three_versions(d_model, n_heads, qkv_bias, context_length=12, seed=0):
    torch.manual_seed(seed)
    wrapper = MultiHeadAttentionWrapper(d_model, d_model, context_length, n_heads, qkv_bias=qkv_bias)
    batched = BatchedMultiHeadAttention.from_wrapper(wrapper)
    fused = MultiHeadAttention.from_batched(batched)
    return wrapper, batched, fused


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_wrapper_batched_fused_and_sdpa_agree(qkv_bias, n_heads):
    wrapper, batched, fused = _three_versions(8, n_heads, qkv_bias)
    sdpa = MultiHeadAttention.from_batched(batched, use_sdpa=True)
    assert isinstance(wrapper.heads[0], CausalSelfAttention) and len(wrapper.heads) == n_heads
    x = torch.randn(3, 7, 8)
    out_w, weights_w = wrapper(x, need_weights=True)
    out_b, weights_b = batched(x, need_weights=True)
    out_f, weights_f = fused(x, need_weights=True)
    assert out_w.shape == (3, 7, 8) and weights_w.shape == (3, n_heads, 7, 7)
    for out, weights in ((out_b, weights_b), (out_f, weights_f)):
        _close(out, out_w)
        _close(weights, weights_w)
    _close(sdpa(x), out_w)
    _close(wrapper(x), out_w)  # need_weights=False returns the output alone


def test_all_versions_have_the_same_parameter_count():
    for qkv_bias in (False, True):
        counts = {count_parameters(m) for m in _three_versions(12, 3, qkv_bias)[:2]}
        assert counts == {multihead_parameter_count(12, qkv_bias=qkv_bias)}
    for n_heads in (1, 2, 4, 8):  # heads regroup channels, they add no parameters
        assert count_parameters(MultiHeadAttention(64, n_heads)) == 4 * 64 * 64 + 4 * 64
    assert count_parameters(MultiHeadAttention(64, 8, bias=False)) == multihead_parameter_count(
        64, qkv_bias=False, out_bias=False
    )
    assert count_parameters(MultiHeadAttention(64, 8, bias=False)) == 4 * 64 * 64


def test_batched_too_long_and_bad_heads():
    with pytest.raises(ValueError, match="T=9.*context_length=8"):
        BatchedMultiHeadAttention(4, 4, 8, 2)(torch.randn(1, 9, 4))
    with pytest.raises(ValueError, match="`d_out`=6.*`n_heads`=4"):
        MultiHeadAttentionWrapper(4, 6, 8, 4)
    with pytest.raises(ValueError, match="`d_model`=10.*`n_heads`=3"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="d_in == d_out"):
        MultiHeadAttention.from_batched(BatchedMultiHeadAttention(4, 6, 8, 2))


# ---------------------------------------------------------------------------- MultiHeadAttention


def test_state_dict_keys_and_fused_layout():
    mha = MultiHeadAttention(16, 4)
    assert list(mha.state_dict()) == ["qkv.weight", "qkv.bias", "out_proj.weight", "out_proj.bias"]
    assert mha.qkv.weight.shape == (48, 16) and mha.out_proj.weight.shape == (16, 16)
    assert list(MultiHeadAttention(16, 4, bias=False).state_dict()) == ["qkv.weight", "out_proj.weight"]


def test_head_h_reads_only_its_rows_of_q_and_k():
    torch.manual_seed(0)
    d_model, n_heads, D = 12, 3, 4
    mha = MultiHeadAttention(d_model, n_heads)
    x = torch.randn(2, 5, d_model)
    _, before = mha(x, need_weights=True)
    with torch.no_grad():  # [q | k | v]: head 1's queries are rows 4:8, its keys rows 12+4 : 12+8
        mha.qkv.weight[D : 2 * D] += 1.0
        mha.qkv.weight[d_model + D : d_model + 2 * D] -= 1.0
    _, after = mha(x, need_weights=True)
    assert not torch.allclose(after[:, 1], before[:, 1])
    assert torch.equal(after[:, [0, 2]], before[:, [0, 2]])


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_torch_multihead_attention(bias, causal):
    torch.manual_seed(1)
    ours = MultiHeadAttention(16, 4, causal=causal, bias=bias)
    theirs = to_torch_mha(ours)
    assert theirs.batch_first
    x = torch.randn(3, 6, 16)
    attn_mask = ~causal_mask(6) if causal else None  # PyTorch: True = NOT allowed
    expected, expected_weights = theirs(x, x, x, attn_mask=attn_mask, average_attn_weights=False)
    out, weights = ours(x, need_weights=True)
    _close(out, expected)
    _close(weights, expected_weights)


def test_matches_torch_with_key_padding_and_causal_mask():
    torch.manual_seed(2)
    ours = MultiHeadAttention(16, 4, causal=True)
    theirs = to_torch_mha(ours)
    x = torch.randn(3, 6, 16)
    keep = padding_mask([6, 4, 2], 6)  # (B, T)
    expected, expected_weights = theirs(
        x, x, x, key_padding_mask=~keep, attn_mask=~causal_mask(6), average_attn_weights=False
    )
    out, weights = ours(x, mask=keep[:, None, None, :], need_weights=True)  # (B, 1, 1, T)
    _close(out, expected)
    _close(weights, expected_weights)
    assert torch.all(weights[1, :, :, 4:] == 0) and torch.all(weights.triu(diagonal=1) == 0)


@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_mha_round_trip(bias):
    torch.manual_seed(3)
    theirs = nn.MultiheadAttention(12, 3, bias=bias, batch_first=True)
    ours = from_torch_mha(theirs, causal=True)
    x = torch.randn(2, 5, 12)
    _close(ours(x), theirs(x, x, x, attn_mask=~causal_mask(5), need_weights=False)[0])
    back = to_torch_mha(ours)
    for key, value in theirs.state_dict().items():
        assert torch.equal(back.state_dict()[key], value)


def test_from_torch_mha_rejects_unsupported():
    with pytest.raises(ValueError, match="kdim"):
        from_torch_mha(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv"):
        from_torch_mha(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(TypeError, match="`theirs`"):
        from_torch_mha(nn.Linear(8, 8))
    with pytest.raises(TypeError, match="`ours`"):
        to_torch_mha(nn.MultiheadAttention(8, 2))


@FAST
@given(
    B=st.integers(1, 3),
    T=st.integers(1, 6),
    H=st.sampled_from([1, 2, 4]),
    causal=st.booleans(),
    mask_kind=st.sampled_from(["none", "keys", "full"]),
    seed=st.integers(0, 2**16),
)
def test_sdpa_path_equals_explicit_path(B, T, H, causal, mask_kind, seed):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    explicit = MultiHeadAttention(8, H, causal=causal)
    fast = MultiHeadAttention(8, H, causal=causal, use_sdpa=True)
    fast.load_state_dict(explicit.state_dict())
    x = torch.randn(B, T, 8, generator=g)
    mask = None
    if mask_kind == "keys":
        mask = padding_mask(torch.randint(1, T + 1, (B,), generator=g), T)[:, None, None, :]  # (B, 1, 1, T)
    elif mask_kind == "full":
        mask = torch.rand(B, H, T, T, generator=g) > 0.5
        mask[..., 0] = True  # keep one key per row: fully masked rows are outside the contract
    out, weights = explicit(x, mask=mask, need_weights=True)
    _close(fast(x, mask=mask), out)
    out_fast, weights_fast = fast(x, mask=mask, need_weights=True)  # falls back to the explicit path
    assert torch.equal(out_fast, out) and torch.equal(weights_fast, weights)
    _close(weights.sum(-1), torch.ones(B, H, T))
    allowed = torch.ones(B, H, T, T, dtype=torch.bool)
    if mask is not None:
        allowed &= mask
    if causal:
        allowed &= causal_mask(T)
    assert torch.all(weights[~allowed] == 0), "masked positions must get exactly zero weight"


def test_causal_never_looks_ahead_and_works_for_any_T():
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2, causal=True)
    x = torch.randn(2, 9, 8)
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 3, 8)
    assert torch.equal(mha(changed)[:, :6], mha(x)[:, :6])
    _close(mha(x[:, :4]), mha(x)[:, :4])


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_dropout_weights_are_what_multiplies_v(use_sdpa):
    mha = MultiHeadAttention(8, 2, dropout=0.4, causal=True, use_sdpa=use_sdpa).train()
    x = torch.randn(3, 10, 8, generator=torch.Generator().manual_seed(5))
    torch.manual_seed(7)
    out, weights = mha(x, need_weights=True)
    v = split_heads(mha.qkv(x)[..., 16:], 2)  # the value third of [q | k | v], (B, H, T, D)
    _close(out, mha.out_proj(merge_heads(weights @ v)))
    _, clean = mha.eval()(x, need_weights=True)
    kept = weights != 0
    assert (clean[~kept] > 0).any(), "training mode should drop some weights"
    _close(weights[kept], clean[kept] / 0.6)  # surviving weights are rescaled by 1 / (1 - p)


def test_constructor_argument_errors():
    with pytest.raises(ValueError, match="`dropout`"):
        MultiHeadAttention(8, 2, dropout=1.5)


def test_sdpa_path_in_training_mode_applies_dropout():
    mha = MultiHeadAttention(8, 2, dropout=0.5, use_sdpa=True).train()
    x = torch.randn(2, 6, 8)
    torch.manual_seed(0)
    first = mha(x)
    torch.manual_seed(1)
    assert not torch.allclose(mha(x), first)
    _close(mha.eval()(x), mha(x, need_weights=True)[0])  # eval: no dropout, both paths agree


# ------------------------------------------------------------------- lesson 10: attention with a KV cache


@pytest.mark.parametrize("chunks", [[1] * 9, [4, 1, 1, 3], [9], [2, 3, 4]])
def test_attend_with_cache_chunk_by_chunk_equals_full_causal_attention(chunks):
    # PyTorch's own causal attention over the whole sequence is the independent reference: past keys and values
    # do not change, so feeding the positions in chunks through a growing cache gives the same rows.
    B, H, D, Dv = 2, 3, 4, 5
    T = sum(chunks)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(B, H, T, D, generator=g), torch.randn(B, H, T, D, generator=g)
    v = torch.randn(B, H, T, Dv, generator=g)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dv)
    k_cache, v_cache = torch.empty(B, H, 0, D), torch.empty(B, H, 0, Dv)
    pieces, start = [], 0
    for n in chunks:
        new = slice(start, start + n)
        out, k_cache, v_cache = attend_with_cache(q[:, :, new], k[:, :, new], v[:, :, new], k_cache, v_cache)
        pieces.append(out)
        start += n
        assert k_cache.shape == (B, H, start, D) and v_cache.shape == (B, H, start, Dv)
    assert torch.allclose(torch.cat(pieces, dim=2), full, atol=1e-6)
    assert torch.equal(k_cache, k) and torch.equal(v_cache, v)


def test_attend_with_cache_shifts_the_triangle_and_leaves_its_inputs_alone():
    B, H, P, T, D = 1, 2, 5, 3, 4
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    k_cache, v_cache = torch.randn(B, H, P, D), torch.randn(B, H, P, D)
    before = [t.clone() for t in (q, k, v, k_cache, v_cache)]
    out, keys, values = attend_with_cache(q, k, v, k_cache, v_cache)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v, k_cache, v_cache), strict=True))
    assert keys.data_ptr() != k_cache.data_ptr()
    # Row i's weights, recomputed by hand: keys 0..P+i only (the newest query sees every key but the later ones).
    scores = q @ keys.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, P + T)
    allowed = torch.arange(P + T)[None, :] <= (P + torch.arange(T))[:, None]
    expected = scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ values
    assert torch.allclose(out, expected, atol=1e-6)
    assert allowed[0].sum() == P + 1 and allowed[-1].all()


def test_attend_with_cache_called_directly_checks_through_lesson_04s_function():
    # Its default `attend` is lesson 04's scaled_dot_product_attention, which names mismatched arguments.
    q = torch.randn(1, 2, 1, 4)
    with pytest.raises(ValueError, match="`q` and `k` must have the same dimension dk"):
        attend_with_cache(q, torch.randn(1, 2, 1, 5), q, torch.randn(1, 2, 3, 5), torch.randn(1, 2, 3, 4))


@pytest.mark.parametrize("use_sdpa", [False, True])
@pytest.mark.parametrize("chunks", [[5, 1, 1, 2], [1] * 6, [9]])
def test_multihead_attention_with_a_layer_cache_equals_one_full_pass(use_sdpa, chunks):
    # The SDPA path gets the shifted triangle as a mask: is_causal would align it to the top-left corner.
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, causal=True, use_sdpa=use_sdpa).eval()
    x = torch.randn(2, sum(chunks), 8)
    cache = LayerCache(keys=torch.zeros(2, 2, 0, 4), values=torch.zeros(2, 2, 0, 4))
    pieces, start = [], 0
    for n in chunks:
        pieces.append(mha(x[:, start : start + n], cache=cache))
        start += n
        assert cache.keys.shape == (2, 2, start, 4) and cache.values.shape == (2, 2, start, 4)
    _close(torch.cat(pieces, dim=1), mha(x))
    out, weights = mha(x[:, :1], need_weights=True, cache=LayerCache(cache.keys, cache.values))
    assert out.shape == (2, 1, 8) and weights is None  # with a cache no weights are kept


def test_a_mask_with_a_cache_applies_on_top_of_the_shifted_triangle():
    torch.manual_seed(1)
    mha = MultiHeadAttention(8, 2, causal=True).eval()
    x = torch.randn(1, 6, 8)
    keep = torch.tensor([True, False, True, True, True, True])  # key 1 blocked for every query
    full = mha(x, mask=keep)
    cache = LayerCache(keys=torch.zeros(1, 2, 0, 4), values=torch.zeros(1, 2, 0, 4))
    prefill = mha(x[:, :4], mask=keep[:4], cache=cache)  # (T, P + T) = (4, 4)
    step = mha(x[:, 4:], mask=keep, cache=cache)  # (2, 6)
    _close(torch.cat([prefill, step], dim=1), full)
    assert not torch.allclose(full, mha(x))


def test_dropout_with_a_cache_acts_on_the_weights_in_training_mode():
    mha = MultiHeadAttention(8, 2, dropout=0.5, causal=True).train()
    x = torch.randn(1, 4, 8)
    empty = torch.zeros(1, 2, 0, 4)
    torch.manual_seed(0)
    first = mha(x, cache=LayerCache(empty, empty))
    torch.manual_seed(1)
    assert not torch.allclose(mha(x, cache=LayerCache(empty, empty)), first)
    _close(mha.eval()(x, cache=LayerCache(empty, empty)), mha(x))


# ------------------------------------------------------------------------------------------ benchmark


def test_benchmark_variants_small_run():
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    rows = benchmark_variants(seq_lens=(4, 8), batch_size=2, d_model=16, n_heads=4, repeats=2, warmup=1)
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)
    assert len(rows) == 2 * 5
    assert {row["variant"] for row in rows} == {
        "wrapper of heads",
        "batched heads",
        "fused QKV",
        "fused QKV + SDPA",
        "nn.MultiheadAttention",
    }
    for row in rows:
        assert row["median_ms"] > 0 and row["speedup_vs_wrapper"] > 0
        assert row["max_abs_diff"] < 1e-4, f"{row['variant']} does not compute the wrapper's function"
        if row["variant"] == "wrapper of heads":
            assert row["speedup_vs_wrapper"] == 1.0
    with pytest.raises(ValueError, match="`seq_lens`"):
        benchmark_variants(seq_lens=())
    with pytest.raises(ValueError, match="`repeats`"):
        benchmark_variants(seq_lens=(4,), repeats=0)
