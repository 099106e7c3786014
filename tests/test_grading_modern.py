"""Lesson 12 graders (course_lib.grading.modern): every known mistake has a buggy answer whose message must name it;
the tests run through tests/grader_kit.py, like those of lessons 04 to 06."""

from __future__ import annotations

import pytest
import torch

from course_lib.grading import modern as grading
from tests.grader_kit import GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "12_beyond_gpt2"
RMS, ROPE, SWIGLU, REPEAT = "rms_norm", "rope_attention", "SwiGLU", "repeat_kv"

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

KIT = GraderKit(LESSON, grading, {RMS: RMS_NORM, ROPE: ROPE_ATTENTION, SWIGLU: SWIGLU_ANSWER, REPEAT: REPEAT_KV})

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
