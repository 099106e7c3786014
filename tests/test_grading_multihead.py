"""Lesson 05 graders (course_lib.grading.multihead): as for lesson 04 (tests/test_grading_attention.py), every
known mistake has a buggy answer whose message must name it; the tests run through tests/grader_kit.py."""

from __future__ import annotations

from course_lib import multihead as ref
from course_lib.grading import multihead as grading
from course_lib.grading.kit import core
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "05_multi_head_attention"
SPLIT = "split_merge_heads"
MHA_NAME = "MultiHeadAttention"
COUNT_NAME = "multihead_parameter_count"

# Right answers, written independently of course_lib.
SPLIT_MERGE = """
import torch

def split_heads(x, n_heads):
    b, t, c = x.shape
    return x.reshape(b, t, n_heads, c // n_heads).permute(0, 2, 1, 3)

def merge_heads(x):
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)
"""

MHA = """
import math
import torch
import torch.nn.functional as F
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, causal=False, bias=True):
        super().__init__()
        assert d_model % n_heads == 0
        self.h = n_heads
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None, need_weights=False):
        b, t, c = x.shape
        q, k, v = [z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1)]
        allowed = mask
        if self.causal:
            lower = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            allowed = lower if allowed is None else allowed & lower
        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            weights = self.drop(scores.softmax(-1))
            y = weights @ v
        else:
            p = self.drop.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
        y = self.out_proj(y.transpose(1, 2).reshape(b, t, c))
        return (y, weights) if need_weights else y
"""

COUNT = """
def multihead_parameter_count(d_model, qkv_bias=True, out_bias=True):
    weights = 4 * d_model * d_model
    return weights + 3 * d_model * int(qkv_bias) + d_model * int(out_bias)
"""

KIT = GraderKit(
    LESSON,
    grading,
    {SPLIT: SPLIT_MERGE, MHA_NAME: MHA, COUNT_NAME: COUNT},
    parts={SPLIT: ("split_heads", "merge_heads")},
)

_SPLIT = "x.reshape(b, t, n_heads, c // n_heads).permute(0, 2, 1, 3)"
_MERGE = "x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)"
_HEADS = "z.view(b, t, self.h, c // self.h).transpose(1, 2)"
_PROJECT = "y = self.out_proj(y.transpose(1, 2).reshape(b, t, c))"
_SDPA_CALL = "attn_mask=allowed, dropout_p=p)"
_COMBINE = "allowed = lower if allowed is None else allowed & lower"
_RETURN_COUNT = "def multihead_parameter_count(d_model, qkv_bias=True, out_bias=True):\n    return {}\n"

