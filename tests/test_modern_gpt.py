"""Tests of course_lib.modern_gpt (Lesson 12): with GPT-2's switches it is lesson 09's GPT (names, initial weights,
logits); each switch does what it says; attention matches a computation written head by head; SDPA matches; with
every switch modern its blocks are ModernBlocks (the learner's where given), which a SwitchBlock equals, and it
keeps a KV cache of H_kv heads."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib import gpt, modern
from course_lib.gpt import init_gpt2
from course_lib.modern_gpt import ModernConfig, ModernGPT, ModernParts, SwitchAttention, SwitchBlock

V, T = 11, 12
ALL = dict(norm="rms", position="rope", mlp="swiglu", n_kv_heads=2, bias=False, qk_norm=True)
SWITCHED = dict(ALL, bias=True)  # every change but one: SwitchBlocks, built from the parts given


def _config(**switches) -> ModernConfig:
    return ModernConfig(V, T, d_model=16, n_heads=4, n_layers=2, **switches)


def _idx(seed: int = 0, B: int = 2, length: int = T) -> torch.Tensor:
    return torch.randint(V, (B, length), generator=torch.Generator().manual_seed(seed))


def test_gpt2_switches_give_lesson_09s_gpt_name_for_name_and_weight_for_weight():
    torch.manual_seed(0)
    theirs = gpt.init_gpt2(gpt.GPT(V, T, 16, 4, 2), 2)
    torch.manual_seed(0)
    ours = init_gpt2(ModernGPT(_config()))
    assert isinstance(ours, gpt.GPT) and type(ours).forward is gpt.GPT.forward  # one forward pass, lesson 09's
    assert ours.new_cache is None  # its blocks keep no KV cache: it offers none (generate recomputes)
    assert list(theirs.state_dict()) == list(ours.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(theirs.state_dict().values(), ours.state_dict().values(), strict=True))
    idx = _idx()
    with torch.no_grad():
        torch.testing.assert_close(ours(idx)[0], theirs(idx)[0], rtol=0, atol=0)
    assert ours.lm_head.weight is ours.tok_emb.weight


def test_each_switch_changes_what_it_names():
    model = ModernGPT(_config(**ALL))
    names = dict(model.named_parameters())
    assert model.pos_emb is None and "pos_emb.weight" not in model.state_dict()  # RoPE: no table, no buffer saved
    assert not any("rope" in key for key in model.state_dict())  # the angles are computed, never loaded
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    assert isinstance(model.blocks[0].ln1, modern.RMSNorm) and isinstance(model.ln_f, modern.RMSNorm)
    assert isinstance(model.blocks[0].mlp, modern.SwiGLU) and model.blocks[0].mlp.w1.out_features == 42
    assert model.blocks[0].attn.qkv.out_features == (4 + 2 * 2) * 4  # 4 query heads, 2 key and 2 value heads of 4
    assert not any(n.endswith("bias") for n in names)
    assert "blocks.0.attn.q_norm.weight" in names and "blocks.0.attn.k_norm.weight" in names
    untied = ModernGPT(_config(tie_weights=False))
    assert untied.lm_head.weight is not untied.tok_emb.weight
    assert (
        sum(p.numel() for p in untied.parameters())
        == sum(p.numel() for p in ModernGPT(_config()).parameters()) + V * 16
    )


def _heads(t: torch.Tensor, n: int) -> torch.Tensor:
    B, L, _ = t.shape
    return t.view(B, L, n, -1).transpose(1, 2)  # (B, n, T, D)


def _complex_rope(x: torch.Tensor) -> torch.Tensor:
    L, D = x.shape[-2], x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    turn = torch.polar(torch.ones(L, D // 2, dtype=torch.float64), torch.arange(L)[:, None] * theta)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape).to(x.dtype)


def test_attention_with_every_switch_matches_a_head_by_head_computation():
    torch.manual_seed(1)
    config = _config(**ALL)
    layer = init_gpt2(ModernGPT(config)).blocks[0].attn
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        got = layer(x)  # RoPE's angles are the layer's own, positions 0..6
        q, k, v = (x @ layer.qkv.weight.T).split([16, 8, 8], dim=-1)
        q, k, v = _heads(q, 4), _heads(k, 2), _heads(v, 2)  # (B, 4, 7, 4), (B, 2, 7, 4) x 2
        rms = lambda t, g: t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * g  # noqa: E731
        q, k = _complex_rope(rms(q, layer.q_norm.weight)), _complex_rope(rms(k, layer.k_norm.weight))
        heads = []
        for h in range(4):  # query head h reads key/value head h // 2
            scores = q[:, h] @ k[:, h // 2].transpose(-2, -1) / math.sqrt(4)
            scores = scores.masked_fill(torch.triu(torch.ones(7, 7, dtype=torch.bool), 1), float("-inf"))
            heads.append(scores.softmax(-1) @ v[:, h // 2])
        expected = torch.cat(heads, dim=-1) @ layer.out_proj.weight.T
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("switches", [{}, ALL, dict(position="rope", n_kv_heads=1)])
def test_sdpa_computes_the_same_model(switches):
    torch.manual_seed(2)
    explicit = init_gpt2(ModernGPT(_config(**switches)))
    fused = ModernGPT(_config(**switches, use_sdpa=True))
    fused.load_state_dict(explicit.state_dict())
    idx = _idx(3)
    with torch.no_grad():
        torch.testing.assert_close(fused(idx)[0], explicit(idx)[0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("switches", [{}, ALL])
def test_the_model_is_causal_and_its_loss_is_the_mean_cross_entropy(switches):
    torch.manual_seed(4)
    model = init_gpt2(ModernGPT(_config(**switches))).eval()
    idx, targets = _idx(5), _idx(6)
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    with torch.no_grad():
        logits, loss = model(idx, targets)
        torch.testing.assert_close(model(changed)[0][:, :-1], logits[:, :-1])
        torch.testing.assert_close(loss, F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)))
    with pytest.raises(ValueError, match="context_length"):
        model(_idx(length=T + 1))


def test_init_gpt2_scales_every_switchs_residual_projections():
    torch.manual_seed(5)
    model = init_gpt2(ModernGPT(ModernConfig(V, T, d_model=128, n_heads=4, n_layers=8, mlp="swiglu", norm="rms")))
    block = model.blocks[0]
    residual = 0.02 / math.sqrt(16)
    assert block.mlp.w2.weight.std().item() == pytest.approx(residual, rel=0.1)
    assert block.attn.out_proj.weight.std().item() == pytest.approx(residual, rel=0.1)
    assert block.mlp.w1.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.equal(block.ln1.weight, torch.ones(128))


@pytest.mark.parametrize(
    ("changes", "word"),
    [
        (dict(n_kv_heads=3), "n_kv_heads"),
        (dict(norm="batch"), "norm"),
        (dict(d_model=20, n_heads=4, position="rope"), "RoPE"),
        (dict(mlp="relu"), "mlp"),
    ],  # fmt: skip
)
def test_config_refuses_what_cannot_be_built(changes, word):
    with pytest.raises(ValueError, match=word):
        ModernConfig(V, T, **{"d_model": 16, "n_heads": 4, **changes})


def test_attention_alone_needs_no_model():
    layer = SwitchAttention(_config(n_kv_heads=1))
    assert layer(torch.randn(1, 5, 16)).shape == (1, 5, 16)


@pytest.mark.parametrize("qk_norm", [False, True])
def test_every_switch_modern_gives_modern_blocks_which_a_switch_block_equals(qk_norm):
    """The same names, the same initial draws and the same function: the ladder's last SwitchBlock and the lesson's
    ModernBlock are one block written twice, and the model uses the ModernBlock."""
    config = _config(**dict(ALL, qk_norm=qk_norm))
    torch.manual_seed(0)
    model = init_gpt2(ModernGPT(config))
    assert all(type(b) is modern.ModernBlock for b in model.blocks) and config.is_modern
    assert not _config(**SWITCHED).is_modern and type(ModernGPT(_config(**SWITCHED)).blocks[0]) is SwitchBlock
    torch.manual_seed(0)
    as_switches = ModernParts(ModernBlock=lambda *args, **kwargs: SwitchBlock(config))
    switched = init_gpt2(ModernGPT(config, as_switches))
    assert all(type(b) is SwitchBlock for b in switched.blocks)
    assert list(switched.state_dict()) == list(model.state_dict())
    assert all(
        torch.equal(a, b) for a, b in zip(switched.state_dict().values(), model.state_dict().values(), strict=True)
    )
    idx = _idx(2)
    with torch.no_grad():
        torch.testing.assert_close(switched(idx)[0], model(idx)[0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_a_modern_model_keeps_a_cache_of_its_key_value_heads(use_sdpa):
    """Fed in pieces through its KV cache, the model computes the logits of the whole sequence at once; the cache
    holds H_kv = 2 heads a layer, not H = 4; a switched model offers no cache."""
    from course_lib import generate

    torch.manual_seed(6)
    model = init_gpt2(ModernGPT(_config(**ALL, use_sdpa=use_sdpa))).eval()
    idx = _idx(7)
    with torch.no_grad():
        whole = model(idx)[0]
        cache = model.new_cache(2)
        pieces = [model(idx[:, a:b], cache=cache)[0] for a, b in ((0, 5), (5, 6), (6, T))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, atol=1e-5, rtol=1e-4)
    assert cache.length == T and [tuple(c.keys.shape) for c in cache.layers] == [(2, 2, T, 4)] * 2
    cached = generate.generate(model, idx[:, :3], 20, greedy=True)  # slides its window past T = 12 positions
    assert torch.equal(cached, generate.generate(model, idx[:, :3], 20, greedy=True, use_cache=False))
    assert ModernGPT(_config(**SWITCHED)).new_cache is None


# --- ModernParts: the ladder's models built from the learner's answers --------------------------------------------


def _their_rms_norm(x, weight, eps=1e-6):  # written another way: PyTorch's own
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _their_rope_attention(q, k, v, base=10000.0):  # complex-number RoPE, then PyTorch's fused attention
    from tests.test_modern import _complex_rope

    return F.scaled_dot_product_attention(
        _complex_rope(q, base).to(q.dtype), _complex_rope(k, base).to(k.dtype), v, is_causal=True
    )


class _TheirSwiGLU(torch.nn.Module):
    def __init__(self, d_model, d_hidden, bias=False):
        super().__init__()
        self.w1 = torch.nn.Linear(d_model, d_hidden, bias=bias)
        self.w3 = torch.nn.Linear(d_model, d_hidden, bias=bias)
        self.w2 = torch.nn.Linear(d_hidden, d_model, bias=bias)

    def forward(self, x):
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))


def _their_repeat_kv(x, n_rep):  # a loop over the query heads
    return torch.stack([x[:, h // n_rep] for h in range(x.shape[1] * n_rep)], dim=1)


def _interleaved_repeat_kv(x, n_rep):  # the named mistake: head h reads key/value head h % H_kv
    return x.repeat(1, n_rep, 1, 1)


THEIRS = dict(
    rms_norm=_their_rms_norm, rope_attention=_their_rope_attention, SwiGLU=_TheirSwiGLU, repeat_kv=_their_repeat_kv
)


@pytest.mark.parametrize(
    "switches", [SWITCHED, dict(ALL, bias=True, qk_norm=False), dict(norm="rms", position="rope"), ALL]
)
def test_a_model_built_from_other_correct_parts_is_the_same_model(switches):
    torch.manual_seed(0)
    ours = init_gpt2(ModernGPT(_config(**switches)))
    torch.manual_seed(0)
    theirs = init_gpt2(ModernGPT(_config(**switches), ModernParts(**THEIRS)))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values(), strict=True))
    idx = _idx(3)
    with torch.no_grad():
        torch.testing.assert_close(theirs(idx)[0], ours(idx)[0], rtol=1e-5, atol=1e-5)
    theirs(idx, idx)[1].backward()  # their parts train too: every parameter gets a gradient
    assert all(p.grad is not None for p in theirs.parameters())


@pytest.mark.parametrize(
    "part, wrong",
    [
        ("repeat_kv", _interleaved_repeat_kv),
        ("rms_norm", lambda x, weight, eps=1e-6: F.layer_norm(x, (x.shape[-1],), weight, None, eps)),
        ("rope_attention", lambda q, k, v, base=10000.0: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
    ],
)
def test_the_parts_given_are_the_parts_run(part, wrong):
    """A wrong part changes the model's output: the model really calls what it is given."""
    torch.manual_seed(0)
    ours = init_gpt2(ModernGPT(_config(**SWITCHED)))
    torch.manual_seed(0)
    theirs = init_gpt2(ModernGPT(_config(**SWITCHED), ModernParts(**{part: wrong})))
    idx = _idx(4)
    with torch.no_grad():
        assert (theirs(idx)[0] - ours(idx)[0]).abs().max() > 1e-3


