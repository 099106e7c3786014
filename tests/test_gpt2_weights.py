"""course_lib.gpt2_weights against Hugging Face's GPT2LMHeadModel: same weights, same logits, both directions; and
lesson 10's `load_gpt2_weights` (the reference and the lesson's own solution) filling lesson 09's GPT and a GPT
written as a learner writes it."""

from __future__ import annotations

import os
import re
import socket

import pytest
import torch
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

from course_lib.generate import generate
from course_lib.gpt import GPT
from course_lib.gpt2 import GPT2, GPT2Config
from course_lib.gpt2_weights import (
    config_from_hf,
    from_hf_model,
    from_pretrained,
    load_gpt2_weights,
    pretrained_if_available,
    to_hf_model,
    to_hf_state_dict,
    weight_names,
)
from course_lib.workflow.course import grade_id
from tests.answers import define
from tests.learner_gpt import LearnerGPT
from tests.nbtools import read, source_path


def _hf_model(seed: int = 0, **sizes) -> GPT2LMHeadModel:
    sizes = {"vocab_size": 97, "n_positions": 32, "n_embd": 16, "n_layer": 2, "n_head": 2, **sizes}
    torch.manual_seed(seed)
    config = HFConfig(**sizes, bos_token_id=sizes["vocab_size"] - 1, eos_token_id=sizes["vocab_size"] - 1)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # Hugging Face starts biases and LayerNorms at 0 and 1: make them matter
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def _logits(model, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(idx)
    return out[0] if isinstance(out, tuple) else out.logits


@pytest.mark.parametrize("use_sdpa", [False, True])
@pytest.mark.parametrize("pad_vocab_multiple", [1, 64])
def test_loaded_model_gives_hugging_faces_logits(use_sdpa, pad_vocab_multiple):
    hf = _hf_model()
    ours = from_hf_model(hf, use_sdpa=use_sdpa, pad_vocab_multiple=pad_vocab_multiple).eval()
    idx = torch.randint(0, 97, (3, 32))
    expected = _logits(hf, idx)
    assert torch.allclose(_logits(ours, idx), expected, atol=1e-5, rtol=0)


def test_gpt2_small_sized_model_gives_hugging_faces_logits(record_property):
    # The full 124M configuration, randomly initialised (the Hub is not needed): every weight of every size.
    hf = _hf_model(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    ours = from_hf_model(hf).eval()
    assert ours.config == GPT2Config.small()
    idx = torch.randint(0, 50257, (1, 48))
    error = (_logits(ours, idx) - _logits(hf, idx)).abs().max().item()
    record_property("max_abs_logit_error_gpt2_small", error)
    print(f"GPT-2 small config, random weights, 48 tokens: max |logit difference| = {error:.2e}")
    assert error < 1e-4


def test_export_round_trips_exactly_and_builds_an_equal_hugging_face_model():
    hf = _hf_model()
    ours = from_hf_model(hf, pad_vocab_multiple=64)
    exported = to_hf_state_dict(ours)
    original = hf.state_dict()
    assert set(exported) <= set(original)
    assert all(torch.equal(exported[k], original[k]) for k in exported)
    rebuilt = to_hf_model(ours)
    idx = torch.randint(0, 97, (2, 20))
    assert torch.equal(_logits(rebuilt, idx), _logits(hf, idx))


def test_exported_tensors_are_copies():
    ours = from_hf_model(_hf_model())
    exported = to_hf_state_dict(ours)
    exported["transformer.h.0.attn.c_attn.weight"].zero_()
    assert ours.blocks[0].attn.qkv.weight.abs().sum() > 0


def test_conv1d_weights_are_transposed():
    hf = _hf_model()
    ours = from_hf_model(hf)
    c_attn = hf.transformer.h[1].attn.c_attn.weight  # (in, 3 out)
    assert c_attn.shape == (16, 48) and ours.blocks[1].attn.qkv.weight.shape == (48, 16)
    assert torch.equal(ours.blocks[1].attn.qkv.weight, c_attn.t())


def test_greedy_generation_matches_hugging_faces_generate():
    # An independent reference for the KV cache too: Hugging Face's generate uses its own cache.
    hf = _hf_model(seed=1)
    ours = from_hf_model(hf)
    prompt = torch.randint(0, 96, (2, 6))
    theirs = hf.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=20,
        do_sample=False,
        pad_token_id=96,
        eos_token_id=None,
    )
    assert torch.equal(generate(ours, prompt, 20, greedy=True), theirs)


def test_missing_or_unexpected_keys_are_named():
    state = _hf_model().state_dict()
    del state["transformer.h.1.mlp.c_fc.bias"]
    state["transformer.h.1.attn.c_attn.extra"] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"missing \['h.1.mlp.c_fc.bias'\], unexpected \['h.1.attn.c_attn.extra'\]"):
        load_gpt2_weights(GPT2(GPT2Config.tiny()), state)


