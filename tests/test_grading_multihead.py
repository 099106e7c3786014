"""Tests of course_lib.grading.multihead: the graders of lesson 05.

As in tests/test_grading_attention.py, learner answers are notebook code run with `exec` under `__main__`; every
known mistake has a buggy answer whose message must name it.
"""

from __future__ import annotations

import pytest
import torch

from course_lib import multihead as ref
from course_lib.grading import core
from course_lib.grading import multihead as grading
from course_lib.grading.core import GradingError, Passed
from tests.answers import assert_passes, edit, failure_message, hidden_cases, run_cell, run_graded_cells

LESSON = "05_multi_head_attention"
EXERCISES = ["split_merge_heads", "MultiHeadAttention", "multihead_parameter_count"]

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


def run_check(name: str, code: str, cases=None):
    namespace = run_cell(code)
    if name == "split_merge_heads":
        return grading.check_split_merge_heads(namespace["split_heads"], namespace["merge_heads"], cases)
    return getattr(grading, f"check_{name}")(namespace[name], cases)


def fails(name: str, code: str, *words: str, cases=None) -> str:
    return failure_message(lambda: run_check(name, code, cases), *words)


RIGHT = {"split_merge_heads": SPLIT_MERGE, "MultiHeadAttention": MHA, "multihead_parameter_count": COUNT}


# ----------------------------------------------------------------------------------------------
# Right answers pass


@pytest.mark.parametrize("name", EXERCISES)
def test_right_answers_pass_visible_and_hidden_checks(name):
    result = run_check(name, RIGHT[name])
    assert isinstance(result, Passed) and not result.hidden and result.checks >= 4
    assert run_check(name, RIGHT[name], hidden_cases(LESSON)[name]).hidden


def test_reference_passes_visible_and_hidden_checks(no_guard):
    hidden = hidden_cases(LESSON)
    assert set(hidden) == set(EXERCISES)
    assert grading.check_split_merge_heads(ref.split_heads, ref.merge_heads).checks >= 4
    assert grading.check_split_merge_heads(ref.split_heads, ref.merge_heads, hidden["split_merge_heads"]).hidden
    for name in ["MultiHeadAttention", "multihead_parameter_count"]:
        assert_passes(getattr(grading, f"check_{name}"), getattr(ref, name), hidden[name], at_least=4)


def test_the_sdpa_version_of_the_reference_passes(no_guard):
    class Fast(ref.MultiHeadAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, use_sdpa=True, **kwargs)

    assert grading.check_MultiHeadAttention(Fast).checks >= 4


def test_lesson_solutions_pass_their_own_test_cells():
    graded = run_graded_cells(LESSON, run_cell(""))
    assert len(graded) == 2 * len(EXERCISES)


# ----------------------------------------------------------------------------------------------
# split_heads / merge_heads


def test_split_with_a_bare_view():
    code = edit(SPLIT_MERGE, "x.reshape(b, t, n_heads, c // n_heads).permute(0, 2, 1, 3)", "x.view(b, n_heads, t, -1)")
    message = fails("split_merge_heads", code, "bare view", "transpose(1, 2)")
    assert "split" in message


def test_split_without_the_transpose():
    code = edit(SPLIT_MERGE, ".permute(0, 2, 1, 3)\n\ndef merge", "\n\ndef merge")
    fails("split_merge_heads", code, "(B, T, H, D)", "transpose(1, 2)")


def test_split_without_the_transpose_when_T_equals_H():
    code = edit(SPLIT_MERGE, ".permute(0, 2, 1, 3)\n\ndef merge", "\n\ndef merge")
    fails("split_merge_heads", code, "without a transpose", cases=[(3, 4, 4, 2, 2)])


def test_split_interleaving_the_heads():
    code = edit(
        SPLIT_MERGE,
        "x.reshape(b, t, n_heads, c // n_heads).permute(0, 2, 1, 3)",
        "x.reshape(b, t, c // n_heads, n_heads).permute(0, 3, 1, 2)",
    )
    fails("split_merge_heads", code, "interleaved", "h*D:(h+1)*D")