# Each known mistake: the right answer with one piece changed (or a whole wrong answer), and what its message names.
MISTAKES = [
    # split_heads / merge_heads
    mistake(
        SPLIT,
        _SPLIT,
        "x.view(b, n_heads, t, -1)",
        ("bare view", "transpose(1, 2)", "split"),
        id="split-with-a-bare-view",
    ),
    mistake(
        SPLIT,
        ".permute(0, 2, 1, 3)\n\ndef merge",
        "\n\ndef merge",
        ("(B, T, H, D)", "transpose(1, 2)"),
        id="split-without-the-transpose",
    ),
    mistake(
        SPLIT,
        ".permute(0, 2, 1, 3)\n\ndef merge",
        "\n\ndef merge",
        "without a transpose",
        cases=[(3, 4, 4, 2, 2)],
        id="split-without-the-transpose-when-T-equals-H",
    ),
    mistake(
        SPLIT,
        _SPLIT,
        "x.reshape(b, t, c // n_heads, n_heads).permute(0, 3, 1, 2)",
        ("interleaved", "h*D:(h+1)*D"),
        id="split-interleaving-the-heads",
    ),
    mistake(
        SPLIT,
        _MERGE,
        "x.reshape(b, t, h * d)",
        ("merged with a bare view", "transpose(1, 2)"),
        id="merge-with-a-bare-view",
    ),
    mistake(
        SPLIT,
        _MERGE,
        "x.transpose(1, 2).view(b, t, h * d)",
        ("raised RuntimeError", ".reshape(B, T, H * D)"),
        id="merge-with-view-on-a-transposed-tensor",
    ),
    mistake(
        SPLIT,
        _MERGE,
        "x.permute(0, 2, 1, 3).flip(-1).reshape(b, t, h * d)",
        "merge_heads",
        id="split-and-merge-not-inverses",
    ),
    wrong_answer(
        SPLIT,
        "def split_heads(x, n_heads):\n    raise NotImplementedError()\n\n"
        "def merge_heads(x):\n    raise NotImplementedError()\n",
        "not written yet",
        id="split-merge-unwritten",
    ),
    # MultiHeadAttention
    mistake(
        MHA_NAME,
        _HEADS,
        "z.reshape(b, self.h, t, c // self.h)",
        ("split with a bare view", "transpose(1, 2)"),
        id="mha-heads-split-with-a-bare-view",
    ),
    mistake(
        MHA_NAME,
        "y.transpose(1, 2).reshape(b, t, c)",
        "y.reshape(b, t, c)",
        "merged with a bare view",
        id="mha-heads-merged-with-a-bare-view",
    ),
    mistake(
        MHA_NAME,
        _PROJECT,
        "y = y.transpose(1, 2).reshape(b, t, c)",
        "missing output projection",
        id="mha-output-projection-not-applied",
    ),
    mistake(
        MHA_NAME,
        "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n",
        "",
        ("missing output projection", "nn.Linear(d_model, d_model)"),
        also=[(_PROJECT, "y = y.transpose(1, 2).reshape(b, t, c)")],
        id="mha-without-an-output-projection-layer",
    ),
    mistake(
        MHA_NAME,
        "math.sqrt(q.shape[-1])",
        "math.sqrt(c)",
        ("sqrt(d_model)", "sqrt(d_head)"),
        also=[(_SDPA_CALL, "attn_mask=allowed, dropout_p=p, scale=1 / math.sqrt(c))")],
        id="mha-scaled-by-the-model-width",
    ),
    mistake(
        MHA_NAME,
        "math.sqrt(q.shape[-1])",
        "q.shape[-1]",
        "divided by d_head",
        also=[(_SDPA_CALL, "attn_mask=allowed, dropout_p=p, scale=1 / q.shape[-1])")],
        id="mha-scaled-by-d_head",
    ),
    mistake(
        MHA_NAME,
        "q, k, v = [z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1)]",
        "q, k, v = self.qkv(x).view(b, t, self.h, 3 * (c // self.h)).transpose(1, 2).chunk(3, dim=-1)",
        "[q | k | v]",
        id="mha-qkv-read-per-head",
    ),
    mistake(
        MHA_NAME,
        _COMBINE,
        "allowed = lower if allowed is None else allowed",
        ("causal mask was dropped", "Combine"),
        id="mha-causal-mask-dropped-when-a-mask-is-given",
    ),
    mistake(
        MHA_NAME,
        _COMBINE,
        "allowed = lower",
        ("the mask was dropped", "Combine"),
        id="mha-mask-dropped-when-causal",
    ),
    mistake(MHA_NAME, "if self.causal:", "if False:", "causal mask was ignored", id="mha-not-causal"),
    mistake(
        MHA_NAME,
        "dtype=torch.bool, device=x.device).tril()",
        "dtype=torch.bool, device=x.device).tril(-1)",
        "diagonal is excluded",
        id="mha-causal-mask-without-the-diagonal",
    ),
    mistake(
        MHA_NAME,
        "scores.masked_fill(~allowed",
        "scores.masked_fill(allowed",
        "inverted",
        also=[(_SDPA_CALL, "attn_mask=None if allowed is None else ~allowed, dropout_p=p)")],
        id="mha-inverted-mask",
    ),
    mistake(
        MHA_NAME,
        "return (y, weights) if need_weights",
        "return (y, weights.mean(dim=1)) if need_weights",
        ("averaged over the heads", "(B, H, T, T)"),
        id="mha-weights-averaged-over-heads",
    ),
    mistake(
        MHA_NAME,
        "weights = self.drop(scores.softmax(-1))\n            y = weights @ v",
        "weights = scores.softmax(-1)\n            y = self.drop(weights) @ v",
        "before dropout",
        id="mha-weights-returned-before-dropout",
    ),
    mistake(
        MHA_NAME,
        "weights = self.drop(scores.softmax(-1))",
        "weights = scores.softmax(-1)",
        "nothing was dropped",
        id="mha-dropout-never-applied",
    ),
    mistake(
        MHA_NAME,
        "self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)",
        "self.W_query = nn.Linear(d_model, d_model, bias=bias)\n        self.W_key = nn.Linear(d_model, d_model)",
        ("no `qkv` layer", "3 * d_model"),
        id="mha-separate-projections",
    ),
    mistake(
        MHA_NAME,
        "        self.drop = nn.Dropout(dropout)\n",
        "        self.drop = nn.Dropout(dropout)\n        self.register_buffer('lower', torch.ones(64, 64).tril())\n",
        ("state dict should hold exactly", "extra ['lower']"),
        id="mha-persistent-causal-mask",
    ),
    mistake(
        MHA_NAME,
        "self.out_proj = nn.Linear(d_model, d_model, bias=bias)",
        "self.out_proj = nn.Linear(d_model, d_model)",
        "extra ['out_proj.bias']",
        id="mha-ignoring-the-bias-flag",
    ),
    mistake(
        MHA_NAME,
        "return (y, weights) if need_weights else y",
        "return y, None",
        "return the output tensor only",
        id="mha-returning-a-tuple-by-default",
    ),
    wrong_answer(
        MHA_NAME,
        "from torch import nn\n\nclass MultiHeadAttention(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        "        super().__init__()\n        raise NotImplementedError()\n",
        "not written yet",
        id="mha-unwritten",
    ),
    # multihead_parameter_count
    wrong_answer(
        COUNT_NAME,
        _RETURN_COUNT.format("3 * d_model * d_model + 3 * d_model * int(qkv_bias)"),
        "output projection",
        id="count-without-the-output-projection",
    ),
    wrong_answer(
        COUNT_NAME, _RETURN_COUNT.format("4 * d_model * d_model"), "biases are missing", id="count-without-biases"
    ),
    wrong_answer(
        COUNT_NAME,
        _RETURN_COUNT.format("4 * d_model * d_model + d_model * int(qkv_bias) + d_model * int(out_bias)"),
        "3*d_model entries",
        id="count-one-qkv-bias-row",
    ),
    wrong_answer(
        COUNT_NAME,
        _RETURN_COUNT.format("4 * d_model * d_model + 4 * d_model"),
        "bias flag is False",
        id="count-ignoring-the-bias-flags",
    ),
    wrong_answer(
        COUNT_NAME,
        _RETURN_COUNT.format("float(4 * d_model * d_model + 3 * d_model * int(qkv_bias) + d_model * int(out_bias))"),
        "Python int",
        id="count-as-a-float",
    ),
    wrong_answer(
        COUNT_NAME,
        "def multihead_parameter_count(d_model, qkv_bias=True, out_bias=True):\n    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="count-unwritten-on-the-hidden-cases",
    ),
]