def test_wrong_shapes_and_untied_heads_are_refused():
    state = _hf_model().state_dict()
    narrow = GPT2(GPT2Config.tiny(d_model=32))
    before = {k: v.clone() for k, v in narrow.state_dict().items()}
    with pytest.raises(
        ValueError, match=r"wte.weight has shape \(97, 16\) but must be \(97, 32\) \(for tok_emb.weight\)"
    ):
        load_gpt2_weights(narrow, state)
    assert all(torch.equal(v, before[k]) for k, v in narrow.state_dict().items())  # nothing half-loaded
    state32 = _hf_model(n_embd=32).state_dict()
    state32["transformer.h.1.attn.c_attn.weight"] = state32["transformer.h.1.attn.c_attn.weight"].t()
    with pytest.raises(
        ValueError, match=r"c_attn.weight has shape \(96, 32\) but must be \(32, 96\) \(Conv1D: the transpose"
    ):
        load_gpt2_weights(narrow, state32)
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(ValueError, match="tied to its token table"):
        load_gpt2_weights(GPT2(GPT2Config.tiny()), state)
    with pytest.raises(TypeError, match="state_dict"):
        load_gpt2_weights(GPT2(GPT2Config.tiny()), [1, 2])


def test_old_checkpoints_mask_buffers_and_a_bare_gpt2model_load():
    hf = _hf_model()
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    state["h.0.attn.bias"] = torch.ones(1, 1, 32, 32).tril()  # as stored by transformers < 4.31
    state["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    ours = load_gpt2_weights(GPT2(GPT2Config.tiny()).eval(), state)
    idx = torch.randint(0, 97, (1, 10))
    assert torch.allclose(_logits(ours, idx), _logits(hf, idx), atol=1e-5)


@pytest.mark.parametrize(
    "field, value",
    [("activation_function", "relu"), ("scale_attn_by_inverse_layer_idx", True), ("n_inner", 20)],
)
def test_hugging_face_variants_we_do_not_implement_are_refused(field, value):
    config = HFConfig(vocab_size=97, n_positions=32, n_embd=16, n_layer=2, n_head=2, **{field: value})
    with pytest.raises(ValueError, match=field):
        config_from_hf(config)


def test_from_pretrained_checks_the_name_before_downloading():
    with pytest.raises(ValueError, match="gpt2-tiny"):
        from_pretrained("gpt2-tiny")


def test_weight_names_cover_both_models_and_say_which_are_transposed():
    hf = _hf_model(n_layer=3)
    ours = from_hf_model(hf)
    names = weight_names(3)
    theirs = hf.state_dict()
    mine = ours.state_dict()
    assert {o for o, _, _ in names} == set(mine) and {h for _, h, _ in names} <= set(theirs)
    assert len(names) == 2 + 3 * 12 + 2 + 1
    for our_name, hf_name, transposed in names:
        expected = theirs[hf_name].t() if transposed else theirs[hf_name]
        assert torch.equal(mine[our_name], expected), (our_name, hf_name)
        assert transposed == hf_name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))  # Conv1D's
    assert sum(t for _, _, t in names) == 4 * 3  # c_attn, attn.c_proj, c_fc, mlp.c_proj of each block
    with pytest.raises(ValueError, match="n_layers"):
        weight_names(0)


