"""Tests of course_lib.grading.attention: the graders of lesson 04.

Learner answers are written here as notebook code: `exec` in a namespace whose `__name__` is "__main__",
which is what the from-scratch guard sees for a notebook's definitions. Each known mistake has a buggy answer
that must fail with a message naming it; right answers (and the reference itself, guard switched off) pass.
"""

from __future__ import annotations

import functools

import pytest
import torch

from course_lib import attention as ref
from course_lib.grading import attention as grading
from course_lib.grading import core
from course_lib.grading.core import GradingError, Passed
from tests.answers import assert_passes, edit, failure_message, hidden_cases, run_cell, run_graded_cells
from tests.nbtools import read, source_path

EXERCISES = [
    "simple_self_attention",
    "scaled_dot_product_attention",
    "causal_mask",
    "SelfAttention",
    "CausalSelfAttention",
    "CrossAttention",
]
LESSON = "04_attention"

# Right answers, written independently of course_lib.
ANSWERS = {
    "simple_self_attention": """
import torch

def simple_self_attention(x):
    weights = torch.softmax(x @ x.T, dim=-1)
    return weights @ x
""",
    "scaled_dot_product_attention": """
import math
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = scores.softmax(dim=-1)
    return torch.matmul(weights, v), weights
""",
    "causal_mask": """
import torch

def causal_mask(T, device=None):
    rows = torch.arange(T, device=device)
    return rows[:, None] >= rows[None, :]
""",
    "SelfAttention": """
import math
import torch
from torch import nn

class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
        weights = torch.softmax(scores, dim=-1)
        return weights @ v
""",
    "CausalSelfAttention": """
import math
import torch
from torch import nn

class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "blocked", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool(), persistent=False
        )

    def forward(self, x):
        b, t, _ = x.shape
        if t > self.context_length:
            raise ValueError("sequence longer than context_length")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
        scores = scores.masked_fill(self.blocked[:t, :t], -torch.inf)
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return weights @ v
""",
    "CrossAttention": """
import math
import torch
from torch import nn

class CrossAttention(nn.Module):
    def __init__(self, d_model, d_memory=None, qkv_bias=False):
        super().__init__()
        d_memory = d_memory or d_model
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_memory, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_memory, d_model, bias=qkv_bias)

    def forward(self, x, memory, memory_mask=None):
        q = self.W_query(x)
        k = self.W_key(memory)
        v = self.W_value(memory)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if memory_mask is not None:
            scores = scores.masked_fill(~memory_mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
""",
}


def answer(name: str, code: str | None = None):
    return run_cell(ANSWERS[name] if code is None else code)[name]


def check(name: str):
    return getattr(grading, f"check_{name}")


def fails(name: str, code: str, *words: str, cases=None) -> str:
    """Assert that the answer defined by `code` fails `check_<name>` with a message containing `words`."""
    return failure_message(lambda: check(name)(answer(name, code), cases), *words)


def variant(name: str, old: str, new: str) -> str:
    """A right answer with one piece changed (the buggy answers below are edits of the right ones)."""
    return edit(ANSWERS[name], old, new)


# ----------------------------------------------------------------------------------------------
# Right answers pass


@pytest.mark.parametrize("name", EXERCISES)
def test_right_answers_pass_visible_checks(name):
    result = check(name)(answer(name))
    assert isinstance(result, Passed) and not result.hidden and result.checks >= 3


@pytest.mark.parametrize("name", EXERCISES)
def test_reference_passes_visible_and_hidden_checks(name, no_guard):
    hidden = hidden_cases(LESSON)
    assert set(hidden) == set(EXERCISES)
    assert_passes(check(name), getattr(ref, name), hidden[name], at_least=3)


@pytest.mark.parametrize("name", EXERCISES)
def test_right_answers_pass_the_lessons_hidden_checks(name):
    assert check(name)(answer(name), hidden_cases(LESSON)[name]).hidden


def test_lesson_solutions_pass_their_own_test_cells():
    """The instructor source's answer cells, run in order, pass every visible and hidden test cell."""
    graded = run_graded_cells(LESSON, run_cell(""))
    assert len(graded) == 2 * len(EXERCISES)


def test_the_lessons_worked_example_is_the_graders():
    nb = read(source_path(LESSON))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith('tokens = ["Your"'))
    namespace = run_cell("import torch\n" + cell.source.replace("x.shape", "None"))
    assert namespace["tokens"] == grading.JOURNEY_TOKENS
    assert torch.equal(namespace["x"], torch.tensor(grading.JOURNEY_VECTORS))


