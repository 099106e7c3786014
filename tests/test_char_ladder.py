"""course_lib.char_ladder: lesson 09's ablation ladder. The full rung computes what the course's GPT computes
(weights copied, head untied), each part switches what it says, the component classes passed in are the ones used,
and each rung adds one part to the one before."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.blocks import FeedForward, layer_norm
from course_lib.char_ladder import LADDER, LadderBlock, LadderGPT, LayerNorm, Parts, Rung
from course_lib.generate import generate
from course_lib.gpt import GPT
from course_lib.multihead import MultiHeadAttention

V, T = 11, 8


def _idx(seed: int = 0, B: int = 3, length: int = 6) -> torch.Tensor:
    return torch.randint(V, (B, length), generator=torch.Generator().manual_seed(seed))


def test_the_full_rung_computes_what_the_gpt_computes_with_the_weights_copied():
    rung = Rung("all", n_layers=2, n_heads=4, feed_forward=True, residual=True, layer_norm=True, d_model=16)
    torch.manual_seed(0)
    gpt = GPT(V, T, 16, 4, 2).eval()
    ladder = LadderGPT(V, T, rung).eval()
    state = gpt.state_dict()  # both hold tok_emb.weight and lm_head.weight (tied: the same tensor)
    assert set(state) == set(ladder.state_dict())
    ladder.load_state_dict(state)
    idx, targets = _idx(1), _idx(2)
    expected, expected_loss = gpt(idx, targets)
    got, loss = ladder(idx, targets)
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(loss, expected_loss, atol=1e-6)
    assert ladder.lm_head.weight is not ladder.tok_emb.weight  # untied: the bigram rung needs its own head
    assert type(ladder).forward is GPT.forward  # one forward pass: the parts differ, not the pass


def test_a_ladder_model_generates_by_recomputing_its_window():
    # Its blocks keep no KV cache, so it offers none: generate recomputes the window at every step, past the context.
    torch.manual_seed(0)
    model = LadderGPT(V, T, LADDER[-2]).eval()
    out = generate(model, _idx(3, B=2, length=2), 10, greedy=True)
    assert out.shape == (2, 12)
    for t in range(2, 12):
        assert torch.equal(out[:, t], model(out[:, max(0, t - T) : t])[0][:, -1].argmax(-1)), t
    with pytest.raises(TypeError, match="use_cache=True needs a model with a KV cache"):
        generate(model, _idx(3, B=2, length=2), 1, use_cache=True)


def test_the_layer_norm_module_is_nn_layer_norm_with_the_function_given():
    x = torch.randn(2, 5, 6)
    norm = LayerNorm(6)
    with torch.no_grad():
        norm.weight.normal_(), norm.bias.normal_()
    assert torch.allclose(norm(x), F.layer_norm(x, (6,), norm.weight, norm.bias, 1e-5), atol=1e-5)
    calls = []
    traced = LayerNorm(6, lambda *args: calls.append(len(args)) or layer_norm(*args))
    traced(x)
    assert calls == [4]  # x, weight, bias, eps


def test_the_bigram_rung_reads_only_the_current_token_and_its_position():
    model = LadderGPT(V, T, LADDER[0]).eval()
    assert len(model.blocks) == 0 and isinstance(model.ln_f, nn.Identity)
    idx = _idx(3)
    changed = idx.clone()
    changed[:, 2] = (changed[:, 2] + 1) % V
    difference = (model(idx)[0] - model(changed)[0]).abs().amax(dim=(0, 2))  # (T,)
    assert difference[2] > 0 and difference[[0, 1, 3, 4, 5]].max() == 0


def test_without_residual_connections_a_sublayer_replaces_the_stream():
    rung = Rung("no residual", n_layers=1, n_heads=2, feed_forward=True, d_model=8)
    block = LadderBlock(rung).eval()
    x = torch.randn(2, 5, 8)
    assert torch.allclose(block(x), block.mlp(block.attn(x)), atol=1e-6)
    residual = LadderBlock(dataclasses.replace(rung, residual=True)).eval()
    residual.load_state_dict(block.state_dict())
    h = x + block.attn(x)
    assert torch.allclose(residual(x), h + block.mlp(h), atol=1e-6)


def test_every_rung_causal_and_the_parts_passed_in_are_the_ones_used():
    built = []

    class Attention(MultiHeadAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(kwargs["causal"])

    class Mlp(FeedForward):
        pass

    for rung in LADDER:
        model = LadderGPT(V, T, rung, Parts(attention=Attention, feed_forward=Mlp)).eval()
        idx = _idx(4)
        changed = idx.clone()
        changed[:, -1] = (changed[:, -1] + 1) % V
        assert torch.equal(model(idx)[0][:, :-1], model(changed)[0][:, :-1]), rung.name
        assert all(isinstance(b.attn, Attention) for b in model.blocks)
        assert all(isinstance(b.mlp, Mlp) for b in model.blocks if rung.feed_forward)
    assert built and all(built)


def test_each_rung_adds_one_part_to_the_one_before():
    fields = [f.name for f in dataclasses.fields(Rung) if f.name != "name"]
    changed = [
        sorted(f for f in fields if getattr(a, f) != getattr(b, f)) for a, b in zip(LADDER, LADDER[1:], strict=False)
    ]
    assert changed == [
        ["n_heads", "n_layers"],  # one block with one head (the bigram rung's n_heads is unused)
        ["n_heads"],
        ["feed_forward"],
        ["n_layers", "residual"],
        ["layer_norm"],
        ["d_model", "dropout"],
    ]
    assert LADDER[0].n_layers == 0 and LADDER[1].n_heads == 1
    last = LADDER[-1]
    model = LadderGPT(V, T, last)
    assert model.drop.p == last.dropout and model.blocks[0].attn.dropout.p == last.dropout


def test_too_long_a_window_and_bad_rungs_are_refused():
    with pytest.raises(ValueError, match="context_length 8"):
        LadderGPT(V, T, LADDER[1])(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="d_model"):
        Rung("x", n_heads=3, d_model=32)
    with pytest.raises(ValueError, match="dropout"):
        Rung("x", dropout=1.5)
