"""Lesson 12 graders (course_lib.grading.modern): every known mistake has a buggy answer whose message must name it;
the tests run through tests/grader_kit.py, like those of lessons 04 to 06."""

from __future__ import annotations

import pytest
import torch

from course_lib.grading import modern as grading
from tests.grader_kit import GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "12_beyond_gpt2"
RMS, ROPE, SWIGLU, REPEAT = "rms_norm", "rope_attention", "SwiGLU", "repeat_kv"
ATTENTION, BLOCK, NS, LOAD = "ModernAttention", "ModernBlock", "newton_schulz", "load_llama_weights"

# Right answers, written independently of course_lib: RoPE here turns each channel pair into a complex number and
# multiplies it by e^(i p θ), which is a rotation by p θ; the causal mask is built with triu.
RMS_NORM = """
import torch

def rms_norm(x, weight, eps=1e-6):
    ms = (x * x).mean(dim=-1, keepdim=True)
    scale = torch.rsqrt(ms + eps)
    return weight * (x * scale)
"""

ROPE_ATTENTION = """
import math
import torch

def rope_attention(q, k, v, base=10000.0):
    T, D = q.shape[-2], q.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    turn = torch.polar(torch.ones(T, D // 2, dtype=torch.float64), torch.arange(T)[:, None] * theta)

    def rotate(t):
        pairs = torch.view_as_complex(t.double().reshape(*t.shape[:-1], D // 2, 2).contiguous())
        return torch.view_as_real(pairs * turn).reshape(t.shape).to(t.dtype)

    qr, kr = rotate(q), rotate(k)
    scores = qr @ kr.transpose(-1, -2) * (1 / math.sqrt(D))
    blocked = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(blocked, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v
"""

SWIGLU_ANSWER = """
import torch
from torch import nn

class SwiGLU(nn.Module):
    def __init__(self, d_model, d_hidden, bias=False):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_hidden, bias=bias)
        self.w2 = nn.Linear(d_hidden, d_model, bias=bias)
        self.w3 = nn.Linear(d_model, d_hidden, bias=bias)

    def forward(self, x):
        gate = self.w1(x)
        gate = gate * torch.sigmoid(gate)
        up = self.w3(x)
        return self.w2(gate * up)
"""

REPEAT_KV = """
import torch

def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    return torch.repeat_interleave(x, n_rep, dim=1)
"""

# The modern attention written another way: RoPE by complex multiplication at the positions after the cache, the
# key/value heads gathered by index, the future masked with triu, PyTorch's RMSNorm for QK-norm.
MODERN_ATTENTION = """
import math
import torch
from torch import nn


class ModernAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, qk_norm=False, rope_base=10000.0):
        super().__init__()
        if n_heads % n_kv_heads:
            raise ValueError(f"{n_heads} query heads do not split into groups for {n_kv_heads} key/value heads")
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_model // n_heads
        self.base = rope_base
        self.qkv = nn.Linear(d_model, (n_heads + 2 * n_kv_heads) * self.d_head, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        if qk_norm:
            self.q_norm = nn.RMSNorm(self.d_head, eps=1e-6)
            self.k_norm = nn.RMSNorm(self.d_head, eps=1e-6)
        else:
            self.q_norm = self.k_norm = None

    def rotate(self, t, first):
        D, n = t.shape[-1], t.shape[-2]
        theta = self.base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        where = torch.arange(first, first + n, dtype=torch.float64)
        turn = torch.polar(torch.ones(n, D // 2, dtype=torch.float64), where[:, None] * theta)
        pairs = torch.view_as_complex(t.double().reshape(*t.shape[:-1], D // 2, 2).contiguous())
        return torch.view_as_real(pairs * turn).reshape(t.shape).to(t.dtype)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        H, G, D = self.n_heads, self.n_kv_heads, self.d_head
        qkv = self.qkv(x)
        q = qkv[..., : H * D].reshape(B, T, H, D).permute(0, 2, 1, 3)
        k = qkv[..., H * D : (H + G) * D].reshape(B, T, G, D).permute(0, 2, 1, 3)
        v = qkv[..., (H + G) * D :].reshape(B, T, G, D).permute(0, 2, 1, 3)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        first = 0 if cache is None else cache.keys.shape[2]
        q, k = self.rotate(q, first), self.rotate(k, first)
        if cache is not None:
            k = torch.cat([cache.keys, k], dim=2)
            v = torch.cat([cache.values, v], dim=2)
            cache.keys, cache.values = k, v
        group = torch.arange(H) // (H // G)
        k, v = k[:, group], v[:, group]
        scores = q @ k.transpose(-1, -2) * (1 / math.sqrt(D))
        future = torch.ones(T, first + T, dtype=torch.bool).triu(first + 1)
        scores = scores.masked_fill(future, float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(B, T, C))
"""

