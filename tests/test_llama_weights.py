"""Tests of course_lib.llama_weights (Lesson 12) against Hugging Face's `LlamaForCausalLM` with random weights, at a
small size with grouped-query attention (4 query heads, 2 key/value heads), its head tied and untied: the reference
loader into the course's ModernGPT, and an independently written learner-style block and loader (the grader tests'
right answers, tests/test_grading_modern.py, which share no code with course_lib) into a ModernGPT of that block.
Both must give Hugging Face's logits, the same logits fed one token at a time through their KV cache, and Hugging
Face's greedy ids; and so must a whole learner-style model written in this file, embedding to head, with its own
cache and greedy loop (`LEARNER_MODEL`), loaded by either loader. Then the permutation itself, the config, and
every error the contract names."""

from __future__ import annotations

import pytest
import torch

from course_lib import generate, llama_weights
from course_lib.modern_gpt import COURSE_PARTS, ModernConfig, ModernGPT, ModernParts
from tests.answers import define
from tests.test_grading_modern import LOAD_LLAMA, MODERN_BLOCK

transformers = pytest.importorskip("transformers")

V, CONTEXT = 61, 20


def _config(tied: bool) -> ModernConfig:
    return ModernConfig(
        V, CONTEXT, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, norm="rms", position="rope", mlp="swiglu",
        bias=False, tie_weights=tied, mlp_hidden=72, norm_eps=1e-5, rope_base=300.0,
    )  # fmt: skip


def _hf(config: ModernConfig, seed: int = 0):
    """A LlamaForCausalLM of `config` with weights that make every piece count (gains away from 1)."""
    torch.manual_seed(seed)
    hf = transformers.LlamaForCausalLM(llama_weights.llama_config_from(config)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 if p.dim() == 2 else 1 + 0.3 * torch.randn_like(p))
    return hf


def _ids(seed: int = 1, B: int = 2, T: int = CONTEXT) -> torch.Tensor:
    return torch.randint(V, (B, T), generator=torch.Generator().manual_seed(seed))


def _hf_greedy(hf, prompt: torch.Tensor, n: int) -> torch.Tensor:
    hf.generation_config.eos_token_id = None  # n new ids, none of them a stop
    return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, do_sample=False)


def _built(who: str, hf) -> tuple[ModernGPT, object]:
    """A model of hf's configuration and the loader to fill it: the course's, or the learner-style ones."""
    if who == "course":
        parts, load = COURSE_PARTS, llama_weights.load_llama_weights
    else:
        parts, load = (
            ModernParts(ModernBlock=define(MODERN_BLOCK, "ModernBlock")),
            define(LOAD_LLAMA, "load_llama_weights"),
        )
    return ModernGPT(llama_weights.config_from_llama(hf.config), parts).eval(), load


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("who", ["course", "learner-style"])
def test_a_random_llama_gives_hugging_faces_logits_cached_logits_and_greedy_ids(who, tied):
    hf = _hf(_config(tied))
    model, load = _built(who, hf)
    state = hf.state_dict()
    kept = {k: v.clone() for k, v in state.items()}
    assert load(model, state) is model
    assert all(torch.equal(state[k], kept[k]) for k in kept)  # the state dict is left as it was
    assert (model.lm_head.weight is model.tok_emb.weight) == tied
    ids = _ids()
    with torch.no_grad():
        theirs = hf(ids).logits
        torch.testing.assert_close(model(ids)[0], theirs, atol=1e-4, rtol=0)
        cache = model.new_cache(2)  # a prefill of 7 positions, a chunk of 5, then one token a step
        pieces = [
            model(ids[:, a:b], cache=cache)[0] for a, b in ((0, 7), (7, 12), *((t, t + 1) for t in range(12, 20)))
        ]
        torch.testing.assert_close(torch.cat(pieces, dim=1), theirs, atol=1e-4, rtol=0)
        assert cache.length == CONTEXT and cache.layers[0].keys.shape[1] == 2  # two key/value heads cached
    ours = generate.generate(model, ids[:, :6], 12, greedy=True)  # through the cache
    assert torch.equal(ours, _hf_greedy(hf, ids[:, :6], 12))