# ----------------------------------------------------------------------------------------------
# simple_self_attention


def test_simple_softmax_over_the_wrong_dimension():
    code = variant("simple_self_attention", "dim=-1", "dim=0")
    fails("simple_self_attention", code, "wrong dimension", "dim=0")


def test_simple_scaled():
    code = variant("simple_self_attention", "x @ x.T", "x @ x.T / x.shape[1] ** 0.5")
    fails("simple_self_attention", code, "sqrt(C)", "no scaling")


def test_simple_without_softmax():
    code = "def simple_self_attention(x):\n    return (x @ x.T) @ x\n"
    fails("simple_self_attention", code, "without the softmax")


def test_simple_returns_the_weights():
    code = variant("simple_self_attention", "return weights @ x", "return weights")
    fails("simple_self_attention", code, "returned the attention weights")


def test_simple_modifies_its_input():
    code = "import torch\n\ndef simple_self_attention(x):\n    x *= 1.0 + 0 * x\n    x += 1\n    return x\n"
    fails("simple_self_attention", code, "in place")


# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention

SDPA = "scaled_dot_product_attention"


@pytest.mark.parametrize("dim", ["-2", "1"])
def test_sdpa_softmax_over_the_wrong_dimension(dim):
    code = variant(SDPA, "softmax(dim=-1)", f"softmax(dim={dim})")
    fails(SDPA, code, "wrong dimension", "dim=-1")


def test_sdpa_wrong_dimension_message_names_the_row_sums():
    # Not one of the named variants (softmax over the keys of another query's scores): the row sums speak.
    code = variant(SDPA, "weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-2) * 0.73")
    fails(SDPA, code, "rows of your attention weights sum to", "last dimension")


def test_sdpa_scaled_by_d_k():
    code = variant(SDPA, "math.sqrt(k.size(-1))", "k.size(-1)")
    fails(SDPA, code, "divided by d_k", "instead of sqrt(d_k)")


def test_sdpa_not_scaled():
    code = variant(SDPA, "/ math.sqrt(k.size(-1))", "")
    fails(SDPA, code, "not scaled")


def test_sdpa_scaled_by_the_values_size():
    code = variant(SDPA, "math.sqrt(k.size(-1))", "math.sqrt(v.size(-1))")
    fails(SDPA, code, "sqrt(d_v)")


def test_sdpa_mask_applied_after_the_softmax():
    code = variant(
        SDPA,
        """        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = scores.softmax(dim=-1)""",
        """        pass
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask""",
    )
    fails(SDPA, code, "after the softmax")


def test_sdpa_inverted_mask():
    code = variant(SDPA, "mask.logical_not()", "mask")
    fails(SDPA, code, "inverted", "True means 'may attend'")


def test_sdpa_masked_scores_set_to_zero():
    code = variant(SDPA, 'float("-inf")', "0.0")
    fails(SDPA, code, "set to 0 instead of -inf")


def test_sdpa_mask_ignored():
    code = variant(SDPA, "if mask is not None:", "if False:")
    fails(SDPA, code, "mask was ignored")


def test_sdpa_queries_and_keys_swapped():
    code = variant(SDPA, "torch.matmul(q, k.transpose(-2, -1))", "torch.matmul(k, q.transpose(-2, -1))")
    fails(SDPA, code, "queries and keys are swapped")


def test_sdpa_returns_only_the_output():
    code = variant(SDPA, "return torch.matmul(weights, v), weights", "return torch.matmul(weights, v)")
    fails(SDPA, code, "return the pair (out, weights)")


def test_sdpa_returns_the_pair_in_the_wrong_order():
    code = variant(SDPA, "return torch.matmul(weights, v), weights", "return weights, torch.matmul(weights, v)")
    fails(SDPA, code, "order (out, weights)")


# ----------------------------------------------------------------------------------------------
# causal_mask


def test_causal_mask_diagonal_excluded():
    code = variant("causal_mask", ">=", ">")
    fails("causal_mask", code, "diagonal is excluded")


def test_causal_mask_inverted():
    code = variant("causal_mask", "rows[:, None] >= rows[None, :]", "rows[:, None] < rows[None, :]")
    fails("causal_mask", code, "inverted", "True means 'may attend'")


