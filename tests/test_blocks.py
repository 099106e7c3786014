"""Tests of course_lib.blocks, multihead_cross and torch_layers (Lesson 06): LayerNorm against F.layer_norm, the
blocks against formulas written out here, and the 2017 layers against PyTorch's own with the weights copied."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_lib import blocks, multihead_cross, torch_layers
from course_lib.attention import causal_mask, padding_mask
from course_lib.multihead import LayerCache

FAST = settings(max_examples=40, deadline=None)
ATOL = 2e-6  # float32 rounding through a layer; a wrong formula is off by far more


def _randomise(module: nn.Module, seed: int = 0) -> nn.Module:
    """Move every parameter away from its initial value (LayerNorm starts as 1 and 0, which hides swaps)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
    return module.eval()


def _max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


# ------------------------------------------------------------------------------------------- layer_norm


@FAST
@given(
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=3),
    C=st.integers(1, 33),
    scale=st.sampled_from([1e-3, 1.0, 100.0]),
    eps=st.sampled_from([1e-5, 1e-3, 0.5]),
    seed=st.integers(0, 2**16),
)
def test_layer_norm_equals_torchs(lead, C, scale, eps, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*lead, C, generator=g) + 3.0) * scale  # an offset too: the mean must come out
    weight, bias = torch.randn(C, generator=g), torch.randn(C, generator=g)
    got = blocks.layer_norm(x, weight, bias, eps)
    expected = F.layer_norm(x, (C,), weight, bias, eps)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_layer_norm_uses_the_biased_variance_and_eps_inside_the_root():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]]) * 1e-2  # variance 1.25e-4: comparable to eps = 1e-4
    ones, zeros = torch.ones(4), torch.zeros(4)
    got = blocks.layer_norm(x, ones, zeros, eps=1e-4)
    centred = x - x.mean()
    assert torch.allclose(got, centred / torch.sqrt(centred.pow(2).mean() + 1e-4))
    assert not torch.allclose(got, centred / torch.sqrt(x.var(unbiased=True) + 1e-4), atol=1e-3)
    assert not torch.allclose(got, centred / (centred.pow(2).mean().sqrt() + 1e-4), atol=1e-3)
    constant = blocks.layer_norm(torch.full((2, 5), 7.0), torch.ones(5), torch.arange(5.0))
    assert torch.equal(constant, torch.arange(5.0).expand(2, 5))  # no division by zero: eps is under the root


def test_layer_norm_matches_nn_layernorm_and_keeps_gradients():
    ln = _randomise(nn.LayerNorm(6))
    x = torch.randn(2, 3, 6, requires_grad=True)
    ours = blocks.layer_norm(x, ln.weight, ln.bias)
    torch.testing.assert_close(ours, ln(x))
    (grad_ours,) = torch.autograd.grad(ours.square().sum(), x)
    (grad_theirs,) = torch.autograd.grad(ln(x).square().sum(), x)
    torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-5, rtol=1e-4)


def test_layer_norm_errors():
    with pytest.raises(ValueError, match="`weight`"):
        blocks.layer_norm(torch.randn(2, 4), torch.ones(3), torch.zeros(4))
    with pytest.raises(ValueError, match="`eps`"):
        blocks.layer_norm(torch.randn(2, 4), torch.ones(4), torch.zeros(4), eps=0)
    with pytest.raises(TypeError, match="`x`"):
        blocks.layer_norm([1.0, 2.0], torch.ones(2), torch.zeros(2))


# ------------------------------------------------------------------------------------------- FeedForward


@pytest.mark.parametrize(
    "activation, function",
    [
        ("gelu_tanh", functools.partial(F.gelu, approximate="tanh")),
        ("gelu", F.gelu),
        ("relu", F.relu),
    ],
)
def test_feed_forward_is_fc1_activation_fc2(activation, function):
    ff = _randomise(blocks.FeedForward(6, 10, activation=activation))
    assert (ff.fc1.in_features, ff.fc1.out_features, ff.fc2.out_features) == (6, 10, 6)
    x = torch.randn(2, 3, 6)
    expected = function(x @ ff.fc1.weight.T + ff.fc1.bias) @ ff.fc2.weight.T + ff.fc2.bias
    torch.testing.assert_close(ff(x), expected)


def test_feed_forward_default_is_gpt2s_tanh_gelu_and_it_differs_from_the_exact_one():
    ff = blocks.FeedForward(4, 16)
    assert isinstance(ff.act, nn.GELU) and ff.act.approximate == "tanh" and ff.activation == "gelu_tanh"
    z = torch.linspace(-4, 4, 801)
    gap = (F.gelu(z) - F.gelu(z, approximate="tanh")).abs().max().item()
    assert 1e-5 < gap < 1e-3  # close, but not the same function