# The block, standing on its own: the attention above, the SwiGLU above, PyTorch's RMSNorm.
MODERN_BLOCK = (
    MODERN_ATTENTION
    + SWIGLU_ANSWER
    + """

class ModernBlock(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, d_hidden, qk_norm=False, eps=1e-6, rope_base=10000.0):
        super().__init__()
        self.ln1 = nn.RMSNorm(d_model, eps=eps)
        self.attn = ModernAttention(d_model, n_heads, n_kv_heads, qk_norm, rope_base)
        self.ln2 = nn.RMSNorm(d_model, eps=eps)
        self.mlp = SwiGLU(d_model, d_hidden)

    def forward(self, x, cache=None):
        h = x + self.attn(self.ln1(x), cache=cache)
        return h + self.mlp(self.ln2(h))
"""
)

# Newton-Schulz with the quintic's three terms written out, the norm as the root of the sum of squares.
NEWTON_SCHULZ = """
import torch


def newton_schulz(G, steps=5, eps=1e-7):
    a, b, c = 3.4445, -4.7750, 2.0315
    flip = G.size(0) > G.size(1)
    X = G.mT if flip else G
    X = X / ((X * X).sum().sqrt() + eps)
    for _ in range(steps):
        XXt = X @ X.mT
        X = a * X + b * (XXt @ X) + c * (XXt @ (XXt @ X))
    return X.mT if flip else X
"""

# The loader with its own loops: each head's rows moved one by one, every shape checked before the first copy.
LOAD_LLAMA = """
import torch


def load_llama_weights(model, state_dict):
    sd = {k.removeprefix("model."): v for k, v in state_dict.items() if "rotary_emb" not in k}

    def take(key):
        if key not in sd:
            raise KeyError(f"the state dict has no model.{key}")
        return sd[key]

    def pairs(w, heads):
        D = w.shape[0] // heads
        out = torch.empty_like(w)
        for h in range(heads):
            for i in range(D // 2):
                out[h * D + 2 * i] = w[h * D + i]
                out[h * D + 2 * i + 1] = w[h * D + D // 2 + i]
        return out

    plan = [(model.tok_emb.weight, take("embed_tokens.weight"), "embed_tokens.weight")]
    for i, block in enumerate(model.blocks):
        p = f"layers.{i}."
        H, G = block.attn.n_heads, block.attn.n_kv_heads
        D = block.attn.qkv.weight.shape[0] // (H + 2 * G)
        q_rows, kv_rows = block.attn.qkv.weight[: H * D], block.attn.qkv.weight[H * D :].view(2, G * D, -1)
        plan.append((q_rows, take(p + "self_attn.q_proj.weight"), p + "self_attn.q_proj.weight", H))
        plan.append((kv_rows[0], take(p + "self_attn.k_proj.weight"), p + "self_attn.k_proj.weight", G))
        plan.append((kv_rows[1], take(p + "self_attn.v_proj.weight"), p + "self_attn.v_proj.weight"))
        plan.append((block.attn.out_proj.weight, take(p + "self_attn.o_proj.weight"), p + "self_attn.o_proj.weight"))
        plan.append((block.mlp.w1.weight, take(p + "mlp.gate_proj.weight"), p + "mlp.gate_proj.weight"))
        plan.append((block.mlp.w3.weight, take(p + "mlp.up_proj.weight"), p + "mlp.up_proj.weight"))
        plan.append((block.mlp.w2.weight, take(p + "mlp.down_proj.weight"), p + "mlp.down_proj.weight"))
        plan.append((block.ln1.weight, take(p + "input_layernorm.weight"), p + "input_layernorm.weight"))
        plan.append((block.ln2.weight, take(p + "post_attention_layernorm.weight"),
                     p + "post_attention_layernorm.weight"))
    plan.append((model.ln_f.weight, take("norm.weight"), "norm.weight"))
    tied = model.lm_head.weight is model.tok_emb.weight
    head = state_dict.get("lm_head.weight")
    if tied and head is not None and not torch.equal(head, sd["embed_tokens.weight"]):
        raise ValueError("lm_head.weight is not the embedding, but the model's head is tied to it")
    if not tied:
        if head is None:
            raise KeyError("the state dict has no lm_head.weight")
        plan.append((model.lm_head.weight, head, "lm_head.weight"))
    for target, source, key, *_ in plan:
        if target.shape != source.shape:
            raise ValueError(f"model.{key} has shape {tuple(source.shape)}, the model needs {tuple(target.shape)}")
    with torch.no_grad():
        for target, source, _, *heads in plan:
            target.copy_(pairs(source, heads[0]) if heads else source)
    return model
"""

KIT = GraderKit(
    LESSON,
    grading,
    {
        RMS: RMS_NORM,
        ROPE: ROPE_ATTENTION,
        SWIGLU: SWIGLU_ANSWER,
        REPEAT: REPEAT_KV,
        ATTENTION: MODERN_ATTENTION,
        BLOCK: MODERN_BLOCK,
        NS: NEWTON_SCHULZ,
        LOAD: LOAD_LLAMA,
    },
)