def test_causal_mask_upper_triangle():
    code = variant("causal_mask", "rows[:, None] >= rows[None, :]", "rows[:, None] <= rows[None, :]")
    fails("causal_mask", code, "lower triangle")


def test_causal_mask_additive_float_mask():
    code = "import torch\n\ndef causal_mask(T, device=None):\n    return torch.full((T, T), float('-inf')).triu(1)\n"
    fails("causal_mask", code, "additive float mask", "bool")


def test_causal_mask_zero_one_floats():
    code = "import torch\n\ndef causal_mask(T, device=None):\n    return torch.ones(T, T).tril()\n"
    fails("causal_mask", code, "return a bool tensor")


def test_causal_mask_ignores_the_device_argument():
    code = "import torch\n\ndef causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()\n"
    fails("causal_mask", code, "device")


# ----------------------------------------------------------------------------------------------
# SelfAttention


def test_self_attention_softmax_over_the_wrong_dimension():
    code = variant("SelfAttention", "softmax(scores, dim=-1)", "softmax(scores, dim=1)")
    fails("SelfAttention", code, "wrong dimension")


def test_self_attention_scaled_by_d_out():
    code = variant("SelfAttention", "math.sqrt(k.shape[-1])", "k.shape[-1]")
    fails("SelfAttention", code, "divided by d_out", "instead of sqrt(d_out)")


def test_self_attention_scaled_by_the_model_width():
    code = variant("SelfAttention", "math.sqrt(k.shape[-1])", "math.sqrt(x.shape[-1])")
    fails("SelfAttention", code, "sqrt(d_in)")


def test_self_attention_not_scaled():
    code = variant("SelfAttention", " / math.sqrt(k.shape[-1])", "")
    fails("SelfAttention", code, "not scaled")


def test_self_attention_queries_and_keys_swapped():
    code = variant("SelfAttention", "scores = q @ k.transpose(1, 2)", "scores = k @ q.transpose(1, 2)")
    fails("SelfAttention", code, "queries and keys are swapped")


def test_self_attention_with_parameters_instead_of_linears():
    code = variant(
        "SelfAttention",
        "self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)",
        "self.W_query = nn.Parameter(torch.rand(d_in, d_out))",
    )
    fails("SelfAttention", code, "`W_query` is a Parameter", "nn.Linear")


def test_self_attention_ignores_qkv_bias():
    code = variant(
        "SelfAttention", "self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)", "self.W_key = nn.Linear(d_in, d_out)"
    )
    fails("SelfAttention", code, "`W_key` has bias")


def test_self_attention_returning_a_tuple():
    code = variant("SelfAttention", "return weights @ v", "return weights @ v, weights")
    fails("SelfAttention", code, "return the output tensor only")


# ----------------------------------------------------------------------------------------------
# CausalSelfAttention

CAUSAL = "CausalSelfAttention"


def test_causal_diagonal_excluded():
    code = variant(CAUSAL, "diagonal=1", "diagonal=0")
    fails(CAUSAL, code, "row 0 of your output is NaN", "diagonal excluded")


def test_causal_inverted_mask():
    code = variant(CAUSAL, "masked_fill(self.blocked[:t, :t]", "masked_fill(~self.blocked[:t, :t]")
    fails(CAUSAL, code, "inverted")


def test_causal_mask_applied_after_the_softmax():
    code = variant(
        CAUSAL,
        """        scores = scores.masked_fill(self.blocked[:t, :t], -torch.inf)
        weights = self.dropout(torch.softmax(scores, dim=-1))""",
        """        weights = torch.softmax(scores, dim=-1).masked_fill(self.blocked[:t, :t], 0.0)
        weights = self.dropout(weights)""",
    )
    fails(CAUSAL, code, "after the softmax")


def test_causal_without_mask():
    code = variant(CAUSAL, "        scores = scores.masked_fill(self.blocked[:t, :t], -torch.inf)\n", "")
    fails(CAUSAL, code, "causal mask was ignored")


def test_causal_scaled_by_d_out():
    code = variant(CAUSAL, "math.sqrt(k.shape[-1])", "k.shape[-1]")
    fails(CAUSAL, code, "divided by d_out")


def test_causal_mask_in_the_state_dict():
    code = variant(CAUSAL, ", persistent=False", "")
    fails(CAUSAL, code, "state dict holds ['blocked']", "persistent=False")