def test_merge_with_a_bare_view():
    code = edit(SPLIT_MERGE, "x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)", "x.reshape(b, t, h * d)")
    fails("split_merge_heads", code, "merged with a bare view", "transpose(1, 2)")


def test_merge_with_view_on_a_transposed_tensor():
    code = edit(
        SPLIT_MERGE, "x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)", "x.transpose(1, 2).view(b, t, h * d)"
    )
    fails("split_merge_heads", code, "raised RuntimeError", ".reshape(B, T, H * D)")


def test_split_and_merge_that_are_not_inverses():
    code = edit(
        SPLIT_MERGE,
        "x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)",
        "x.permute(0, 2, 1, 3).flip(-1).reshape(b, t, h * d)",
    )
    fails("split_merge_heads", code, "merge_heads")


# ----------------------------------------------------------------------------------------------
# MultiHeadAttention


def test_mha_heads_split_with_a_bare_view():
    code = edit(MHA, "z.view(b, t, self.h, c // self.h).transpose(1, 2)", "z.reshape(b, self.h, t, c // self.h)")
    fails("MultiHeadAttention", code, "split with a bare view", "transpose(1, 2)")


def test_mha_heads_merged_with_a_bare_view():
    code = edit(MHA, "y.transpose(1, 2).reshape(b, t, c)", "y.reshape(b, t, c)")
    fails("MultiHeadAttention", code, "merged with a bare view")


def test_mha_output_projection_not_applied():
    code = edit(MHA, "y = self.out_proj(y.transpose(1, 2).reshape(b, t, c))", "y = y.transpose(1, 2).reshape(b, t, c)")
    fails("MultiHeadAttention", code, "missing output projection")


def test_mha_without_an_output_projection_layer():
    code = edit(MHA, "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n", "")
    code = edit(code, "y = self.out_proj(y.transpose(1, 2).reshape(b, t, c))", "y = y.transpose(1, 2).reshape(b, t, c)")
    fails("MultiHeadAttention", code, "missing output projection", "nn.Linear(d_model, d_model)")


def test_mha_scaled_by_the_model_width():
    code = edit(MHA, "math.sqrt(q.shape[-1])", "math.sqrt(c)")
    code = edit(code, "attn_mask=allowed, dropout_p=p)", "attn_mask=allowed, dropout_p=p, scale=1 / math.sqrt(c))")
    fails("MultiHeadAttention", code, "sqrt(d_model)", "sqrt(d_head)")


def test_mha_scaled_by_d_head():
    code = edit(MHA, "math.sqrt(q.shape[-1])", "q.shape[-1]")
    code = edit(code, "attn_mask=allowed, dropout_p=p)", "attn_mask=allowed, dropout_p=p, scale=1 / q.shape[-1])")
    fails("MultiHeadAttention", code, "divided by d_head")


def test_mha_qkv_read_per_head():
    code = edit(
        MHA,
        "q, k, v = [z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1)]",
        "q, k, v = self.qkv(x).view(b, t, self.h, 3 * (c // self.h)).transpose(1, 2).chunk(3, dim=-1)",
    )
    fails("MultiHeadAttention", code, "[q | k | v]")


def test_mha_causal_mask_dropped_when_a_mask_is_given():
    code = edit(
        MHA,
        "allowed = lower if allowed is None else allowed & lower",
        "allowed = lower if allowed is None else allowed",
    )
    fails("MultiHeadAttention", code, "causal mask was dropped", "combine")


def test_mha_mask_dropped_when_causal():
    code = edit(MHA, "allowed = lower if allowed is None else allowed & lower", "allowed = lower")
    fails("MultiHeadAttention", code, "the mask was dropped", "combine")