def test_a_given_swiglu_class_is_the_one_built_and_sdpa_bypasses_rope_attention():
    calls = []

    def counted(q, k, v, base=10000.0):
        calls.append(q.shape)
        return _their_rope_attention(q, k, v, base)

    model = ModernGPT(_config(**SWITCHED), ModernParts(SwiGLU=_TheirSwiGLU, rope_attention=counted))
    assert all(isinstance(block.mlp, _TheirSwiGLU) for block in model.blocks)
    model(_idx())
    assert calls == [(2, 4, T, 4)] * 2  # once per layer, with the key/value heads already repeated to 4
    fused = ModernGPT(_config(**SWITCHED, use_sdpa=True), ModernParts(rope_attention=counted))
    fused(_idx())
    assert len(calls) == 2  # PyTorch's kernel does the attention: the rotation is the model's own


class _TheirModernBlock(torch.nn.Module):
    """A ModernBlock written another way: the contract's arguments and names, RMSNorm from PyTorch."""

    def __init__(self, d_model, n_heads, n_kv_heads, d_hidden, qk_norm=False, eps=1e-6, rope_base=10000.0):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.RMSNorm(d_model, eps=eps), torch.nn.RMSNorm(d_model, eps=eps)
        self.attn = modern.ModernAttention(d_model, n_heads, n_kv_heads, qk_norm, rope_base)
        self.mlp = _TheirSwiGLU(d_model, d_hidden)
        self.built_with = dict(eps=eps, rope_base=rope_base, qk_norm=qk_norm)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln1(x), cache=cache)
        return x + self.mlp(self.ln2(x))


def test_a_modern_model_is_built_from_the_modern_block_given_with_the_configs_arguments():
    config = _config(**ALL, rope_base=500.0, norm_eps=1e-5)
    model = ModernGPT(config, ModernParts(ModernBlock=_TheirModernBlock))
    assert all(type(b) is _TheirModernBlock for b in model.blocks)
    assert model.blocks[0].built_with == dict(eps=1e-5, rope_base=500.0, qk_norm=True)
    assert model.blocks[0].attn.n_kv_heads == 2 and model.blocks[0].mlp.w1.out_features == config.d_hidden
    fused = ModernGPT(config.replace(use_sdpa=True), ModernParts(ModernBlock=_TheirModernBlock))  # no use_sdpa= for it
    assert type(fused.blocks[0]) is _TheirModernBlock