_MS = "ms = (x * x).mean(dim=-1, keepdim=True)"
_SCALE = "scale = torch.rsqrt(ms + eps)"
_ROTATE = "qr, kr = rotate(q), rotate(k)"
_GATE = "gate = gate * torch.sigmoid(gate)"
_OUT = "return self.w2(gate * up)"

MISTAKES = [
    # rms_norm
    mistake(
        RMS,
        _MS,
        "x = x - x.mean(dim=-1, keepdim=True)\n    ms = (x * x).mean(dim=-1, keepdim=True)",
        ("mean was subtracted", "LayerNorm"),
        id="rms-mean-subtracted",
    ),
    mistake(RMS, _SCALE, "scale = 1 / (ms.sqrt() + eps)", "outside the square root", id="rms-eps-outside-the-root"),
    mistake(RMS, _SCALE, "scale = torch.rsqrt(ms)", "ε was left out", id="rms-without-eps"),
    mistake(RMS, _SCALE, "scale = 1 / (ms + eps)", "square root is missing", id="rms-without-the-root"),
    mistake(RMS, _MS, "ms = (x * x).sum(dim=-1, keepdim=True)", "summed, not averaged", id="rms-sum-of-squares"),
    mistake(RMS, _MS, "ms = (x * x).mean(dim=0, keepdim=True)", ("dim=0", "last dimension"), id="rms-over-dim-0"),
    mistake(RMS, _MS, "ms = (x * x).mean()", "whole tensor", id="rms-over-the-whole-tensor"),
    mistake(RMS, "return weight * (x * scale)", "return x * scale", "weight was not applied", id="rms-no-weight"),
    mistake(RMS, "eps=1e-6", "eps=1e-5", ("default eps is 1e-5", "eps=1e-6"), id="rms-layernorm-default-eps"),
    mistake(
        RMS,
        "return weight * (x * scale)",
        "return (weight * (x * scale)).float()",
        ("torch.float32 for a torch.bfloat16 input", "input's dtype"),
        id="rms-float32-output-for-bf16",
    ),
    mistake(
        RMS,
        "return weight * (x * scale)",
        "x *= scale\n    return weight * x",
        "changed its argument `x` in place",
        id="rms-changing-its-input",
    ),
    # rope_attention
    mistake(ROPE, "weights @ v", "weights @ rotate(v)", "values were rotated too", id="rope-values-rotated"),
    mistake(ROPE, _ROTATE, "qr, kr = q, k", "nothing was rotated", id="rope-nothing-rotated"),
    mistake(ROPE, _ROTATE, "qr, kr = rotate(q), k", "only the queries", id="rope-keys-not-rotated"),
    mistake(ROPE, _ROTATE, "qr, kr = q, rotate(k)", "only the keys", id="rope-queries-not-rotated"),
    mistake(
        ROPE,
        "torch.arange(T)[:, None] * theta)",
        "-torch.arange(T)[:, None] * theta)",
        "wrong way",
        id="rope-rotated-the-wrong-way",
    ),
    mistake(
        ROPE,
        '    scores = scores.masked_fill(blocked, float("-inf"))\n',
        "",
        "no causal mask",
        id="rope-not-causal",
    ),
    mistake(ROPE, "* (1 / math.sqrt(D))", "* (1 / D)", "divided by D", id="rope-scaled-by-D"),
    mistake(ROPE, "* (1 / math.sqrt(D))", "", "not scaled", id="rope-not-scaled"),
    mistake(ROPE, "softmax(dim=-1)", "softmax(dim=-2)", "over the queries", id="rope-softmax-over-queries"),
    wrong_answer(
        ROPE,
        "import math\nimport torch\nfrom course_lib.position import rope_rotate_half\n\n"
        "def rope_attention(q, k, v, base=10000.0):\n"
        "    T, D = q.shape[-2], q.shape[-1]\n"
        "    q, k = rope_rotate_half(q, base), rope_rotate_half(k, base)\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(D)\n"
        "    scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), float('-inf'))\n"
        "    return scores.softmax(-1) @ v\n",
        "'rotate half' layout",
        id="rope-rotate-half-layout",
    ),
    # SwiGLU
    mistake(
        SWIGLU,
        "gate = self.w1(x)\n        gate = gate * torch.sigmoid(gate)\n        up = self.w3(x)",
        "gate = self.w1(x)\n        up = self.w3(x)\n        up = up * torch.sigmoid(up)",
        "wrong branch",
        id="swiglu-silu-on-the-value",
    ),
    mistake(SWIGLU, _GATE, "gate = torch.sigmoid(gate)", "original GLU", id="swiglu-sigmoid-gate"),
    mistake(SWIGLU, _GATE, "gate = torch.nn.functional.gelu(gate)", "GEGLU", id="swiglu-gelu-gate"),
    mistake(SWIGLU, _GATE, "gate = torch.relu(gate)", "ReGLU", id="swiglu-relu-gate"),
    mistake(SWIGLU, _OUT, "return self.w2(gate + up)", "added", id="swiglu-sum-not-product"),
    mistake(SWIGLU, _OUT, "return self.w2(gate)", "value branch w3(x) is missing", id="swiglu-no-value-branch"),
    mistake(
        SWIGLU,
        "up = self.w3(x)",
        "up = self.w3(x)\n        up = up * torch.sigmoid(up)",
        "both branches",
        id="swiglu-silu-on-both",
    ),
    mistake(
        SWIGLU,
        _OUT,
        "return self.w3(gate * self.w2(x))",
        ("are w2 and w3 swapped", "w3 is the value"),
        also=[
            ("self.w2 = nn.Linear(d_hidden, d_model, bias=bias)", "self.w2 = nn.Linear(d_model, d_hidden, bias=bias)"),
            ("self.w3 = nn.Linear(d_model, d_hidden, bias=bias)", "self.w3 = nn.Linear(d_hidden, d_model, bias=bias)"),
            ("        up = self.w3(x)\n", ""),
        ],
        id="swiglu-w2-and-w3-swapped",
    ),
    mistake(
        SWIGLU,
        "bias=bias)\n        self.w2",
        "bias=False)\n        self.w2",
        ("wrong parameter names", "missing ['w1.bias']"),
        id="swiglu-bias-ignored-in-w1",
    ),
    mistake(
        SWIGLU,
        "self.w1 = nn.Linear(d_model, d_hidden, bias=bias)",
        "self.gate = nn.Linear(d_model, d_hidden, bias=bias)",
        ("wrong parameter names", "self.w1 and self.w3"),
        also=[("gate = self.w1(x)", "gate = self.gate(x)")],
        id="swiglu-wrong-names",
    ),
    # repeat_kv
    mistake(
        REPEAT,
        "torch.repeat_interleave(x, n_rep, dim=1)",
        "x.repeat(1, n_rep, 1, 1)",
        ("interleaved", "h % H_kv", "h // n_rep"),
        id="repeat-heads-interleaved",
    ),
    mistake(
        REPEAT,
        "torch.repeat_interleave(x, n_rep, dim=1)",
        "torch.repeat_interleave(x, n_rep, dim=2)",
        ("dim=2 (time)", "dim=1"),
        id="repeat-along-time",
    ),
    mistake(
        REPEAT,
        "    if n_rep == 1:\n        return x\n",
        "",
        ("returned a copy of x", "`if n_rep == 1: return x`"),
        id="repeat-copies-when-n_rep-is-1",
    ),
    mistake(
        REPEAT,
        "return torch.repeat_interleave(x, n_rep, dim=1)",
        "x.data = torch.repeat_interleave(x, n_rep, dim=1)\n    return x",
        "changed its argument `x` in place",
        id="repeat-changing-its-input",
    ),
]