def test_causal_mask_not_sliced_to_the_actual_length():
    code = variant(CAUSAL, "self.blocked[:t, :t]", "self.blocked")
    fails(CAUSAL, code, "raised RuntimeError", "x.shape[1]")


def test_causal_no_value_error_for_too_long_inputs():
    code = variant(
        CAUSAL, "        if t > self.context_length:\n            raise ValueError(", "        if False:\n            ("
    )
    code = code.replace("self.blocked[:t, :t]", "torch.ones(t, t, dtype=torch.bool).triu(1)")
    fails(CAUSAL, code, "did not raise", "ValueError")


def test_causal_wrong_exception_for_too_long_inputs():
    code = variant(CAUSAL, "raise ValueError(", "raise IndexError(")
    fails(CAUSAL, code, "raised IndexError", "expected a ValueError")


def test_causal_dropout_never_applied():
    code = variant(
        CAUSAL, "weights = self.dropout(torch.softmax(scores, dim=-1))", "weights = torch.softmax(scores, dim=-1)"
    )
    fails(CAUSAL, code, "same as without dropout")


def test_causal_dropout_on_the_output():
    code = variant(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))\n        return weights @ v",
        "weights = torch.softmax(scores, dim=-1)\n        return self.dropout(weights @ v)",
    )
    fails(CAUSAL, code, "applied to the output")


def test_causal_dropout_without_rescaling():
    code = variant(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))",
        "weights = torch.softmax(scores, dim=-1)\n        weights = self.dropout(weights) * (1 - self.dropout.p)",
    )
    fails(CAUSAL, code, "not rescaled")


def test_causal_dropout_on_the_scores():
    code = variant(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))",
        "weights = torch.softmax(self.dropout(scores), dim=-1)",
    )
    fails(CAUSAL, code, "not what dropout on the attention weights gives")


# ----------------------------------------------------------------------------------------------
# CrossAttention

CROSS = "CrossAttention"
_QUERIES_FROM_MEMORY = """
import math
import torch
from torch import nn

class CrossAttention(nn.Module):
    def __init__(self, d_model, d_memory=None, qkv_bias=False):
        super().__init__()
        d_memory = d_memory or d_model
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_memory, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_memory, d_model, bias=qkv_bias)

    def forward(self, x, memory, memory_mask=None):
        q = self.W_query(memory)
        k = self.W_key(x)
        v = self.W_value(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(scores, dim=-1) @ v
"""


def test_cross_queries_from_the_memory_shape():
    fails(CROSS, _QUERIES_FROM_MEMORY, "one row per memory position", "queries must come from the decoder")


def test_cross_queries_from_the_memory_equal_lengths():
    fails(CROSS, _QUERIES_FROM_MEMORY, "queries were taken from the memory", cases=[(2, 5, 5, 6, None, None, False, 3)])


def test_cross_query_layer_reads_the_memory():
    code = variant(CROSS, "self.W_query = nn.Linear(d_model, d_model", "self.W_query = nn.Linear(d_memory, d_model")
    fails(CROSS, code, "W_query reads d_memory", "queries come from the decoder")


def test_cross_keys_and_values_from_x():
    code = variant(
        CROSS,
        "k = self.W_key(memory)\n        v = self.W_value(memory)",
        "k = self.W_key(x)\n        v = self.W_value(x)",
    )
    fails(CROSS, code, "keys and values were taken from x")


def test_cross_scaled_by_the_memory_width():
    code = variant(CROSS, "math.sqrt(q.shape[-1])", "math.sqrt(memory.shape[-1])")
    fails(CROSS, code, "sqrt(d_memory)")


def test_cross_inverted_memory_mask():
    code = variant(CROSS, "masked_fill(~memory_mask", "masked_fill(memory_mask")
    fails(CROSS, code, "memory_mask is inverted")


def test_cross_memory_mask_ignored():
    code = variant(CROSS, "if memory_mask is not None:", "if False:")
    fails(CROSS, code, "memory_mask was ignored")


def test_cross_default_memory_width():
    code = variant(
        CROSS,
        "def __init__(self, d_model, d_memory=None, qkv_bias=False)",
        "def __init__(self, d_model, d_memory, qkv_bias=False)",
    )
    fails(CROSS, code, "raised TypeError")


# ----------------------------------------------------------------------------------------------
# From-scratch guard, time limit, unwritten answers