def test_feed_forward_dropout_acts_on_the_output():
    ff = blocks.FeedForward(8, 32, dropout=0.5)
    x = torch.randn(4, 5, 8)
    ff.eval()
    clean = ff(x)
    ff.train()
    torch.manual_seed(0)
    dropped = ff(x)
    zeros = dropped == 0
    assert 0.3 < zeros.float().mean() < 0.7  # whole outputs dropped: dropout is the last step
    torch.testing.assert_close(dropped[~zeros], 2 * clean[~zeros])


def test_feed_forward_errors():
    with pytest.raises(ValueError, match="`activation`"):
        blocks.FeedForward(4, 8, activation="swish")
    with pytest.raises(ValueError, match="`dropout`"):
        blocks.FeedForward(4, 8, dropout=1.0)


# ------------------------------------------------------------------------------------------- TransformerBlock


def _block_as_torch(block: blocks.TransformerBlock) -> nn.TransformerEncoderLayer:
    """PyTorch's encoder layer with the block's weights, copied here by hand (independently of torch_layers)."""
    d_model, d_hidden = block.mlp.fc1.in_features, block.mlp.fc1.out_features
    theirs = nn.TransformerEncoderLayer(
        d_model,
        block.attn.n_heads,
        d_hidden,
        dropout=0.0,
        activation=functools.partial(F.gelu, approximate="tanh"),
        batch_first=True,
        norm_first=block.norm_first,
    )
    names = {"ln1": "norm1", "ln2": "norm2", "attn.qkv.": "self_attn.in_proj_", "mlp.fc1": "linear1"}
    names |= {"mlp.fc2": "linear2", "attn.out_proj": "self_attn.out_proj"}
    state = {}
    for key, value in block.state_dict().items():
        for ours, theirs_name in names.items():
            key = key.replace(ours, theirs_name)
        state[key] = value
    theirs.load_state_dict(state)
    return theirs.eval()


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_transformer_block_matches_pytorchs_encoder_layer(norm_first, causal):
    block = _randomise(blocks.TransformerBlock(16, 4, causal=causal, norm_first=norm_first), seed=1)
    theirs = _block_as_torch(block)
    x = torch.randn(3, 6, 16)
    keep = padding_mask([6, 4, 2], 6)
    src_mask = ~causal_mask(6) if causal else None
    with torch.no_grad():
        got = block(x, keep[:, None, None, :])
        expected = theirs(x, src_mask=src_mask, src_key_padding_mask=~keep)
    assert _max_error(got, expected) < ATOL


def test_transformer_block_is_pre_ln_and_follows_the_contract():
    block = _randomise(blocks.TransformerBlock(8, 2), seed=2)
    assert isinstance(block.ln1, nn.LayerNorm) and isinstance(block.ln2, nn.LayerNorm) and block.ln1.eps == 1e-5
    assert isinstance(block.attn, blocks.MultiHeadAttention) and block.attn.causal
    assert isinstance(block.mlp, blocks.FeedForward) and block.mlp.fc1.out_features == 32  # 4 * d_model
    x = torch.randn(2, 5, 8)
    h = x + block.attn(F.layer_norm(x, (8,), block.ln1.weight, block.ln1.bias))
    expected = h + block.mlp(F.layer_norm(h, (8,), block.ln2.weight, block.ln2.bias))
    torch.testing.assert_close(block(x), expected)
    later = x.clone()
    later[:, 3:] += 1.0  # causal: changing later positions leaves the earlier outputs alone
    torch.testing.assert_close(block(later)[:, :3], block(x)[:, :3])
    assert blocks.TransformerBlock(8, 2, d_hidden=12).mlp.fc2.in_features == 12


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_block_returns_the_weights_its_attention_used(norm_first):
    block = _randomise(blocks.TransformerBlock(8, 2, norm_first=norm_first), seed=3).eval()
    x = torch.randn(2, 5, 8)
    out, weights = block(x, need_weights=True)
    torch.testing.assert_close(out, block(x))
    _, expected = block.attn(block.ln1(x) if norm_first else x, need_weights=True)
    torch.testing.assert_close(weights, expected)


def test_transformer_block_hands_use_sdpa_and_the_cache_to_its_attention():
    explicit = _randomise(blocks.TransformerBlock(8, 2), seed=4).eval()
    fast = blocks.TransformerBlock(8, 2, use_sdpa=True).eval()
    fast.load_state_dict(explicit.state_dict())
    assert fast.attn.use_sdpa and not explicit.attn.use_sdpa
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(fast(x), explicit(x))
    for block in (explicit, fast):  # a prompt of 4, then one position at a time
        cache = LayerCache(keys=torch.zeros(2, 2, 0, 4), values=torch.zeros(2, 2, 0, 4))
        pieces = [block(x[:, :4], cache=cache), block(x[:, 4:5], cache=cache), block(x[:, 5:], cache=cache)]
        torch.testing.assert_close(torch.cat(pieces, dim=1), explicit(x))
        assert cache.keys.shape == (2, 2, 6, 4)