def test_pretrained_if_available_says_why_not_instead_of_waiting(monkeypatch):
    # Whatever this machine's network: with HF_HUB_OFFLINE set and nothing cached, the answer is None and a reason.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", os.devnull + "-nothing-cached-here")
    model, why = pretrained_if_available("gpt2")
    assert model is None and "HF_HUB_OFFLINE" in why
    with pytest.raises(ValueError, match="gpt2-tiny"):
        pretrained_if_available("gpt2-tiny")
    with pytest.raises(ValueError, match="timeout"):
        pretrained_if_available("gpt2", timeout=0)


def _hub_reachable() -> str | None:
    """None when the 'gpt2' checkpoint can be had, else why not (checked in ~3 s at most, never hangs)."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return "HF_HUB_OFFLINE is set"
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
    except OSError as error:
        return f"huggingface.co is unreachable: {error}"
    return None


@pytest.mark.network
def test_openais_gpt2_checkpoint_gives_hugging_faces_logits():
    try:  # a checkpoint already in the Hugging Face cache needs no network
        hf = GPT2LMHeadModel.from_pretrained("gpt2", local_files_only=True).eval()
    except OSError:
        reason = _hub_reachable()
        if reason is not None:
            pytest.skip(f"needs OpenAI's gpt2 checkpoint from the Hugging Face Hub (not cached here); {reason}")
        try:
            hf = GPT2LMHeadModel.from_pretrained("gpt2").eval()
        except OSError as error:  # e.g. a proxy that lets the connection through but not the download
            pytest.skip(f"the gpt2 checkpoint could not be downloaded: {error}")
    ours = from_hf_model(hf).eval()
    idx = torch.tensor([[15496, 11, 314, 1101, 257, 3303, 2746, 11]])  # tiktoken: "Hello, I'm a language model,"
    assert (_logits(ours, idx) - _logits(hf, idx)).abs().max().item() < 1e-4
    assert torch.equal(generate(ours, idx, 8, greedy=True), generate(ours, idx, 8, greedy=True, use_cache=False))


# ------------------------------------------------------------------------------------------- load_gpt2_weights


def _lesson_solution() -> object:
    """Lesson 10's own `load_gpt2_weights`: the instructor source's answer cell, run as a notebook runs it."""
    cell = next(c for c in read(source_path("10_gpt2")).cells if grade_id(c) == "load_gpt2_weights")
    return define(re.sub(r"(?m)^\s*### (BEGIN|END) SOLUTION\s*$", "", cell.source), "load_gpt2_weights")


LOADERS = {"reference": load_gpt2_weights, "lesson-solution": _lesson_solution()}
SIZES = {"vocab_size": 41, "n_positions": 24, "n_embd": 24, "n_layer": 3, "n_head": 4}


@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
@pytest.mark.parametrize("cls", [GPT, LearnerGPT], ids=["course-gpt", "learner-style-gpt"])
def test_load_gpt2_weights_gives_lesson_09s_gpt_hugging_faces_logits(loader, cls):
    hf = _hf_model(seed=3, **SIZES)
    state = hf.state_dict()
    before = {k: v.clone() for k, v in state.items()}
    torch.manual_seed(4)
    model = cls(41, 24, 24, 4, 3).eval()
    assert loader(model, state) is model  # in place, and returned
    assert model.lm_head.weight is model.tok_emb.weight  # the head stays tied
    assert state.keys() == before.keys() and all(torch.equal(state[k], before[k]) for k in state)
    idx = torch.randint(0, 41, (2, 24), generator=torch.Generator().manual_seed(5))
    assert (_logits(model, idx) - _logits(hf, idx)).abs().max().item() < 1e-4  # the contract's fp32 tolerance


@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
def test_load_gpt2_weights_needs_no_head_and_skips_old_mask_buffers(loader):
    hf = _hf_model(seed=6)
    state = {k: v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    state["transformer.h.1.attn.bias"] = torch.ones(1, 1, 32, 32, dtype=torch.bool).tril()  # transformers < 4.31
    state["transformer.h.1.attn.masked_bias"] = torch.tensor(-1e4)
    model = loader(LearnerGPT(97, 32, 16, 2, 2).eval(), state)
    idx = torch.randint(0, 97, (1, 32), generator=torch.Generator().manual_seed(7))
    assert torch.allclose(_logits(model, idx), _logits(hf, idx), atol=1e-4)


@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
def test_load_gpt2_weights_names_the_first_key_whose_shape_does_not_fit(loader):
    state = _hf_model().state_dict()
    with pytest.raises(ValueError, match=r"transformer\.wte\.weight"):  # every matrix is wrong; wte comes first
        loader(LearnerGPT(97, 32, 32, 2, 2), state)
    state["transformer.h.1.mlp.c_fc.weight"] = state["transformer.h.1.mlp.c_fc.weight"][:, :-1]
    model = GPT(97, 32, 16, 2, 2)
    with pytest.raises(ValueError, match=r"transformer\.h\.1\.mlp\.c_fc\.weight"):
        loader(model, state)


def test_load_gpt2_weights_writes_nothing_before_every_shape_is_checked():
    state = _hf_model().state_dict()
    state["transformer.ln_f.bias"] = torch.zeros(17)
    model = GPT(97, 32, 16, 2, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"transformer\.ln_f\.bias has shape \(17,\) but must be \(16,\)"):
        load_gpt2_weights(model, state)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_load_gpt2_weights_refuses_a_model_without_lesson_09s_names():
    state = _hf_model().state_dict()
    with pytest.raises(ValueError, match="blocks"):
        load_gpt2_weights(torch.nn.Linear(2, 2), state)
    renamed = LearnerGPT(97, 32, 16, 2, 2)
    renamed.final_norm = renamed.ln_f
    del renamed.ln_f
    with pytest.raises(ValueError, match="model has no ln_f.weight"):
        load_gpt2_weights(renamed, state)


def test_the_course_gpt2_and_a_learners_gpt_loaded_alike_generate_the_same_ids():
    # The learner's class has no cache: generate recomputes; the course's GPT2 uses its KV cache. Same weights,
    # same ids, greedy and sampled, with the window sliding past the context (32).
    hf = _hf_model(seed=8)
    learner = load_gpt2_weights(LearnerGPT(97, 32, 16, 2, 2), hf.state_dict())
    course = from_hf_model(hf)
    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(9))
    for options in (dict(greedy=True), dict(temperature=0.8, top_k=20)):
        runs = [
            generate(m, prompt, 40, generator=torch.Generator().manual_seed(1), **options) for m in (learner, course)
        ]
        assert runs[0].shape == (2, 45) and torch.equal(runs[0], runs[1])


def test_hugging_face_initialises_as_lesson_10_says_course_lib_does():
    # Lesson 10: matrices and both tables at std 0.02, biases 0, LayerNorms (1, 0), the residual projections (the
    # two c_proj) at 0.02 / sqrt(2 n_layers) — in Hugging Face's GPT2LMHeadModel as in course_lib's GPT2.
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(HFConfig(vocab_size=5000, n_positions=1024, n_embd=256, n_layer=8, n_head=4))
    ours = GPT2(GPT2Config(vocab_size=5000, context_length=1024, d_model=256, n_heads=4, n_layers=8))
    scaled = 0.02 / (2 * 8) ** 0.5
    for model in (hf, ours):
        state = dict(model.named_parameters())
        for ours_name, hf_name, _ in weight_names(8)[:-1]:  # the head is the token table
            p = state[hf_name if model is hf else ours_name]
            if ours_name.endswith("bias") and ".ln" not in ours_name and not ours_name.startswith("ln_f"):
                assert torch.count_nonzero(p) == 0, ours_name
            elif ".ln" in ours_name or ours_name.startswith("ln_f"):
                assert torch.all(p == (1.0 if ours_name.endswith("weight") else 0.0)), ours_name
            else:
                std = scaled if ours_name.endswith(("out_proj.weight", "fc2.weight")) else 0.02
                assert abs(p.std().item() - std) < 0.05 * std, (type(model).__name__, ours_name, p.std().item())
