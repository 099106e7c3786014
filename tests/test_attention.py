"""Tests of course_lib.attention (Lesson 04) against PyTorch's own attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_lib.attention import (
    CausalSelfAttention,
    CrossAttention,
    SelfAttention,
    attention_weights,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    simple_self_attention,
    train_step,
)

ATOL = 1e-5
FAST = settings(max_examples=25, deadline=None)


def _random_mask(shape, generator):
    """A random bool mask in which every query row keeps at least one key (fully masked rows: undefined)."""
    mask = torch.rand(shape, generator=generator) > 0.5
    mask[..., 0] = True
    return mask


# ---------------------------------------------------------------------------------------------- functions


def test_simple_self_attention_is_unscaled_softmax_attention():
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    expected = F.scaled_dot_product_attention(x, x, x, scale=1.0)  # no 1/sqrt(C) in this first version
    out = simple_self_attention(x)
    assert out.shape == (6, 3)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)


def test_simple_self_attention_rows_are_convex_combinations():
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    out = simple_self_attention(x)
    # every output lies inside the per-channel range of the inputs (it is a weighted average)
    assert torch.all(out <= x.max(dim=0).values + 1e-6)
    assert torch.all(out >= x.min(dim=0).values - 1e-6)


@pytest.mark.parametrize("bad", [torch.randn(2, 6, 3), torch.randn(3)])
def test_simple_self_attention_rejects_non_2d(bad):
    with pytest.raises(ValueError, match=r"\(T, C\)"):
        simple_self_attention(bad)


@FAST
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    tq=st.integers(1, 7),
    tk=st.integers(1, 7),
    dk=st.integers(1, 9),
    dv=st.integers(1, 9),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sdpa_matches_torch(batch, tq, tk, dk, dv, masked, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, tq, dk, generator=g)
    k = torch.randn(*batch, tk, dk, generator=g)
    v = torch.randn(*batch, tk, dv, generator=g)
    mask = _random_mask((*batch, tq, tk), g) if masked else None

    out, weights = scaled_dot_product_attention(q, k, v, mask)

    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.shape == (*batch, tq, dv)
    assert weights.shape == (*batch, tq, tk)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(*batch, tq), atol=ATOL, rtol=0)
    if mask is not None:
        assert torch.all(weights[~mask] == 0), "masked positions must get exactly zero weight"


def test_sdpa_broadcasts_a_small_mask():
    g = torch.Generator().manual_seed(2)
    q, k, v = (
        torch.randn(2, 3, 4, 8, generator=g),
        torch.randn(2, 3, 6, 8, generator=g),
        torch.randn(2, 3, 6, 5),
    )
    key_keep = torch.tensor([True, True, False, True, False, True])  # (Tk,) broadcasts to (2, 3, 4, 6)
    out, weights = scaled_dot_product_attention(q, k, v, key_keep)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=key_keep.expand(4, 6)), atol=ATOL, rtol=0
    )
    assert torch.all(weights[..., ~key_keep] == 0)


@pytest.mark.parametrize("T", [1, 4, 9])
def test_sdpa_causal_matches_is_causal_and_attn_mask(T):
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(2, 3, T, 8, generator=g) for _ in range(3))
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(T))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=ATOL, rtol=0)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T)), atol=ATOL, rtol=0
    )
    assert torch.all(weights.triu(diagonal=1) == 0), "no weight may reach a future position"


def test_attention_weights_scale_by_sqrt_dk():
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(4, 16, generator=g), torch.randn(5, 16, generator=g)
    expected = torch.softmax(q @ k.T / 4.0, dim=-1)  # sqrt(16) = 4
    torch.testing.assert_close(attention_weights(q, k), expected, atol=1e-6, rtol=0)


def test_sdpa_argument_errors_name_the_argument():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match=r"`q` and `k`.*\(2, 3, 4\).*\(2, 5, 7\)"):
        scaled_dot_product_attention(q, torch.randn(2, 5, 7), v)
    with pytest.raises(ValueError, match="`k` and `v`"):
        scaled_dot_product_attention(q, k, torch.randn(2, 4, 6))
    with pytest.raises(TypeError, match="`mask`.*torch.bool"):
        scaled_dot_product_attention(q, k, v, torch.ones(3, 5))
    with pytest.raises(ValueError, match=r"`mask` of shape \(3, 4\).*\(2, 3, 5\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="`q`"):
        scaled_dot_product_attention(q.tolist(), k, v)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_causal_mask_matches_torch(T):
    mask = causal_mask(T)
    assert mask.dtype == torch.bool and mask.shape == (T, T)
    additive = nn.Transformer.generate_square_subsequent_mask(T)  # 0 where allowed, -inf above the diagonal
    assert torch.equal(mask, additive == 0)
    assert torch.equal(mask, torch.tril(torch.ones(T, T)).bool())


def test_causal_mask_device():
    assert causal_mask(3, device="cpu").device.type == "cpu"


def test_padding_mask_values():
    expected = torch.tensor(
        [
            [True, True, True, False, False],
            [True, False, False, False, False],
            [True, True, True, True, False],
        ]
    )
    assert torch.equal(padding_mask([3, 1, 4], T=5), expected)
    assert torch.equal(padding_mask(torch.tensor([3, 1, 4])), expected[:, :4])  # T defaults to the longest


def test_padding_mask_errors():
    with pytest.raises(ValueError, match="`lengths`"):
        padding_mask([3, 6], T=5)
    with pytest.raises(ValueError, match="`lengths`"):
        padding_mask([0, 2])
    with pytest.raises(ValueError, match="`lengths`"):
        padding_mask(torch.tensor([1.5, 2.0]))


def test_padding_mask_equals_attention_on_unpadded_sequences():
    g = torch.Generator().manual_seed(4)
    lengths = [5, 2, 3]
    q, k, v = torch.randn(3, 4, 8, generator=g), torch.randn(3, 5, 8, generator=g), torch.randn(3, 5, 6)
    out, weights = scaled_dot_product_attention(q, k, v, padding_mask(lengths, 5)[:, None, :])  # (B, 1, Tk)
    for b, length in enumerate(lengths):
        alone = F.scaled_dot_product_attention(q[b], k[b, :length], v[b, :length])  # no padding at all
        torch.testing.assert_close(out[b], alone, atol=ATOL, rtol=0)
        assert torch.all(weights[b, :, length:] == 0)


# ------------------------------------------------------------------------------------------------ modules


def _project(module, x, memory=None):
    memory = x if memory is None else memory
    return module.W_query(x), module.W_key(memory), module.W_value(memory)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_self_attention_matches_torch(qkv_bias):
    torch.manual_seed(0)
    module = SelfAttention(d_in=5, d_out=7, qkv_bias=qkv_bias)
    x = torch.randn(3, 6, 5)
    out, weights = module(x, need_weights=True)
    q, k, v = _project(module, x)
    # PyTorch's default scale is 1/sqrt(last dim of q) = 1/sqrt(d_out)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=ATOL, rtol=0)
    torch.testing.assert_close(module(x), out)
    assert weights.shape == (3, 6, 6)
    assert set(module.state_dict()) == {
        f"W_{n}.{p}" for n in ("query", "key", "value") for p in (("weight", "bias") if qkv_bias else ("weight",))
    }


def test_self_attention_rejects_a_zero_width():
    with pytest.raises(ValueError, match="`d_out`"):
        SelfAttention(5, 0)


def test_causal_self_attention_state_dict_holds_only_the_linears():
    module = CausalSelfAttention(4, 6, context_length=10, dropout=0.1)
    assert set(module.state_dict()) == {"W_query.weight", "W_key.weight", "W_value.weight"}
    assert not list(module.buffers())


@pytest.mark.parametrize("T", [1, 3, 10])
def test_causal_self_attention_matches_torch_for_any_T(T):
    torch.manual_seed(1)
    module = CausalSelfAttention(4, 6, context_length=10, dropout=0.5, qkv_bias=True).eval()
    x = torch.randn(2, T, 4)
    out, weights = module(x, need_weights=True)
    expected = F.scaled_dot_product_attention(*_project(module, x), is_causal=True)
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    assert out.shape == (2, T, 6)
    assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, T), atol=ATOL, rtol=0)


def test_causal_self_attention_never_looks_ahead():
    torch.manual_seed(2)
    module = CausalSelfAttention(4, 6, context_length=8)
    x = torch.randn(2, 8, 4)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, 3, 4)  # rewrite the future of position 4
    torch.testing.assert_close(module(changed)[:, :5], module(x)[:, :5], atol=0, rtol=0)
    torch.testing.assert_close(module(x[:, :5]), module(x)[:, :5], atol=ATOL, rtol=0)  # prefix = shorter call


def test_causal_self_attention_too_long_raises():
    with pytest.raises(ValueError, match="T=5.*context_length=4"):
        CausalSelfAttention(3, 3, context_length=4)(torch.randn(1, 5, 3))
    with pytest.raises(ValueError, match="`dropout`"):
        CausalSelfAttention(3, 3, context_length=4, dropout=1.0)


def test_causal_self_attention_with_padding_mask():
    torch.manual_seed(3)
    module = CausalSelfAttention(4, 4, context_length=6)
    x = torch.randn(2, 6, 4)
    keep = padding_mask([6, 3], 6)[:, None, :]  # (B, 1, T)
    out, weights = module(x, mask=keep, need_weights=True)
    assert torch.all(weights[1, :, 3:] == 0) and torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(out[1, :3], module(x[1:, :3])[0], atol=ATOL, rtol=0)


def test_causal_self_attention_dropout_weights_are_what_multiplies_v():
    module = CausalSelfAttention(4, 6, context_length=16, dropout=0.5).train()
    x = torch.randn(3, 16, 4, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(123)
    out, weights = module(x, need_weights=True)
    torch.testing.assert_close(out, weights @ module.W_value(x), atol=ATOL, rtol=0)

    _, clean = module.eval()(x, need_weights=True)
    kept = weights != 0
    assert (clean[~kept] > 0).any(), "dropout should zero some positive weights in training mode"
    torch.testing.assert_close(weights[kept], clean[kept] / 0.5, atol=ATOL, rtol=1e-4)  # inverted dropout
    torch.manual_seed(123)
    out_again = module.train()(x)
    torch.testing.assert_close(out_again, out, atol=0, rtol=0)  # same seed, same dropout pattern


@pytest.mark.parametrize("d_memory", [None, 3])
def test_cross_attention_matches_torch(d_memory):
    torch.manual_seed(5)
    module = CrossAttention(d_model=8, d_memory=d_memory, qkv_bias=True)
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 7, d_memory or 8)
    out, weights = module(x, memory, need_weights=True)
    q, k, v = _project(module, x, memory)
    expected = F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(8))
    assert out.shape == (2, 4, 8) and weights.shape == (2, 4, 7)  # one row per decoder position
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    assert module.W_key.in_features == (d_memory or 8) and module.W_query.in_features == 8


def test_cross_attention_queries_come_from_the_decoder():
    torch.manual_seed(6)
    module = CrossAttention(d_model=8, d_memory=5)
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 6, 5)
    seen = {}
    for name in ("W_query", "W_key", "W_value"):
        getattr(module, name).register_forward_hook(lambda m, inputs, output, name=name: seen.update({name: inputs[0]}))
    out = module(x, memory)
    assert seen["W_query"] is x
    assert seen["W_key"] is memory and seen["W_value"] is memory
    # reorder the decoder positions: the output rows follow (queries), the memory order does not matter
    perm = torch.tensor([2, 0, 3, 1])
    torch.testing.assert_close(module(x[:, perm], memory), out[:, perm], atol=ATOL, rtol=0)
    mem_perm = torch.tensor([5, 1, 0, 4, 2, 3])
    torch.testing.assert_close(module(x, memory[:, mem_perm]), out, atol=ATOL, rtol=0)


def test_cross_attention_memory_mask():
    torch.manual_seed(7)
    module = CrossAttention(d_model=6)
    x, memory = torch.randn(2, 3, 6), torch.randn(2, 5, 6)
    keep = padding_mask([5, 2], 5)[:, None, :]  # (B, 1, Tk)
    out, weights = module(x, memory, memory_mask=keep, need_weights=True)
    assert torch.all(weights[1, :, 2:] == 0)
    changed = memory.clone()
    changed[1, 2:] = 100.0  # padding content must not leak into the output
    torch.testing.assert_close(module(x, changed, memory_mask=keep), out, atol=0, rtol=0)
    with pytest.raises(ValueError, match="`memory_mask`"):
        module(x, memory, memory_mask=torch.ones(2, 3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="batch size"):
        module(x, memory[:1])
    with pytest.raises(ValueError, match="`memory`.*d_memory=6"):
        module(x, torch.randn(2, 5, 4))


def _loss_by_hand(logits, targets):
    """Mean over every position of -log softmax(logits)[target], written out (no F.cross_entropy)."""
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)  # (B, T, V)
    return -log_probs.gather(-1, targets[..., None]).mean()


def test_train_step_is_one_sgd_step_on_the_mean_cross_entropy():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(7, 5), nn.Linear(5, 7))  # ids (B, T) -> logits (B, T, V)
    twin = nn.Sequential(nn.Embedding(7, 5), nn.Linear(5, 7))
    twin.load_state_dict(model.state_dict())
    for p in model.parameters():
        p.grad = torch.ones_like(p)  # stale gradients from an earlier backward(): must not leak into the step
    inputs, targets = torch.randint(7, (3, 4)), torch.randint(7, (3, 4))
    loss = train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), inputs, targets)
    expected = _loss_by_hand(twin(inputs), targets)
    expected.backward()
    assert isinstance(loss, float) and loss == pytest.approx(expected.item(), rel=1e-6)
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), twin.parameters(), strict=True):
            assert torch.allclose(mine, theirs - 0.1 * theirs.grad, atol=1e-6)


def test_train_step_names_a_bad_shape():
    model = nn.Sequential(nn.Embedding(7, 5), nn.Linear(5, 7))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="targets"):
        train_step(model, optimizer, torch.randint(7, (3, 4)), torch.randint(7, (3, 5)))
    with pytest.raises(TypeError, match="integer"):
        train_step(model, optimizer, torch.randint(7, (3, 4)), torch.rand(3, 4))