# ------------------------------------------------------------------------------------------- the 2017 layers

B, S, T = 3, 7, 5  # source and target lengths differ
SOURCE_LENGTHS, TARGET_LENGTHS = [7, 3, 5], [5, 2, 4]


def _inputs(d_model: int = 16, d_memory: int | None = None, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randn(B, S, d_memory or d_model, generator=g)
    tgt = torch.randn(B, T, d_model, generator=g)
    return src, tgt, padding_mask(SOURCE_LENGTHS, S), padding_mask(TARGET_LENGTHS, T)


@pytest.mark.parametrize("grad", [False, True], ids=["no-grad (PyTorch's fast path)", "with-grad"])
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_nn_transformer_encoder_layer(norm_first, activation, grad):
    ours = _randomise(blocks.EncoderLayer(16, 4, 24, activation=activation, norm_first=norm_first), seed=3)
    theirs = torch_layers.to_torch(ours)
    assert isinstance(theirs, nn.TransformerEncoderLayer) and theirs.norm_first == norm_first
    assert torch.equal(theirs.linear1.weight, ours.mlp.fc1.weight)
    src, _, src_keep, _ = _inputs()
    with torch.set_grad_enabled(grad):
        got = ours(src, src_keep)
        expected = theirs(src, src_key_padding_mask=~src_keep)  # PyTorch: True marks padding
    assert _max_error(got, expected) < ATOL


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_nn_transformer_decoder_layer(norm_first, activation, mask_kind):
    ours = _randomise(blocks.DecoderLayer(16, 4, 24, activation=activation, norm_first=norm_first), seed=4)
    theirs = torch_layers.to_torch(ours)
    assert isinstance(theirs, nn.TransformerDecoderLayer)
    src, tgt, src_keep, tgt_keep = _inputs(seed=1)
    convert = torch_layers.blocked_mask if mask_kind == "bool" else torch_layers.float_mask
    with torch.no_grad():
        got = ours(tgt, src, tgt_keep, src_keep)
        expected = theirs(
            tgt,
            src,
            tgt_mask=convert(causal_mask(T)),  # PyTorch's decoder layer is causal only when told
            tgt_key_padding_mask=convert(tgt_keep),
            memory_key_padding_mask=convert(src_keep),
        )
    assert _max_error(got, expected) < ATOL


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_nn_transformer_encoder_and_decoder(norm_first):
    encoder = _randomise(blocks.Encoder(3, 16, 4, norm_first=norm_first), seed=5)
    decoder = _randomise(blocks.Decoder(2, 16, 4, norm_first=norm_first), seed=6)
    assert isinstance(encoder.norm, nn.LayerNorm) == norm_first  # a final norm only for pre-LN, by default
    their_encoder, their_decoder = torch_layers.to_torch(encoder), torch_layers.to_torch(decoder)
    assert (their_encoder.norm is not None) == norm_first and len(their_decoder.layers) == 2
    src, tgt, src_keep, tgt_keep = _inputs(seed=2)
    with torch.no_grad():
        memory = encoder(src, src_keep)
        their_memory = their_encoder(src, src_key_padding_mask=~src_keep)
        out = decoder(tgt, memory, tgt_keep, src_keep)
        their_out = their_decoder(
            tgt,
            memory,
            tgt_mask=~causal_mask(T),
            tgt_key_padding_mask=~tgt_keep,
            memory_key_padding_mask=~src_keep,
        )
    assert _max_error(memory, their_memory) < 5 * ATOL
    assert _max_error(out, their_out) < 5 * ATOL


def test_layers_return_their_attention_weights():
    src, tgt, src_keep, tgt_keep = _inputs(seed=3)
    encoder_layer = _randomise(blocks.EncoderLayer(16, 4))
    out, weights = encoder_layer(src, src_keep, need_weights=True)
    assert weights.shape == (B, 4, S, S) and torch.equal(out, encoder_layer(src, src_keep))
    assert torch.all(weights[~src_keep[:, None, None, :].expand_as(weights)] == 0)  # padding keys get nothing
    decoder = _randomise(blocks.Decoder(2, 16, 4))
    out, self_weights, cross_weights = decoder(tgt, src, tgt_keep, src_keep, need_weights=True)
    assert len(self_weights) == len(cross_weights) == 2
    assert self_weights[0].shape == (B, 4, T, T) and cross_weights[0].shape == (B, 4, T, S)
    assert torch.all(self_weights[1].triu(1) == 0)  # causal
    torch.testing.assert_close(cross_weights[1].sum(-1), torch.ones(B, 4, T))


def test_padded_positions_change_nothing_they_should_not():
    src, tgt, src_keep, tgt_keep = _inputs(seed=4)
    encoder = _randomise(blocks.Encoder(2, 16, 4))
    decoder = _randomise(blocks.Decoder(2, 16, 4))
    noisy = src.masked_fill(~src_keep[..., None], 123.0)  # garbage in the padding of the source
    memory, noisy_memory = encoder(src, src_keep), encoder(noisy, src_keep)
    torch.testing.assert_close(memory[src_keep], noisy_memory[src_keep])
    torch.testing.assert_close(decoder(tgt, memory, tgt_keep, src_keep), decoder(tgt, noisy_memory, tgt_keep, src_keep))


def test_decoder_layer_reads_a_memory_of_another_width():
    layer = _randomise(blocks.DecoderLayer(16, 4, d_memory=10))
    src, tgt, src_keep, tgt_keep = _inputs(d_memory=10, seed=5)
    assert layer(tgt, src, tgt_keep, src_keep).shape == (B, T, 16)
    assert layer.cross_attn.kv_proj.weight.shape == (32, 10)
    with pytest.raises(ValueError, match="d_memory == d_model"):
        torch_layers.to_torch(layer)


def test_dropout_is_active_only_in_training():
    layer = blocks.EncoderLayer(16, 4, dropout=0.3)
    src, _, src_keep, _ = _inputs()
    layer.eval()
    assert torch.equal(layer(src, src_keep), layer(src, src_keep))
    layer.train()
    torch.manual_seed(0)
    assert not torch.allclose(layer(src, src_keep), layer.eval()(src, src_keep))


def test_layer_errors_name_the_argument():
    with pytest.raises(ValueError, match="divisible"):
        blocks.DecoderLayer(10, 4)
    with pytest.raises(ValueError, match="`n_layers`"):
        blocks.Encoder(0, 16, 4)


# ------------------------------------------------------------------------------------------- cross-attention


@pytest.mark.parametrize("d_memory", [16, 10])
def test_cross_attention_matches_nn_multihead_attention(d_memory):
    ours = _randomise(multihead_cross.MultiHeadCrossAttention(16, 4, d_memory=d_memory), seed=7)
    theirs = multihead_cross.to_torch_mha(ours).eval()
    src, tgt, src_keep, _ = _inputs(d_memory=d_memory, seed=6)
    with torch.no_grad():
        out, weights = ours(tgt, src, src_keep[:, None, None, :], need_weights=True)
        their_out, their_weights = theirs(tgt, src, src, key_padding_mask=~src_keep, average_attn_weights=False)
    assert out.shape == (B, T, 16) and weights.shape == (B, 4, T, S)  # one row per query, one column per key
    assert _max_error(out, their_out) < ATOL and _max_error(weights, their_weights) < ATOL
    back = multihead_cross.from_torch_mha(theirs)
    torch.testing.assert_close(back(tgt, src), ours(tgt, src))


def test_cross_attention_takes_queries_from_x_and_keys_values_from_memory():
    attn = _randomise(multihead_cross.MultiHeadCrossAttention(8, 2))
    src, tgt = torch.randn(1, 4, 8), torch.randn(1, 3, 8)
    q = attn.q_proj(tgt).view(1, 3, 2, 4).transpose(1, 2)  # (B, H, Tq, D)
    k, v = (t.view(1, 4, 2, 4).transpose(1, 2) for t in attn.kv_proj(src).split(8, dim=-1))  # (B, H, Tk, D)
    expected = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 3, 8)
    torch.testing.assert_close(attn(tgt, src), attn.out_proj(expected))


# ------------------------------------------------------------------------------------------- masks


def test_the_three_mask_conventions_give_the_same_attention():
    allowed = causal_mask(5) & torch.tensor([True, True, False, True, True])  # (5, 5)
    blocked, additive = torch_layers.blocked_mask(allowed), torch_layers.float_mask(allowed)
    assert torch.equal(blocked, ~allowed) and additive.dtype == torch.float32
    assert torch.equal(additive == 0, allowed) and torch.all(additive[~allowed] == float("-inf"))
    assert torch.equal(torch_layers.allowed_mask(blocked), allowed)
    assert torch.equal(torch_layers.allowed_mask(additive), allowed)
    q, k, v = torch.randn(3, 2, 5, 4).unbind(0)
    by_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # SDPA: True = may attend
    by_float = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
    torch.testing.assert_close(by_bool, by_float)
    with pytest.raises(TypeError, match="bool or float"):
        torch_layers.allowed_mask(torch.zeros(2, 2, dtype=torch.long))
