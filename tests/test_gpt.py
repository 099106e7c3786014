"""course_lib.gpt: lesson 09's GPT (the contract's attributes, tied head, loss) and GPT-2's initialisation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

from course_lib.blocks import TransformerBlock
from course_lib.gpt import GPT, KVCache, attention_maps, init_gpt2
from course_lib.gpt2 import GPT2, GPT2Config
from course_lib.gpt2_weights import from_hf_model
from tests.compile_check import assert_one_graph


def _model(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(**{"vocab_size": 11, "context_length": 8, "d_model": 16, "n_heads": 2, "n_layers": 2, **kw})


def test_the_contracts_attributes_and_the_tied_head():
    model = _model(dropout=0.1)
    assert model.lm_head.weight is model.tok_emb.weight
    assert model.lm_head.bias is None
    assert model.pos_emb.weight.shape == (8, 16)
    assert model.drop.p == 0.1
    assert len(model.blocks) == 2 and all(type(b) is TransformerBlock for b in model.blocks)
    assert all(b.attn.causal for b in model.blocks)
    assert sum(p.numel() for p in model.parameters()) == 11 * 16 + 8 * 16 + 2 * (12 * 16 * 16 + 13 * 16) + 2 * 16


def test_forward_returns_logits_and_the_mean_cross_entropy():
    model = _model()
    idx = torch.randint(11, (3, 5), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(11, (3, 5), generator=torch.Generator().manual_seed(2))
    logits, loss = model(idx, targets)
    assert logits.shape == (3, 5, 11)
    assert torch.allclose(loss, F.cross_entropy(logits.reshape(15, 11), targets.reshape(15)))
    assert model(idx)[1] is None


def test_causal_a_later_token_never_changes_an_earlier_logit():
    model = _model().eval()
    idx = torch.randint(11, (1, 6), generator=torch.Generator().manual_seed(3))
    changed = idx.clone()
    changed[0, 4] = (idx[0, 4] + 1) % 11
    assert torch.allclose(model(idx)[0][0, :4], model(changed)[0][0, :4], atol=1e-6)
    assert not torch.allclose(model(idx)[0][0, 4:], model(changed)[0][0, 4:])


def test_too_long_a_context_is_refused_by_name():
    with pytest.raises(ValueError, match="context_length 8"):
        _model()(torch.zeros(1, 9, dtype=torch.long))


def test_sdpa_computes_the_same_logits():
    plain = _model()
    fast = _model(use_sdpa=True)
    fast.load_state_dict(plain.state_dict())
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(4))
    assert torch.allclose(plain(idx)[0], fast(idx)[0], atol=1e-5)
    assert all(b.attn.use_sdpa for b in fast.blocks) and not any(b.attn.use_sdpa for b in plain.blocks)
    # The maps always come from the explicit path (SDPA never forms the weights): the same maps either way.
    assert torch.allclose(attention_maps(fast.eval(), idx), attention_maps(plain.eval(), idx), atol=1e-6)


def test_another_block_class_builds_the_same_model():
    """Lesson 10 builds this GPT with the learner's TransformerBlock: any class with its contract and names."""
    from tests.learner_gpt import LearnerBlock

    theirs = _model(block=lambda d_model, n_heads, dropout: LearnerBlock(d_model, n_heads))
    assert all(type(b) is LearnerBlock for b in theirs.blocks) and theirs.lm_head.weight is theirs.tok_emb.weight
    ours = _model()
    assert set(theirs.state_dict()) == set(ours.state_dict())
    theirs.load_state_dict(ours.state_dict())
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(4))
    assert torch.allclose(theirs(idx)[0], ours(idx)[0], atol=1e-5)


def test_gpt2_is_this_gpt_with_gpt2s_init_and_the_same_state_dict():
    config = GPT2Config.tiny()
    torch.manual_seed(5)
    gpt2 = GPT2(config)
    torch.manual_seed(5)  # GPT-2's parts are built in GPT's order and drawn the same: the same initial weights
    gpt = init_gpt2(GPT(config.vocab_size, config.context_length, config.d_model, config.n_heads, config.n_layers), 2)
    assert gpt2.state_dict().keys() == gpt.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(gpt.state_dict().values(), gpt2.state_dict().values(), strict=True))
    idx = torch.randint(config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(5))
    assert torch.equal(gpt(idx)[0], gpt2(idx)[0])