_FIRST = "first = 0 if cache is None else cache.keys.shape[2]"
_GROUP = "group = torch.arange(H) // (H // G)"
_ROTATE_QK = "q, k = self.rotate(q, first), self.rotate(k, first)"
_BLOCK = "h = x + self.attn(self.ln1(x), cache=cache)\n        return h + self.mlp(self.ln2(h))"
_STEP = "X = a * X + b * (XXt @ X) + c * (XXt @ (XXt @ X))"
_PAIRS = "out[h * D + 2 * i] = w[h * D + i]\n                out[h * D + 2 * i + 1] = w[h * D + D // 2 + i]"

MISTAKES += [
    # rms_norm: two more ways to get the root mean square wrong
    mistake(
        RMS,
        _MS,
        "ms = x.mean(dim=-1, keepdim=True)",
        "mean of x was taken, not the mean of its squares",
        id="rms-mean-of-x",
    ),  # fmt: skip
    mistake(
        RMS,
        _MS,
        "ms = ((x - x.mean(dim=-1, keepdim=True)) ** 2).mean(dim=-1, keepdim=True)",
        ("standard deviation", "root mean square"),
        id="rms-standard-deviation-biased",
    ),
    mistake(RMS, _MS, "ms = x.var(dim=-1, keepdim=True)", ("standard deviation", "torch.var"), id="rms-torch-var"),
    # ModernAttention
    mistake(ATTENTION, _ROTATE_QK, "q, k = q, k", "were not rotated", id="attention-no-rope"),
    mistake(
        ATTENTION,
        "out = scores.softmax(dim=-1) @ v",
        "out = scores.softmax(dim=-1) @ self.rotate(v, 0)",
        "values were rotated too",
        id="attention-values-rotated",
        cases=[(2, 0, 6, 16, 4, 4, False, None, 0)],
    ),  # fmt: skip
    mistake(
        ATTENTION,
        "turn = torch.polar(torch.ones(n, D // 2, dtype=torch.float64), where[:, None] * theta)\n"
        "        pairs = torch.view_as_complex(t.double().reshape(*t.shape[:-1], D // 2, 2).contiguous())\n"
        "        return torch.view_as_real(pairs * turn).reshape(t.shape).to(t.dtype)",
        "turn = torch.polar(torch.ones(n, D // 2, dtype=torch.float64), where[:, None] * theta)\n"
        "        halves = torch.view_as_complex(t.double().reshape(*t.shape[:-1], 2, D // 2).transpose(-1, -2)"
        ".contiguous())\n"
        "        return torch.view_as_real(halves * turn).transpose(-1, -2).reshape(t.shape).to(t.dtype)",
        "'rotate half' layout",
        id="attention-rotate-half",
    ),
    mistake(ATTENTION, "self.base = rope_base", "self.base = 10000.0", "rope_base=500", id="attention-base-ignored"),
    mistake(ATTENTION, _GROUP, "group = torch.arange(H) % G", "interleaved", id="attention-heads-interleaved"),
    mistake(
        ATTENTION,
        '        scores = scores.masked_fill(future, float("-inf"))\n',
        "",
        "no causal mask",
        id="attention-not-causal",
        cases=[(2, 0, 6, 16, 4, 2, False, None, 0)],
    ),
    mistake(ATTENTION, "* (1 / math.sqrt(D))", "* (1 / D)", "divided by D", id="attention-scaled-by-D"),
    mistake(
        ATTENTION,
        "            q, k = self.q_norm(q), self.k_norm(k)\n        first",
        "            pass\n        first",
        "came after the rotation",
        also=[
            (
                _ROTATE_QK,
                _ROTATE_QK + "\n        if self.q_norm is not None:\n            q, k = self.q_norm(q), self.k_norm(k)",
            )
        ],
        id="attention-qk-norm-after-rope",
        cases=[(1, 0, 5, 24, 4, 1, True, None, 1)],
    ),  # fmt: skip
    mistake(
        ATTENTION,
        "q, k = self.q_norm(q), self.k_norm(k)",
        "q, k = self.k_norm(q), self.q_norm(k)",
        "swapped",
        id="attention-qk-norm-gains-swapped",
    ),  # fmt: skip
    mistake(ATTENTION, _FIRST, "first = 0", ("classic bug", "P..P+T-1"), id="attention-cache-positions-from-0"),
    mistake(
        ATTENTION,
        "future = torch.ones(T, first + T, dtype=torch.bool).triu(first + 1)",
        "future = torch.ones(T, first + T, dtype=torch.bool).triu(1)",
        "not shifted",
        id="attention-cache-triangle-not-shifted",
    ),
    mistake(
        ATTENTION,
        "            cache.keys, cache.values = k, v\n        group = torch.arange(H) // (H // G)\n"
        "        k, v = k[:, group], v[:, group]",
        "        group = torch.arange(H) // (H // G)\n        k, v = k[:, group], v[:, group]\n"
        "        if cache is not None:\n            cache.keys, cache.values = k, v",
        ("holds 4 heads", "repeat_kv after the cache"),
        id="attention-cache-holds-repeated-heads",
    ),
    mistake(
        ATTENTION,
        "            cache.keys, cache.values = k, v\n",
        "",
        "still holds only the P cached positions",
        id="attention-cache-not-grown",
    ),
    mistake(
        ATTENTION,
        _ROTATE_QK + "\n        if cache is not None:\n            k = torch.cat([cache.keys, k], dim=2)",
        "raw = k\n        " + _ROTATE_QK + "\n        if cache is not None:\n"
        "            raw = torch.cat([cache.keys, raw], dim=2)\n            k = torch.cat([cache.keys, k], dim=2)",
        "before their rotation",
        also=[("cache.keys, cache.values = k, v", "cache.keys, cache.values = raw, v")],
        id="attention-cache-keys-unrotated",
    ),
    mistake(
        ATTENTION,
        '        if n_heads % n_kv_heads:\n            raise ValueError(f"{n_heads} query heads do not split '
        'into groups for {n_kv_heads} key/value heads")\n',
        "",
        "Raise ValueError unless n_heads % n_kv_heads == 0",
        id="attention-no-value-error",
    ),
    mistake(
        ATTENTION,
        "def forward(self, x, cache=None):",
        "def forward(self, x):",
        "forward(x, cache=None) takes the layer's cache",
        also=[
            (_FIRST, "first = 0"),
            (
                "        if cache is not None:\n            k = torch.cat",
                "        if False:\n            k = torch.cat",
            ),
        ],
        id="attention-without-a-cache-argument",
    ),  # fmt: skip
    mistake(
        ATTENTION,
        "            self.q_norm = self.k_norm = None",
        "            self.q_norm = self.k_norm = None\n        self.bias_free = False\n"
        "        self.qkv = nn.Linear(d_model, (n_heads + 2 * n_kv_heads) * self.d_head)",
        "has bias",
        id="attention-with-biases",
    ),
    # ModernBlock
    mistake(
        BLOCK,
        _BLOCK,
        "h = self.ln1(x + self.attn(x, cache=cache))\n        return self.ln2(h + self.mlp(h))",
        "post-norm",
        id="block-post-norm",
    ),
    mistake(
        BLOCK,
        _BLOCK,
        "h = x + self.ln1(self.attn(x, cache=cache))\n        return h + self.ln2(self.mlp(h))",
        "OLMo 2's order",
        id="block-olmo2-order",
    ),
    mistake(
        BLOCK,
        _BLOCK,
        "return x + self.attn(self.ln1(x), cache=cache) + self.mlp(self.ln2(x))",
        "in parallel",
        id="block-parallel-sublayers",
    ),
    mistake(
        BLOCK,
        "return h + self.mlp(self.ln2(h))",
        "return self.mlp(self.ln2(h))",
        "residual connection around the mlp",
        id="block-no-mlp-residual",
    ),  # fmt: skip
    mistake(
        BLOCK,
        _BLOCK,
        "h = x + self.attn(self.ln2(x), cache=cache)\n        return h + self.mlp(self.ln1(h))",
        "ln1 and ln2 are swapped",
        id="block-norms-swapped",
    ),
    mistake(
        BLOCK,
        "self.ln1 = nn.RMSNorm(d_model, eps=eps)",
        "self.ln1 = nn.RMSNorm(d_model, eps=1e-6)",
        ("eps=1e-6, not eps=0.1", "pass eps on"),
        also=[("self.ln2 = nn.RMSNorm(d_model, eps=eps)", "self.ln2 = nn.RMSNorm(d_model, eps=1e-6)")],
        id="block-eps-not-passed-on",
    ),
    mistake(
        BLOCK,
        "self.attn(self.ln1(x), cache=cache)",
        "self.attn(self.ln1(x))",
        "cache was not passed on",
        id="block-cache-not-passed-on",
    ),  # fmt: skip
    # newton_schulz
    mistake(
        NS, "X = X / ((X * X).sum().sqrt() + eps)", "X = X", ("inf or NaN", "Frobenius norm"), id="ns-not-normalised"
    ),
    mistake(
        NS,
        "X = X / ((X * X).sum().sqrt() + eps)",
        "X = X / X.abs().max()",
        ("inf or NaN", "not its largest entry"),
        id="ns-divided-by-the-largest-entry",
    ),  # fmt: skip
    mistake(
        NS,
        "a, b, c = 3.4445, -4.7750, 2.0315",
        "c, b, a = 3.4445, -4.7750, 2.0315",
        "a and c are swapped",
        id="ns-coefficients-swapped",
    ),  # fmt: skip
    mistake(NS, _STEP, "X = 1.5 * X - 0.5 * (XXt @ X)", "cubic", id="ns-cubic-step"),
    mistake(NS, _STEP, "X = a * X + b * (XXt @ X) + c * ((XXt * XXt) @ X)", "A * A", id="ns-elementwise-square"),
    mistake(
        NS,
        _STEP,
        "X = b * (XXt @ X) + c * (XXt @ (XXt @ X))",
        ("inf or NaN", "all three terms, X = a * X"),
        id="ns-no-a-term",
    ),
    mistake(NS, "for _ in range(steps):", "for _ in range(steps + 1):", "one step too many", id="ns-one-step-too-many"),
    mistake(NS, "for _ in range(steps):", "for _ in range(5):", "`steps` was ignored", id="ns-steps-ignored"),
    mistake(NS, "XXt = X @ X.mT", "XXt = X.mT @ X", "X^T X", id="ns-XtX", cases=[(6, 6, 2, "float64", 2)]),
    mistake(NS, "return X.mT if flip else X", "return X", "transpose of G's", id="ns-not-transposed-back"),
    mistake(
        NS,
        "flip = G.size(0) > G.size(1)",
        "flip = G.size(0) > G.size(1)\n    G = G.float()",
        "returned torch.float32",
        id="ns-float32-for-bf16",
    ),  # fmt: skip
    # load_llama_weights
    mistake(
        LOAD,
        "            target.copy_(pairs(source, heads[0]) if heads else source)",
        "            pass",
        "nothing was loaded",
        id="load-nothing-copied",
    ),
    mistake(
        LOAD,
        "if heads else source)",
        "if heads else (source * 1.5 if source.dim() == 1 else source))",
        ("logits are not the Hugging Face model's", "does not hold", "permuted head by head"),
        id="load-a-wrong-weight-no-known-mistake-explains",
    ),
    mistake(
        LOAD,
        _PAIRS,
        "out[h * D + 2 * i] = w[h * D + 2 * i]\n                out[h * D + 2 * i + 1] = w[h * D + 2 * i + 1]",
        "copied as they are",
        id="load-rows-not-reordered",
    ),
    mistake(
        LOAD,
        _PAIRS,
        "out[h * D + i] = w[h * D + 2 * i]\n                out[h * D + D // 2 + i] = w[h * D + 2 * i + 1]",
        "the other way round",
        id="load-rows-reordered-the-other-way",
    ),
    mistake(
        LOAD,
        "        D = w.shape[0] // heads\n",
        "        D = w.shape[0]\n        heads = 1\n",
        "whole projection",
        id="load-reordered-over-the-whole-projection",
    ),
    mistake(
        LOAD,
        '(kv_rows[1], take(p + "self_attn.v_proj.weight"), p + "self_attn.v_proj.weight")',
        '(kv_rows[1], take(p + "self_attn.v_proj.weight"), p + "self_attn.v_proj.weight", G)',
        "v_proj were permuted too",
        id="load-values-reordered",
    ),
    mistake(
        LOAD,
        'take(p + "mlp.gate_proj.weight")',
        'take(p + "mlp.up_proj.weight")',
        "gate_proj and up_proj are swapped",
        also=[
            (
                '(block.mlp.w3.weight, take(p + "mlp.up_proj.weight")',
                '(block.mlp.w3.weight, take(p + "mlp.gate_proj.weight")',
            )
        ],
        id="load-gate-and-up-swapped",
    ),  # fmt: skip
    mistake(
        LOAD,
        '(block.ln1.weight, take(p + "input_layernorm.weight")',
        '(block.ln1.weight, take(p + "post_attention_layernorm.weight")',
        "two norms of a block are swapped",
        also=[
            (
                '(block.ln2.weight, take(p + "post_attention_layernorm.weight")',
                '(block.ln2.weight, take(p + "input_layernorm.weight")',
            )
        ],
        id="load-norms-swapped",
    ),  # fmt: skip
    mistake(
        LOAD,
        '(block.attn.out_proj.weight, take(p + "self_attn.o_proj.weight")',
        '(block.attn.out_proj.weight, take(p + "self_attn.o_proj.weight").T',
        "o_proj was transposed",
        id="load-o-proj-transposed",
    ),
    mistake(
        LOAD,
        '    plan.append((model.ln_f.weight, take("norm.weight"), "norm.weight"))\n',
        "",
        "final norm was not loaded",
        id="load-final-norm-missing",
    ),
    mistake(
        LOAD,
        '        plan.append((model.lm_head.weight, head, "lm_head.weight"))\n',
        "",
        "output head was not loaded",
        id="load-untied-head-not-loaded",
    ),
    mistake(
        LOAD,
        '        plan.append((model.lm_head.weight, head, "lm_head.weight"))\n',
        '        plan.append((model.lm_head.weight, sd["embed_tokens.weight"], "lm_head.weight"))\n',
        "untied head got the token table",
        id="load-untied-head-from-the-embedding",
    ),
    mistake(
        LOAD,
        '    if tied and head is not None and not torch.equal(head, sd["embed_tokens.weight"]):\n'
        '        raise ValueError("lm_head.weight is not the embedding, but the model\'s head is tied to it")\n',
        "",
        ("did not raise", "lm_head.weight"),
        id="load-tied-head-not-compared",
    ),
    mistake(
        LOAD,
        '        if key not in sd:\n            raise KeyError(f"the state dict has no model.{key}")\n',
        '        if key not in sd:\n            raise ValueError(f"the state dict has no model.{key}")\n',
        "raise KeyError naming the key",
        id="load-missing-key-raises-value-error",
    ),
    mistake(
        LOAD,
        "    for target, source, key, *_ in plan:\n        if target.shape != source.shape:\n",
        "    for target, source, key, *_ in plan[1:]:\n        if target.shape != source.shape:\n",
        "which does not name the key `model.embed_tokens.weight`",
        id="load-shapes-checked-from-the-second-key",
    ),
    mistake(
        LOAD,
        "    with torch.no_grad():\n        for target, source, _, *heads in plan:\n",
        "    if True:\n        for target, source, _, *heads in plan:\n",
        "torch.no_grad()",
        id="load-copies-recorded-by-autograd",
    ),
]