def test_mha_not_causal():
    code = edit(MHA, "if self.causal:", "if False:")
    fails("MultiHeadAttention", code, "causal mask was ignored")


def test_mha_causal_mask_without_the_diagonal():
    code = edit(MHA, "dtype=torch.bool, device=x.device).tril()", "dtype=torch.bool, device=x.device).tril(-1)")
    fails("MultiHeadAttention", code, "diagonal is excluded")


def test_mha_inverted_mask():
    code = edit(MHA, "scores.masked_fill(~allowed", "scores.masked_fill(allowed")
    code = edit(
        code, "attn_mask=allowed, dropout_p=p)", "attn_mask=None if allowed is None else ~allowed, dropout_p=p)"
    )
    fails("MultiHeadAttention", code, "inverted")


def test_mha_weights_averaged_over_heads():
    code = edit(MHA, "return (y, weights) if need_weights", "return (y, weights.mean(dim=1)) if need_weights")
    fails("MultiHeadAttention", code, "averaged over the heads", "(B, H, T, T)")


def test_mha_weights_returned_before_dropout():
    code = edit(
        MHA,
        "weights = self.drop(scores.softmax(-1))\n            y = weights @ v",
        "weights = scores.softmax(-1)\n            y = self.drop(weights) @ v",
    )
    fails("MultiHeadAttention", code, "before dropout")


def test_mha_dropout_never_applied():
    code = edit(MHA, "weights = self.drop(scores.softmax(-1))", "weights = scores.softmax(-1)")
    fails("MultiHeadAttention", code, "nothing was dropped")


def test_mha_separate_projections():
    code = edit(
        MHA,
        "self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)",
        "self.W_query = nn.Linear(d_model, d_model, bias=bias)\n        self.W_key = nn.Linear(d_model, d_model)",
    )
    fails("MultiHeadAttention", code, "no `qkv` layer", "3 * d_model")


def test_mha_persistent_causal_mask():
    code = edit(
        MHA,
        "        self.drop = nn.Dropout(dropout)\n",
        "        self.drop = nn.Dropout(dropout)\n        self.register_buffer('lower', torch.ones(64, 64).tril())\n",
    )
    fails("MultiHeadAttention", code, "state dict should hold exactly", "extra ['lower']")


def test_mha_ignoring_the_bias_flag():
    code = edit(
        MHA, "self.out_proj = nn.Linear(d_model, d_model, bias=bias)", "self.out_proj = nn.Linear(d_model, d_model)"
    )
    fails("MultiHeadAttention", code, "extra ['out_proj.bias']")


def test_mha_returning_a_tuple_by_default():
    code = edit(MHA, "return (y, weights) if need_weights else y", "return y, None")
    fails("MultiHeadAttention", code, "return the output tensor only")


# ----------------------------------------------------------------------------------------------
# multihead_parameter_count


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("3 * d_model * d_model + 3 * d_model * int(qkv_bias)", "output projection"),
        ("4 * d_model * d_model", "biases are missing"),
        ("4 * d_model * d_model + d_model * int(qkv_bias) + d_model * int(out_bias)", "3*d_model entries"),
        ("4 * d_model * d_model + 4 * d_model", "bias flag is False"),
        ("float(4 * d_model * d_model + 3 * d_model * int(qkv_bias) + d_model * int(out_bias))", "Python int"),
    ],
)
def test_parameter_count_mistakes(body, words):
    code = f"def multihead_parameter_count(d_model, qkv_bias=True, out_bias=True):\n    return {body}\n"
    fails("multihead_parameter_count", code, words)


# ----------------------------------------------------------------------------------------------
# From-scratch guard, unwritten answers