def test_gpt_matches_hugging_faces_gpt2_with_the_weights_copied():
    hf_config = HFConfig(vocab_size=50, n_positions=16, n_embd=24, n_layer=2, n_head=3, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    torch.manual_seed(6)
    theirs = GPT2LMHeadModel(hf_config).eval()
    ours = GPT(50, 16, 24, 3, 2).eval()
    ours.load_state_dict(from_hf_model(theirs).state_dict())
    idx = torch.randint(50, (2, 16), generator=torch.Generator().manual_seed(7))
    assert torch.allclose(ours(idx)[0], theirs(idx).logits, atol=1e-4)


def test_attention_maps_are_hugging_faces_attentions_with_the_weights_copied():
    hf_config = HFConfig(vocab_size=40, n_positions=12, n_embd=16, n_layer=2, n_head=4, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    torch.manual_seed(9)
    hf_config._attn_implementation = "eager"  # attentions are only returned by the explicit path
    theirs = GPT2LMHeadModel(hf_config).eval()
    ours = GPT(40, 12, 16, 4, 2).eval()
    ours.load_state_dict(from_hf_model(theirs).state_dict())
    idx = torch.randint(40, (2, 10), generator=torch.Generator().manual_seed(10))
    maps = attention_maps(ours, idx)  # (n_layers, B, H, T, T)
    assert maps.shape == (2, 2, 4, 10, 10)
    assert torch.allclose(maps, torch.stack(theirs(idx, output_attentions=True).attentions), atol=1e-5)


def test_attention_maps_read_any_model_with_the_contracts_names():
    """A learner's GPT is another class with the same module names: attention_maps needs nothing else."""

    class Theirs(torch.nn.Module):
        def __init__(self, model: GPT):
            super().__init__()
            self.tok_emb, self.pos_emb, self.drop = model.tok_emb, model.pos_emb, model.drop
            self.blocks = model.blocks

    model = _model().eval()
    idx = torch.randint(11, (1, 7), generator=torch.Generator().manual_seed(11))
    maps = attention_maps(Theirs(model), idx)
    assert torch.allclose(maps.sum(-1), torch.ones(2, 1, 2, 7))  # every row a distribution
    assert torch.count_nonzero(maps.triu(1)) == 0  # causal
    assert torch.equal(maps, attention_maps(model, idx))


# ---------------------------------------------------------------------------------------------------- cache


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_cache_gives_the_logits_of_full_recomputation(use_sdpa):
    """Lesson 10's KV cache in lesson 09's GPT: a prompt, then chunks of 1 and 3 positions, equal one full pass."""
    model = _model(use_sdpa=use_sdpa).eval()
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(12))
    full, _ = model(idx)
    cache = model.new_cache(2)
    assert isinstance(cache, KVCache) and len(cache.layers) == 2 and cache.length == 0
    assert all(layer.keys.shape == (2, 2, 0, 8) for layer in cache.layers)  # (B, H, 0, D)
    pieces = [model(idx[:, :3], cache=cache)[0]]
    for start, stop in [(3, 4), (4, 7), (7, 8)]:
        pieces.append(model(idx[:, start:stop], cache=cache)[0])
        assert cache.length == stop
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)
    with pytest.raises(ValueError, match="T=1 positions after 8 cached positions"):
        model(idx[:, :1], cache=cache)


def test_positions_after_the_cache_are_the_later_rows_of_the_table():
    # Feeding position 5 alone after a cache of 5 must read pos_emb row 5, not row 0: change row 5 and the cached
    # call's output moves, as the full pass's last position does.
    model = _model().eval()
    idx = torch.randint(11, (1, 6), generator=torch.Generator().manual_seed(13))
    cache = model.new_cache(1)
    model(idx[:, :5], cache=cache)
    before = model(idx[:, 5:], cache=cache)[0]
    with torch.no_grad():
        model.pos_emb.weight[5] += torch.linspace(-1, 1, 16)  # not a constant: LayerNorm would remove that
    cache = model.new_cache(1)
    model(idx[:, :5], cache=cache)
    after = model(idx[:, 5:], cache=cache)[0]
    assert not torch.allclose(after, before)
    assert torch.allclose(after, model(idx)[0][:, 5:], atol=1e-5)


def test_init_gpt2_scales_the_residual_projections_and_keeps_the_tie():
    model = init_gpt2(_model(d_model=64, n_layers=8), n_layers=8)
    assert model.lm_head.weight is model.tok_emb.weight
    out_proj = torch.cat([b.attn.out_proj.weight.flatten() for b in model.blocks])
    fc1 = torch.cat([b.mlp.fc1.weight.flatten() for b in model.blocks])
    assert abs(fc1.std().item() - 0.02) < 0.002
    assert abs(out_proj.std().item() - 0.02 / 4) < 0.0005  # 0.02 / sqrt(2 * 8)
    assert all(torch.equal(b.ln1.weight, torch.ones(64)) for b in model.blocks)
    assert all(torch.count_nonzero(b.attn.qkv.bias) == 0 for b in model.blocks)


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_compiled_forward_is_one_graph(use_sdpa):
    model = _model(use_sdpa=use_sdpa).eval()
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(8))
    assert_one_graph(model, idx, idx)