BORROWED = [
    wrong_answer(
        RMS,
        "import torch.nn.functional as F\n\ndef rms_norm(x, weight, eps=1e-6):\n"
        "    return F.rms_norm(x, x.shape[-1:], weight, eps)\n",
        ("torch.nn.functional.rms_norm", "earns no points"),
        id="rms-calling-F-rms-norm",
    ),
    wrong_answer(
        RMS,
        "from torch import nn\n\ndef rms_norm(x, weight, eps=1e-6):\n"
        "    norm = nn.RMSNorm(x.shape[-1], eps=eps)\n    norm.weight.data = weight\n    return norm(x)\n",
        ("torch.nn.RMSNorm", "earns no points"),
        id="rms-using-nn-RMSNorm",
    ),
    wrong_answer(
        RMS,
        "from course_lib import modern\n\ndef rms_norm(x, weight, eps=1e-6):\n"
        "    return modern.rms_norm(x, weight, eps)\n",
        ("course_lib.modern.rms_norm", "earns no points"),
        id="rms-calling-the-reference",
    ),
    wrong_answer(
        SWIGLU,
        "from course_lib.modern import SwiGLU as Base\n\nclass SwiGLU(Base):\n    pass\n",
        ("subclasses", "earns no points"),
        id="swiglu-subclass-of-the-reference",
    ),
    wrong_answer(
        ROPE,
        "from course_lib import modern\n\ndef rope_attention(q, k, v, base=10000.0):\n"
        "    return modern.rope_attention(q, k, v, base)\n",
        ("course_lib.modern.rope_attention", "earns no points"),
        id="rope-calling-the-reference",
    ),
    wrong_answer(
        REPEAT,
        "from course_lib import modern\n\ndef repeat_kv(x, n_rep):\n    return modern.repeat_kv(x, n_rep)\n",
        ("course_lib.modern.repeat_kv", "earns no points"),
        id="repeat-calling-the-reference",
    ),
    wrong_answer(
        ATTENTION,
        "from course_lib.modern_gpt import ModernConfig, SwitchAttention\n\n"
        "def ModernAttention(d_model, n_heads, n_kv_heads, qk_norm=False, rope_base=10000.0):\n"
        "    return SwitchAttention(ModernConfig(2, 64, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,\n"
        "        norm='rms', position='rope', mlp='swiglu', bias=False, qk_norm=qk_norm, rope_base=rope_base))\n",
        ("course_lib.modern_gpt.SwitchAttention", "earns no points"),
        id="attention-using-the-ladders-switch-attention",
    ),
    wrong_answer(
        BLOCK,
        "from course_lib import modern\n\nclass ModernBlock(modern.ModernBlock):\n    pass\n",
        ("subclasses", "earns no points"),
        id="block-subclass-of-the-reference",
    ),
    wrong_answer(
        NS,
        "import torch\n\ndef newton_schulz(G, steps=5, eps=1e-7):\n"
        "    U, S, Vh = torch.linalg.svd(G, full_matrices=False)\n    return U @ Vh\n",
        ("torch.linalg.svd", "earns no points"),
        id="ns-by-svd",
    ),
    wrong_answer(
        LOAD,
        "from course_lib import llama_weights\n\ndef load_llama_weights(model, state_dict):\n"
        "    return llama_weights.load_llama_weights(model, state_dict)\n",
        ("course_lib.llama_weights.load_llama_weights", "earns no points"),
        id="load-calling-the-reference",
    ),
    wrong_answer(
        LOAD,
        LOAD_LLAMA.replace(
            "    def pairs(w, heads):",
            "    from course_lib.llama_weights import rotate_half_to_pairs\n\n"
            "    def pairs(w, heads):\n        return rotate_half_to_pairs(w, heads)\n\n"
            "    def unused(w, heads):",
        ),
        ("course_lib.llama_weights.rotate_half_to_pairs", "earns no points"),
        id="load-using-the-courses-permutation",
    ),
]


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(RMS, _SCALE, "scale = 1 / (ms.sqrt() + eps)")
    message = KIT.fails(RMS, code, "<hidden case 1>", "outside the square root", cases=KIT.hidden(RMS))
    assert "shape" not in message