_PYTORCHS_MODULE_WRAPPED = """
import torch
from torch import nn

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, causal=False, bias=True):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, bias=bias, batch_first=True)

    def forward(self, x, mask=None, need_weights=False):
        out, weights = self.inner(x, x, x, need_weights=need_weights, average_attn_weights=False)
        return (out, weights) if need_weights else out
"""
_RIGHT_SPLIT, _RIGHT_MERGE = KIT.answer(SPLIT)

# Answers that are not written from scratch: the reference (in part, subclassed or called) or PyTorch's own version.
BORROWED = [
    wrong_answer(
        SPLIT, (ref.split_heads, _RIGHT_MERGE), "course_lib.multihead.split_heads", id="the-reference-split-heads"
    ),
    wrong_answer(
        SPLIT, (_RIGHT_SPLIT, ref.merge_heads), "course_lib.multihead.merge_heads", id="the-reference-merge-heads"
    ),
    wrong_answer(
        SPLIT,
        "import course_lib.multihead as m\n\ndef split_heads(x, n_heads):\n    return m.split_heads(x, n_heads)\n\n"
        "def merge_heads" + SPLIT_MERGE.split("def merge_heads")[1],
        ("course_lib.multihead.split_heads", "earns no points"),
        id="split-calling-the-reference",
    ),
    wrong_answer(
        MHA_NAME,
        "from course_lib.multihead import MultiHeadAttention as Base\n\nclass MultiHeadAttention(Base):\n    pass\n",
        ("subclasses", "earns no points"),
        id="mha-subclass-of-the-reference",
    ),
    wrong_answer(
        MHA_NAME,
        "from torch import nn\n\nclass MultiHeadAttention(nn.MultiheadAttention):\n    pass\n",
        ("subclasses", "torch.nn.MultiheadAttention"),
        id="mha-subclass-of-pytorchs-module",
    ),
    wrong_answer(
        MHA_NAME,
        _PYTORCHS_MODULE_WRAPPED,
        ("torch.nn.MultiheadAttention", "earns no points"),
        id="mha-wrapping-pytorchs-module",
    ),
    mistake(
        MHA_NAME,
        "    def forward(self, x, mask=None, need_weights=False):\n",
        "    def forward(self, x, mask=None, need_weights=False):\n"
        "        F.multi_head_attention_forward(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1),"
        " x.shape[-1], self.h, self.qkv.weight, self.qkv.bias, None, None, False, 0.0, self.out_proj.weight,"
        " self.out_proj.bias, training=False)\n",
        ("torch.nn.functional.multi_head_attention_forward", "earns no points"),
        id="mha-calling-pytorchs-multi-head-attention-forward",
    ),
]


def test_the_sdpa_version_of_the_reference_passes(no_guard):
    class Fast(ref.MultiHeadAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, use_sdpa=True, **kwargs)

    assert grading.check_MultiHeadAttention(Fast).checks >= 4


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    code = KIT.variant(MHA_NAME, "        b, t, c = x.shape\n", "        while True:\n            pass\n")
    KIT.fails(MHA_NAME, code, "did not finish")


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(MHA_NAME, _HEADS, "z.reshape(b, self.h, t, c // self.h)")
    message = KIT.fails(MHA_NAME, code, "<hidden case 2>", "bare view", cases=KIT.hidden(MHA_NAME))  # 1: one head
    assert "(2, 7, 16)" not in message and "random" not in message
    code = _RETURN_COUNT.format("4 * d_model * d_model")
    message = KIT.fails(COUNT_NAME, code, "<hidden case 1>", cases=[(7, True, True)])
    assert "196" not in message and "224" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 4
    mistakes = MISTAKES
    borrowed = BORROWED