def test_the_reference_objects_earn_nothing():
    with pytest.raises(GradingError, match="earns no points"):
        grading.check_MultiHeadAttention(ref.MultiHeadAttention)
    with pytest.raises(GradingError, match="course_lib.multihead.split_heads"):
        grading.check_split_merge_heads(ref.split_heads, run_cell(SPLIT_MERGE)["merge_heads"])
    with pytest.raises(GradingError, match="course_lib.multihead.merge_heads"):
        grading.check_split_merge_heads(run_cell(SPLIT_MERGE)["split_heads"], ref.merge_heads)
    with pytest.raises(GradingError, match="course_lib.multihead.multihead_parameter_count"):
        grading.check_multihead_parameter_count(ref.multihead_parameter_count)


def test_a_subclass_of_the_reference_earns_nothing():
    code = "from course_lib.multihead import MultiHeadAttention as Base\n\n"
    code += "class MultiHeadAttention(Base):\n    pass\n"
    fails("MultiHeadAttention", code, "subclasses", "earns no points")


def test_a_function_calling_the_reference_split_earns_nothing():
    code = "import course_lib.multihead as m\n\ndef split_heads(x, n_heads):\n    return m.split_heads(x, n_heads)\n\n"
    code += "def merge_heads" + SPLIT_MERGE.split("def merge_heads")[1]
    fails("split_merge_heads", code, "course_lib.multihead.split_heads", "earns no points")


def test_pytorchs_multihead_module_earns_nothing():
    subclass = "from torch import nn\n\nclass MultiHeadAttention(nn.MultiheadAttention):\n    pass\n"
    fails("MultiHeadAttention", subclass, "subclasses", "torch.nn.MultiheadAttention")
    wrapper = """
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
    fails("MultiHeadAttention", wrapper, "torch.nn.MultiheadAttention", "earns no points")


def test_pytorchs_multi_head_attention_forward_earns_nothing():
    code = edit(
        MHA,
        "    def forward(self, x, mask=None, need_weights=False):\n",
        "    def forward(self, x, mask=None, need_weights=False):\n"
        "        F.multi_head_attention_forward(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1),"
        " x.shape[-1], self.h, self.qkv.weight, self.qkv.bias, None, None, False, 0.0, self.out_proj.weight,"
        " self.out_proj.bias, training=False)\n",
    )
    fails("MultiHeadAttention", code, "torch.nn.functional.multi_head_attention_forward", "earns no points")


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    code = edit(MHA, "        b, t, c = x.shape\n", "        while True:\n            pass\n")
    fails("MultiHeadAttention", code, "did not finish")


def test_unwritten_answers_say_so():
    stub = "def split_heads(x, n_heads):\n    raise NotImplementedError()\n\n"
    stub += "def merge_heads(x):\n    raise NotImplementedError()\n"
    fails("split_merge_heads", stub, "not written yet")
    mha = "from torch import nn\n\nclass MultiHeadAttention(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
    mha += "        super().__init__()\n        raise NotImplementedError()\n"
    fails("MultiHeadAttention", mha, "not written yet")
    count = "def multihead_parameter_count(d_model, qkv_bias=True, out_bias=True):\n    raise NotImplementedError()\n"
    fails(
        "multihead_parameter_count", count, "not written yet", cases=hidden_cases(LESSON)["multihead_parameter_count"]
    )


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    run_check("MultiHeadAttention", MHA)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_hidden_case_messages_name_the_case_not_its_input():
    code = edit(MHA, "z.view(b, t, self.h, c // self.h).transpose(1, 2)", "z.reshape(b, self.h, t, c // self.h)")
    hidden = hidden_cases(LESSON)["MultiHeadAttention"]
    message = fails("MultiHeadAttention", code, "<hidden case 2>", "bare view", cases=hidden)  # case 1: one head
    assert "(2, 7, 16)" not in message and "random" not in message
    code = "def multihead_parameter_count(d_model, qkv_bias=True, out_bias=True):\n    return 4 * d_model * d_model\n"
    message = fails("multihead_parameter_count", code, "<hidden case 1>", cases=[(7, True, True)])
    assert "196" not in message and "224" not in message