def test_the_right_rope_answer_is_the_complex_rotation_of_lesson_03s_apply_rope():
    """The grader test's right answer rotates by complex multiplication; lesson 03's apply_rope by sines and
    cosines: they agree, so the right answer above is an independent reference, not a copy."""
    from course_lib.position import apply_rope

    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 3, 7, 8).unbind(0)
    ours = KIT.answer(ROPE)(q, k, v)
    scores = apply_rope(q) @ apply_rope(k).transpose(-2, -1) / 8**0.5
    scores = scores.masked_fill(~torch.ones(7, 7, dtype=torch.bool).tril(), float("-inf"))
    assert torch.allclose(ours, scores.softmax(-1) @ v, atol=1e-5)


@pytest.mark.parametrize("n_rep", [1, 2, 3])
def test_the_right_repeat_answer_is_a_loop_over_query_heads(n_rep):
    x = torch.randn(2, 3, 4, 5)
    looped = torch.stack([x[:, h // n_rep] for h in range(3 * n_rep)], dim=1)
    assert torch.equal(KIT.answer(REPEAT)(x, n_rep), looped)


# The lesson's import cell binds `ref` and lesson 03's apply_rope (the learner's, or the course's); graded answers
# get the course's, from the lesson's preamble.
SETUP = (
    "import math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
    "from course_lib import modern as ref\nfrom course_lib.position import apply_rope\n"
)


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    setup = SETUP
    mistakes = MISTAKES
    borrowed = BORROWED
