"""course_lib.gpt2: the config, the model's mechanics (tying, init, padding), the KV cache, the counts."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from course_lib import gpt, multihead
from course_lib.blocks import TransformerBlock
from course_lib.gpt2 import (
    GPT2,
    GPT2Config,
    KVCache,
    PaddedHead,
    attend_with_cache,
    gpt2_flops_per_token,
    gpt2_parameter_count,
)
from tests.compile_check import assert_one_graph

# Published parameter counts of OpenAI's checkpoints as Hugging Face loads them (GPT2LMHeadModel.num_parameters()).
PUBLISHED = {"small": 124_439_808, "medium": 354_823_168, "large": 774_030_080, "xl": 1_557_611_200}


def _meta_model(config: GPT2Config) -> GPT2:
    with torch.device("meta"):  # shapes only: even GPT-2 xl costs no memory
        return GPT2(config)


def _tiny(seed: int = 0, **overrides) -> GPT2:
    torch.manual_seed(seed)
    return GPT2(GPT2Config.tiny(**overrides)).eval()


# ---------------------------------------------------------------------------------------------------- config


def test_presets_have_openais_sizes():
    sizes = {name: getattr(GPT2Config, name)() for name in PUBLISHED}
    assert [(c.n_layers, c.n_heads, c.d_model) for c in sizes.values()] == [
        (12, 12, 768),
        (24, 16, 1024),
        (36, 20, 1280),
        (48, 25, 1600),
    ]
    assert all(c.vocab_size == 50257 and c.context_length == 1024 for c in sizes.values())
    assert GPT2Config.small(dropout=0.1).dropout == 0.1  # presets take overrides


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPT2Config().n_layers = 3


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=100, n_heads=12), "d_model"),
        (dict(n_layers=0), "n_layers"),
        (dict(vocab_size=-1), "vocab_size"),
        (dict(dropout=1.5), "dropout"),
        (dict(pad_vocab_multiple=0), "pad_vocab_multiple"),
        (dict(context_length=2.0), "context_length"),
    ],
)
def test_config_rejects_bad_values_by_name(overrides, message):
    with pytest.raises(ValueError, match=message):
        GPT2Config(**overrides)


def test_config_rejects_a_non_bool_use_sdpa():
    with pytest.raises(TypeError, match="use_sdpa"):
        GPT2Config(use_sdpa="yes")


def test_vocabulary_padding_rounds_up_and_logits_keep_the_real_vocabulary():
    assert GPT2Config(pad_vocab_multiple=64).padded_vocab_size == 50304
    assert GPT2Config().padded_vocab_size == 50257
    model = _tiny(pad_vocab_multiple=64)  # 97 -> 128 rows
    assert model.tok_emb.weight.shape == (128, 16)
    idx = torch.randint(0, 97, (2, 7))
    logits, loss = model(idx, idx)
    assert logits.shape == (2, 7, 97)
    assert torch.allclose(loss, F.cross_entropy(logits.reshape(-1, 97), idx.reshape(-1)))
    assert isinstance(model.lm_head, PaddedHead) and model.lm_head.weight is model.tok_emb.weight
    # The padding rows change no logit: the same model without them computes the same numbers.
    unpadded = _tiny()
    state = {k: v[:97] if k in ("tok_emb.weight", "lm_head.weight") else v for k, v in model.state_dict().items()}
    unpadded.load_state_dict(state)
    assert torch.allclose(unpadded(idx)[0], logits, atol=1e-6)


# ---------------------------------------------------------------------------------------------------- model


def test_head_is_tied_to_the_token_embedding():
    model = _tiny()
    assert model.lm_head.weight is model.tok_emb.weight
    # Counted once: the tied model has exactly the formula's parameters, the untied formula V * C more.
    assert model.num_parameters() == gpt2_parameter_count(2, 2, 16, 97, 32)
    with torch.no_grad():
        model.tok_emb.weight[5] += 1.0  # one matrix: changing the embedding changes the head
    assert torch.equal(model.lm_head.weight[5], model.tok_emb.weight[5])


def test_model_is_made_of_lesson_06_blocks():
    model = _tiny()
    assert len(model.blocks) == 2 and all(type(b) is TransformerBlock for b in model.blocks)
    assert all(b.attn.causal and b.norm_first for b in model.blocks)
    assert isinstance(model.blocks[0].mlp.act, torch.nn.GELU) and model.blocks[0].mlp.act.approximate == "tanh"


def test_initialisation_scales_the_residual_projections():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=512, context_length=64, n_layers=8, n_heads=4, d_model=256)
    model = GPT2(config)
    residual = 0.02 / math.sqrt(2 * 8)
    block = model.blocks[3]
    # 65,536+ samples each: the sample std is within ~1% of the true one.
    for weight, std in [
        (block.attn.out_proj.weight, residual),
        (block.mlp.fc2.weight, residual),
        (block.attn.qkv.weight, 0.02),
        (block.mlp.fc1.weight, 0.02),
        (model.tok_emb.weight, 0.02),
        (model.pos_emb.weight, 0.02),
    ]:
        assert weight.std().item() == pytest.approx(std, rel=0.03)
    assert torch.all(block.attn.qkv.bias == 0) and torch.all(block.mlp.fc2.bias == 0)
    assert torch.all(block.ln1.weight == 1) and torch.all(model.ln_f.bias == 0)


def test_loss_at_initialisation_is_near_log_vocab():
    # Small init gives nearly uniform predictions: the loss starts at about ln V. (Targets independent of the
    # input: with targets = idx the tied head already favours the input token, and the loss starts lower.)
    model = _tiny(vocab_size=1000, d_model=64, n_heads=4)
    idx, targets = torch.randint(0, 1000, (2, 4, 32))
    _, loss = model(idx, targets)
    assert loss.item() == pytest.approx(math.log(1000), abs=0.05)


def test_loss_ignores_targets_of_minus_100():
    model = _tiny()
    idx = torch.randint(0, 97, (2, 6))
    targets = idx.clone()
    targets[:, :3] = -100
    logits, loss = model(idx, targets)
    expected = F.cross_entropy(logits[:, 3:].reshape(-1, 97), idx[:, 3:].reshape(-1))
    assert torch.allclose(loss, expected)


def test_sdpa_path_equals_the_explicit_path():
    explicit = _tiny()
    fast = GPT2(GPT2Config.tiny(use_sdpa=True)).eval()
    fast.load_state_dict(explicit.state_dict())
    assert all(b.attn.use_sdpa for b in fast.blocks) and not any(b.attn.use_sdpa for b in explicit.blocks)
    idx = torch.randint(0, 97, (3, 32))
    assert torch.allclose(explicit(idx)[0], fast(idx)[0], atol=1e-5)


def test_attention_maps_are_causal_distributions_from_the_same_pass():
    model = _tiny(use_sdpa=True)
    idx = torch.randint(0, 97, (2, 9))
    maps = gpt.attention_maps(model, idx)  # the one pass, whichever GPT: (n_layers, B, H, T, T)
    assert maps.shape == (2, 2, 2, 9, 9)
    for weights in maps:
        assert torch.allclose(weights.sum(-1), torch.ones(2, 2, 9))
        assert torch.all(weights.triu(diagonal=1) == 0)  # no weight on later positions
    # The first block's weights from the embeddings directly: what the pass computed, not another function.
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(9))
    _, expected = model.blocks[0].attn(model.blocks[0].ln1(x), need_weights=True)
    assert torch.allclose(maps[0], expected)
    assert not torch.allclose(maps[1], maps[0])


def test_prediction_at_a_position_ignores_later_tokens():
    model = _tiny()
    idx = torch.randint(0, 97, (1, 12))
    changed = idx.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 97
    assert torch.allclose(model(idx)[0][:, :8], model(changed)[0][:, :8], atol=1e-6)
    assert not torch.allclose(model(idx)[0][:, 8:], model(changed)[0][:, 8:])


def test_forward_rejects_too_long_inputs_and_float_ids():
    model = _tiny()
    with pytest.raises(ValueError, match="context_length 32"):
        model(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(TypeError, match="idx"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"idx.*0\.\.96"):
        GPT2(GPT2Config.tiny(pad_vocab_multiple=64))(torch.tensor([[3, 100]]))  # a padding row, not a token
    with pytest.raises(ValueError, match="targets"):
        model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(TypeError, match="config"):
        GPT2(dict(n_layers=2))


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_compiled_forward_is_one_graph(use_sdpa):
    # The input checks stay out of the graph (torch.compiler.is_compiling), and no block checks anything.
    model = _tiny(use_sdpa=use_sdpa, pad_vocab_multiple=64)
    idx = torch.randint(0, 97, (2, 12))
    assert_one_graph(model, idx, torch.roll(idx, -1, dims=1))


# ---------------------------------------------------------------------------------------------------- cache


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_cache_gives_the_logits_of_full_recomputation(use_sdpa):
    model = _tiny(use_sdpa=use_sdpa)
    idx = torch.randint(0, 97, (2, 20))
    full, _ = model(idx)
    cache = model.new_cache(2)
    prefill, _ = model(idx[:, :7], cache=cache)  # a prompt, then chunks of 1 and of 3 tokens
    pieces = [prefill]
    for start, stop in [(7, 8), (8, 11), (11, 12), (12, 20)]:
        pieces.append(model(idx[:, start:stop], cache=cache)[0])
        assert cache.length == stop
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)


def test_cache_refuses_overflow_and_other_batch_sizes():
    model = _tiny()
    cache = model.new_cache(1)
    model(torch.zeros(1, 30, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="after 30 cached positions"):
        model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="batch size 1"):
        model(torch.zeros(2, 1, dtype=torch.long), cache=model.new_cache(1))


def test_cache_holds_one_growing_layer_cache_per_block():
    model = _tiny()
    cache = model.new_cache(3)
    assert isinstance(cache, KVCache) and KVCache is gpt.KVCache  # lesson 09's GPT's cache, importable from here
    assert len(cache.layers) == model.config.n_layers and cache.length == 0 and cache.batch_size == 3
    assert all(layer.keys.shape == (3, 2, 0, 8) for layer in cache.layers)
    idx = torch.randint(0, 97, (3, 6))
    model(idx[:, :5], cache=cache)
    model(idx[:, 5:], cache=cache)
    assert cache.length == 6 and all(layer.values.shape == (3, 2, 6, 8) for layer in cache.layers)
    # Block 0's cache holds the keys its attention computes from the whole sequence: [q | k | v] -> k.
    x = model.blocks[0].ln1(model.tok_emb(idx) + model.pos_emb(torch.arange(6)))
    keys = multihead.split_heads(model.blocks[0].attn.qkv(x)[..., 16:32], 2)  # (B, H, T, D)
    assert torch.allclose(cache.layers[0].keys, keys, atol=1e-6)
    with pytest.raises(ValueError, match="batch_size"):
        KVCache(2, 0, 2, 8)


def test_attend_with_cache_is_the_one_multihead_attention_calls():
    assert attend_with_cache is multihead.attend_with_cache  # importable from here, where lesson 10 names it


# ---------------------------------------------------------------------------------------------------- counts


def test_parameter_count_of_gpt2_small_is_the_specs():
    assert gpt2_parameter_count(12, 12, 768, 50257, 1024) == 124_439_808
    assert gpt2_parameter_count(12, 12, 768, 50257, 1024, tied=False) == 124_439_808 + 50257 * 768


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_parameter_count_matches_the_model_and_the_published_figure(name):
    config = getattr(GPT2Config, name)()
    model = _meta_model(config)
    count = gpt2_parameter_count(config.n_layers, config.n_heads, config.d_model, 50257, 1024)
    assert count == model.num_parameters() == PUBLISHED[name]


def test_parameter_count_does_not_depend_on_heads_and_checks_them():
    assert gpt2_parameter_count(2, 1, 64, 100, 16) == gpt2_parameter_count(2, 8, 64, 100, 16)
    with pytest.raises(ValueError, match="d_model"):
        gpt2_parameter_count(2, 3, 64, 100, 16)


@pytest.mark.parametrize("training", [False, True])
def test_flops_per_token_agree_with_pytorchs_flop_counter(training):
    # FlopCounterMode counts 2 FLOPs per multiply-add of every matmul and attention; our formula also counts
    # biases and LayerNorm parameters in N (0.1% of GPT-2 small), so the two agree to within 0.5%.
    config, T = GPT2Config.small(), 256
    model = _meta_model(config)
    idx = torch.zeros(1, T, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as counter:
        _, loss = model(idx, idx)
        if training:
            loss.backward()
    measured = counter.get_total_flops() / T
    assert gpt2_flops_per_token(config, T, training=training) == pytest.approx(measured, rel=5e-3)


def test_flops_follow_the_six_n_rule():
    config = GPT2Config.small()
    n = 124_439_808 - 1024 * 768  # without the position table
    assert gpt2_flops_per_token(config, 1024) == 6 * n + 12 * 12 * 12 * 64 * 1024
    assert gpt2_flops_per_token(config, 1024, training=False) * 3 == gpt2_flops_per_token(config, 1024)
    with pytest.raises(ValueError, match="seq_len"):
        gpt2_flops_per_token(config, 0)