@pytest.mark.parametrize("name", EXERCISES)
def test_the_reference_object_itself_earns_nothing(name):
    with pytest.raises(GradingError, match="earns no points"):
        check(name)(getattr(ref, name))


@pytest.mark.parametrize("name", ["SelfAttention", "CausalSelfAttention", "CrossAttention"])
def test_subclass_of_the_reference_class_earns_nothing(name):
    code = f"from course_lib.attention import {name} as Base\n\nclass {name}(Base):\n    pass\n"
    fails(name, code, "subclasses", "earns no points")


@pytest.mark.parametrize("name", ["simple_self_attention", "scaled_dot_product_attention", "causal_mask"])
def test_partial_of_the_reference_earns_nothing(name):
    with pytest.raises(GradingError, match="wraps the course's reference"):
        check(name)(functools.partial(getattr(ref, name)))


@pytest.mark.parametrize(
    "code",
    [
        "from course_lib.attention import scaled_dot_product_attention as reference\n\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n    return reference(q, k, v, mask)\n",
        "import course_lib.attention as a\n\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    return a.scaled_dot_product_attention(q, k, v, mask)\n",
    ],
)
def test_a_function_calling_the_reference_earns_nothing(code):
    fails(SDPA, code, "course_lib.attention.scaled_dot_product_attention", "earns no points")


def test_a_module_calling_the_reference_module_earns_nothing():
    code = """
import course_lib.attention as a
from torch import nn

class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.inner = a.SelfAttention(d_in, d_out, qkv_bias)
        self.W_query, self.W_key, self.W_value = self.inner.W_query, self.inner.W_key, self.inner.W_value

    def forward(self, x):
        return self.inner(x)
"""
    fails("SelfAttention", code, "course_lib.attention.SelfAttention", "earns no points")


def test_pytorchs_scaled_dot_product_attention_earns_nothing():
    code = """
import math
import torch
import torch.nn.functional as F

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.softmax(scores, dim=-1)
"""
    fails(SDPA, code, "torch.nn.functional.scaled_dot_product_attention", "earns no points")


def test_pytorchs_multihead_module_earns_nothing_for_sdpa():
    code = """
import torch
from torch import nn

def scaled_dot_product_attention(q, k, v, mask=None):
    mha = nn.MultiheadAttention(q.shape[-1], 1, batch_first=True)
    return mha(q, k, v)
"""
    fails(SDPA, code, "torch.nn.MultiheadAttention", "earns no points")


def test_pytorchs_square_subsequent_mask_earns_nothing():
    code = "from torch import nn\n\ndef causal_mask(T, device=None):\n"
    code += "    return nn.Transformer.generate_square_subsequent_mask(T, device=device) == 0\n"
    fails("causal_mask", code, "generate_square_subsequent_mask", "earns no points")


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    fails("simple_self_attention", "def simple_self_attention(x):\n    while True:\n        pass\n", "did not finish")
    code = variant(
        "SelfAttention", "q, k, v = self.W_query(x)", "while True:\n            pass\n        q, k, v = self.W_query(x)"
    )
    fails("SelfAttention", code, "did not finish")


@pytest.mark.parametrize("name", EXERCISES)
def test_an_unwritten_answer_says_so(name):
    if name[0].isupper():
        code = f"from torch import nn\n\nclass {name}(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        code += "        super().__init__()\n        raise NotImplementedError()\n"
    else:
        code = f"def {name}(*args, **kwargs):\n    raise NotImplementedError()\n"
    fails(name, code, "not written yet")
    fails(name, code, "not written yet", cases=hidden_cases(LESSON)[name])


def test_a_check_leaves_the_global_random_state_alone():
    torch.manual_seed(3)
    before = torch.random.get_rng_state()
    check("CausalSelfAttention")(answer("CausalSelfAttention"))
    assert torch.equal(torch.random.get_rng_state(), before)


def test_hidden_case_messages_name_the_case_not_its_input():
    code = variant(SDPA, "mask.logical_not()", "mask")
    message = fails(SDPA, code, "<hidden case 2>", "inverted", cases=hidden_cases(LESSON)[SDPA])
    assert "(2, 2, 6, 32)" not in message and "causal" not in message
    code = variant(CAUSAL, "diagonal=1", "diagonal=0")
    message = fails(CAUSAL, code, "<hidden case 1>", "diagonal excluded", cases=hidden_cases(LESSON)[CAUSAL])
    assert "context_length=4" not in message