# A learner's whole model, written here on its own (no course_lib class in it): an embedding, the learner-style blocks
# above, PyTorch's RMSNorm, a head tied or not, and its own cache (one object with .keys and .values per block).
LEARNER_MODEL = (
    MODERN_BLOCK
    + """

import types


class LearnerLlama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, H = cfg.hidden_size, cfg.num_attention_heads
        self.tok_emb = nn.Embedding(cfg.vocab_size, C)
        self.blocks = nn.ModuleList(
            ModernBlock(C, H, cfg.num_key_value_heads, cfg.intermediate_size, eps=cfg.rms_norm_eps,
                        rope_base=cfg.rope_parameters["rope_theta"])
            for _ in range(cfg.num_hidden_layers)
        )
        self.ln_f = nn.RMSNorm(C, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(C, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def empty_cache(self, B):
        attn = self.blocks[0].attn
        shape = (B, attn.n_kv_heads, 0, attn.d_head)
        return [types.SimpleNamespace(keys=torch.zeros(shape), values=torch.zeros(shape)) for _ in self.blocks]

    def forward(self, idx, caches=None):
        x = self.tok_emb(idx)
        for i, block in enumerate(self.blocks):
            x = block(x, cache=None if caches is None else caches[i])
        return self.lm_head(self.ln_f(x))

    @torch.no_grad()
    def greedy(self, prompt, n):
        caches = self.empty_cache(prompt.shape[0])
        ids, new = prompt, prompt
        for _ in range(n):
            new = self(new, caches)[:, -1:].argmax(dim=-1)
            ids = torch.cat([ids, new], dim=1)
        return ids
"""
)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_an_independently_written_learner_model_loads_a_random_llama(tied):
    """The learner-style loader (and the course's, for comparison) fill a model written here from scratch: Hugging
    Face's logits, the same logits through its own cache (a prompt, then one token at a time), Hugging Face's greedy
    ids. The model built with RoPE's classic cache bug (new positions rotated from 0) computes the same logits without
    a cache and is caught by the cached comparison."""
    hf = _hf(_config(tied))
    LearnerLlama = define(LEARNER_MODEL, "LearnerLlama")
    ids = _ids()
    with torch.no_grad():
        theirs = hf(ids).logits
    for load in (define(LOAD_LLAMA, "load_llama_weights"), llama_weights.load_llama_weights):
        model = LearnerLlama(hf.config).eval()
        assert load(model, hf.state_dict()) is model and (model.lm_head.weight is model.tok_emb.weight) == tied
        with torch.no_grad():
            torch.testing.assert_close(model(ids), theirs, atol=1e-4, rtol=0)
            caches = model.empty_cache(2)
            pieces = [model(ids[:, :9], caches), *(model(ids[:, t : t + 1], caches) for t in range(9, CONTEXT))]
            torch.testing.assert_close(torch.cat(pieces, dim=1), theirs, atol=1e-4, rtol=0)
        assert caches[0].keys.shape == (2, 2, CONTEXT, 8)  # the two key/value heads, every position
        assert torch.equal(model.greedy(ids[:, :6], 12), _hf_greedy(hf, ids[:, :6], 12))

    buggy = define(LEARNER_MODEL.replace("first = 0 if cache is None else cache.keys.shape[2]", "first = 0"),
                   "LearnerLlama")(hf.config).eval()  # fmt: skip
    llama_weights.load_llama_weights(buggy, hf.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(buggy(ids), theirs, atol=1e-4, rtol=0)  # without a cache, nothing shows
        caches = buggy.empty_cache(2)
        stepped = torch.cat([buggy(ids[:, :9], caches), *(buggy(ids[:, t : t + 1], caches) for t in range(9, 20))], 1)
    assert (stepped[:, 9:] - theirs[:, 9:]).abs().max() > 1e-2  # through the cache, every new position is wrong


def test_the_reordered_rows_are_what_makes_the_scores_hugging_faces():
    """Loaded without the permutation (q_proj and k_proj copied as they are) the model computes something else."""
    hf = _hf(_config(True))
    model = llama_weights.load_llama_weights(
        ModernGPT(llama_weights.config_from_llama(hf.config)).eval(), hf.state_dict()
    )
    with torch.no_grad():
        for i, block in enumerate(model.blocks):
            q = hf.state_dict()[f"model.layers.{i}.self_attn.q_proj.weight"]
            k = hf.state_dict()[f"model.layers.{i}.self_attn.k_proj.weight"]
            block.attn.qkv.weight[:48].copy_(torch.cat([q, k]))
        assert (model(_ids())[0] - hf(_ids()).logits).abs().max() > 1e-2


def test_rotate_half_to_pairs_moves_each_heads_rows_as_the_contract_says():
    H, D, C = 3, 6, 5
    w = torch.arange(H * D * C, dtype=torch.float64).reshape(H * D, C)
    out = llama_weights.rotate_half_to_pairs(w, H)
    for h in range(H):
        for i in range(D // 2):
            assert torch.equal(out[h * D + 2 * i], w[h * D + i])
            assert torch.equal(out[h * D + 2 * i + 1], w[h * D + D // 2 + i])
    with pytest.raises(ValueError, match="channel pairs"):
        llama_weights.rotate_half_to_pairs(torch.zeros(9, 2), 3)  # D = 3 is odd


def test_rotating_halves_is_rotating_pairs_of_the_reordered_channels():
    """Hugging Face's rotate-half RoPE of x equals, channel for channel, the course's pair rotation of the reordered
    x: the reason the rows can be moved once, in the weights, instead of changing the attention."""
    from course_lib.position import apply_rope, rope_rotate_half

    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    order = llama_weights.rotate_half_to_pairs(torch.eye(8, dtype=torch.float64), 1)  # a permutation matrix
    torch.testing.assert_close(apply_rope(x @ order.T), rope_rotate_half(x) @ order.T)


def test_config_from_llama_reads_objects_and_dicts_and_refuses_what_modern_gpt_lacks():
    config = _config(False)
    hf_config = llama_weights.llama_config_from(config)
    assert llama_weights.config_from_llama(hf_config) == config
    as_json = {**hf_config.to_dict(), "rope_theta": 300.0}
    as_json.pop("rope_parameters", None)
    assert llama_weights.config_from_llama(as_json) == config  # config.json of a transformers 4 checkpoint
    assert llama_weights.config_from_llama(hf_config, context_length=8).context_length == 8
    scaled = {**as_json, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    with pytest.raises(ValueError, match="scales RoPE"):
        llama_weights.config_from_llama(scaled)
    for key, value in (("attention_bias", True), ("mlp_bias", True), ("hidden_act", "gelu"), ("head_dim", 16)):
        with pytest.raises(ValueError, match=key):
            llama_weights.config_from_llama({**as_json, key: value})
    with pytest.raises(ValueError, match="QK-norm"):
        llama_weights.llama_config_from(config.replace(qk_norm=True))


def test_older_and_shorter_state_dicts_load_too():
    """A LlamaModel's keys (no "model." prefix, no head) into a tied model, with the rotary_emb.inv_freq buffers older
    checkpoints keep: the same logits."""
    hf = _hf(_config(True))
    state = {k.removeprefix("model."): v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    state["layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
    model = llama_weights.load_llama_weights(ModernGPT(llama_weights.config_from_llama(hf.config)).eval(), state)
    with torch.no_grad():
        torch.testing.assert_close(model(_ids())[0], hf(_ids()).logits, atol=1e-4, rtol=0)


@pytest.mark.parametrize("who", ["course", "learner-style"])
def test_what_does_not_fit_is_named_and_nothing_is_written(who):
    hf = _hf(_config(True))
    model, load = _built(who, hf)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = dict(hf.state_dict())
    key = "model.layers.1.self_attn.k_proj.weight"
    state[key] = state[key][:-2]
    with pytest.raises(ValueError, match="layers.1.self_attn.k_proj.weight"):
        load(model, state)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # checked before writing
    missing = dict(hf.state_dict())
    del missing["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(KeyError, match="layers.1.mlp.up_proj.weight"):
        load(model, missing)
    head = {**hf.state_dict(), "lm_head.weight": hf.state_dict()["lm_head.weight"] + 1}
    with pytest.raises(ValueError, match="lm_head.weight"):
        load(model, head)
    wide, _ = _built(who, _hf(_config(True).replace(d_model=64, n_heads=8, n_kv_heads=4)))
    with pytest.raises(ValueError, match="embed_tokens.weight"):
        load(wide, hf.state_dict())


def test_the_reference_refuses_weights_a_llama_block_does_not_have():
    hf = _hf(_config(True))
    state = {**hf.state_dict(), "model.layers.0.self_attn.q_proj.bias": torch.zeros(32)}
    with pytest.raises(ValueError, match="q_proj.bias"):
        llama_weights.load_llama_weights(ModernGPT(llama_weights.config_from_llama(hf.config)), state)
