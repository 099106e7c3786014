"""Lesson 04 graders (course_lib.grading.attention): right answers and the reference pass, each known mistake
is named, and answers not written from scratch earn nothing. How the tests are written: tests/grader_kit.py."""

from __future__ import annotations

import functools

import pytest
import torch

from course_lib import attention as ref
from course_lib.grading import attention as grading
from course_lib.grading.kit import core
from tests.answers import run_cell
from tests.grader_kit import GraderKit, LessonGraderTests, mistake, wrong_answer
from tests.nbtools import read, source_path

LESSON = "04_attention"
SDPA = "scaled_dot_product_attention"
CAUSAL = "CausalSelfAttention"
CROSS = "CrossAttention"
TRAIN = "train_step"

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
    "train_step": """
import torch
import torch.nn.functional as F

def train_step(model, optimizer, inputs, targets):
    optimizer.zero_grad(set_to_none=True)
    logits = model(inputs)
    loss = F.cross_entropy(logits.transpose(1, 2), targets)
    loss.backward()
    optimizer.step()
    return float(loss.detach())
""",
}

KIT = GraderKit(LESSON, grading, ANSWERS)

# Queries taken from the memory, keys and values from x (and no memory mask).
_MASKING = '        if memory_mask is not None:\n            scores = scores.masked_fill(~memory_mask, float("-inf"))\n'
_QUERIES_FROM_MEMORY = KIT.variant(
    CROSS,
    "q = self.W_query(x)\n        k = self.W_key(memory)\n        v = self.W_value(memory)",
    "q = self.W_query(memory)\n        k = self.W_key(x)\n        v = self.W_value(x)",
    also=[(_MASKING, "")],
)

# Each known mistake: the right answer with one piece changed (or a whole wrong answer), and what its message names.
MISTAKES = [
    # simple_self_attention
    mistake("simple_self_attention", "dim=-1", "dim=0", ("wrong dimension", "dim=0"), id="simple-softmax-dim0"),
    mistake(
        "simple_self_attention", "x @ x.T", "x @ x.T / x.shape[1] ** 0.5", ("sqrt(C)", "no scaling"), id="simple-scaled"
    ),
    wrong_answer(
        "simple_self_attention",
        "def simple_self_attention(x):\n    return (x @ x.T) @ x\n",
        "without the softmax",
        id="simple-without-softmax",
    ),
    mistake(
        "simple_self_attention",
        "return weights @ x",
        "return weights",
        "returned the attention weights",
        id="simple-returns-the-weights",
    ),
    wrong_answer(
        "simple_self_attention",
        "import torch\n\ndef simple_self_attention(x):\n    x *= 1.0 + 0 * x\n    x += 1\n    return x\n",
        "in place",
        id="simple-modifies-its-input",
    ),
    # scaled_dot_product_attention
    mistake(SDPA, "softmax(dim=-1)", "softmax(dim=-2)", ("wrong dimension", "dim=-1"), id="sdpa-softmax-dim-2"),
    mistake(SDPA, "softmax(dim=-1)", "softmax(dim=1)", ("wrong dimension", "dim=-1"), id="sdpa-softmax-dim1"),
    # Not one of the named variants (softmax over the keys of another query's scores): the row sums speak.
    mistake(
        SDPA,
        "weights = scores.softmax(dim=-1)",
        "weights = scores.softmax(dim=-2) * 0.73",
        ("rows of your attention weights sum to", "last dimension"),
        id="sdpa-wrong-dimension-named-by-row-sums",
    ),
    mistake(
        SDPA,
        "math.sqrt(k.size(-1))",
        "k.size(-1)",
        ("divided by d_k", "instead of sqrt(d_k)"),
        id="sdpa-scaled-by-d_k",
    ),
    mistake(SDPA, "/ math.sqrt(k.size(-1))", "", "not scaled", id="sdpa-not-scaled"),
    mistake(SDPA, "math.sqrt(k.size(-1))", "math.sqrt(v.size(-1))", "sqrt(d_v)", id="sdpa-scaled-by-the-values-size"),
    mistake(
        SDPA,
        """        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = scores.softmax(dim=-1)""",
        """        pass
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask""",
        "after the softmax",
        id="sdpa-mask-applied-after-the-softmax",
    ),
    mistake(SDPA, "mask.logical_not()", "mask", ("inverted", "True means 'may attend'"), id="sdpa-inverted-mask"),
    mistake(SDPA, 'float("-inf")', "0.0", "set to 0 instead of -inf", id="sdpa-masked-scores-set-to-zero"),
    mistake(SDPA, "if mask is not None:", "if False:", "mask was ignored", id="sdpa-mask-ignored"),
    mistake(
        SDPA,
        "torch.matmul(q, k.transpose(-2, -1))",
        "torch.matmul(k, q.transpose(-2, -1))",
        "queries and keys are swapped",
        id="sdpa-queries-and-keys-swapped",
    ),
    mistake(
        SDPA,
        "return torch.matmul(weights, v), weights",
        "return torch.matmul(weights, v)",
        "return the pair (out, weights)",
        id="sdpa-returns-only-the-output",
    ),
    mistake(
        SDPA,
        "return torch.matmul(weights, v), weights",
        "return weights, torch.matmul(weights, v)",
        "order (out, weights)",
        id="sdpa-returns-the-pair-in-the-wrong-order",
    ),
    # causal_mask
    mistake("causal_mask", ">=", ">", "diagonal is excluded", id="causal-mask-diagonal-excluded"),
    mistake(
        "causal_mask",
        "rows[:, None] >= rows[None, :]",
        "rows[:, None] < rows[None, :]",
        ("inverted", "True means 'may attend'"),
        id="causal-mask-inverted",
    ),
    mistake(
        "causal_mask",
        "rows[:, None] >= rows[None, :]",
        "rows[:, None] <= rows[None, :]",
        "lower triangle",
        id="causal-mask-upper-triangle",
    ),
    wrong_answer(
        "causal_mask",
        "import torch\n\ndef causal_mask(T, device=None):\n    return torch.full((T, T), float('-inf')).triu(1)\n",
        ("additive float mask", "bool"),
        id="causal-mask-additive-float-mask",
    ),
    wrong_answer(
        "causal_mask",
        "import torch\n\ndef causal_mask(T, device=None):\n    return torch.ones(T, T).tril()\n",
        "return a bool tensor",
        id="causal-mask-zero-one-floats",
    ),
    wrong_answer(
        "causal_mask",
        "import torch\n\ndef causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()\n",
        "device",
        id="causal-mask-ignores-the-device-argument",
    ),
    # SelfAttention
    mistake(
        "SelfAttention",
        "softmax(scores, dim=-1)",
        "softmax(scores, dim=1)",
        "wrong dimension",
        id="self-attention-softmax-dim1",
    ),
    mistake(
        "SelfAttention",
        "math.sqrt(k.shape[-1])",
        "k.shape[-1]",
        ("divided by d_out", "instead of sqrt(d_out)"),
        id="self-attention-scaled-by-d_out",
    ),
    mistake(
        "SelfAttention",
        "math.sqrt(k.shape[-1])",
        "math.sqrt(x.shape[-1])",
        "sqrt(d_in)",
        id="self-attention-scaled-by-the-model-width",
    ),
    mistake("SelfAttention", " / math.sqrt(k.shape[-1])", "", "not scaled", id="self-attention-not-scaled"),
    mistake(
        "SelfAttention",
        "scores = q @ k.transpose(1, 2)",
        "scores = k @ q.transpose(1, 2)",
        "queries and keys are swapped",
        id="self-attention-queries-and-keys-swapped",
    ),
    mistake(
        "SelfAttention",
        "self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)",
        "self.W_query = nn.Parameter(torch.rand(d_in, d_out))",
        ("`W_query` is a Parameter", "nn.Linear"),
        id="self-attention-parameters-instead-of-linears",
    ),
    mistake(
        "SelfAttention",
        "self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)",
        "self.W_key = nn.Linear(d_in, d_out)",
        "`W_key` has bias",
        id="self-attention-ignores-qkv-bias",
    ),
    mistake(
        "SelfAttention",
        "return weights @ v",
        "return weights @ v, weights",
        "return the output tensor only",
        id="self-attention-returns-a-tuple",
    ),
    # CausalSelfAttention
    mistake(
        CAUSAL,
        "diagonal=1",
        "diagonal=0",
        ("row 0 of your output is NaN", "diagonal excluded"),
        id="causal-diagonal-excluded",
    ),
    mistake(
        CAUSAL,
        "masked_fill(self.blocked[:t, :t]",
        "masked_fill(~self.blocked[:t, :t]",
        "inverted",
        id="causal-inverted-mask",
    ),
    mistake(
        CAUSAL,
        """        scores = scores.masked_fill(self.blocked[:t, :t], -torch.inf)
        weights = self.dropout(torch.softmax(scores, dim=-1))""",
        """        weights = torch.softmax(scores, dim=-1).masked_fill(self.blocked[:t, :t], 0.0)
        weights = self.dropout(weights)""",
        "after the softmax",
        id="causal-mask-applied-after-the-softmax",
    ),
    mistake(
        CAUSAL,
        "        scores = scores.masked_fill(self.blocked[:t, :t], -torch.inf)\n",
        "",
        "causal mask was ignored",
        id="causal-without-mask",
    ),
    mistake(CAUSAL, "math.sqrt(k.shape[-1])", "k.shape[-1]", "divided by d_out", id="causal-scaled-by-d_out"),
    mistake(
        CAUSAL,
        ", persistent=False",
        "",
        ("state dict holds ['blocked']", "persistent=False"),
        id="causal-mask-in-the-state-dict",
    ),
    mistake(
        CAUSAL,
        "self.blocked[:t, :t]",
        "self.blocked",
        ("raised RuntimeError", "x.shape[1]"),
        id="causal-mask-not-sliced-to-the-actual-length",
    ),
    mistake(
        CAUSAL,
        "        if t > self.context_length:\n            raise ValueError(",
        "        if False:\n            (",
        ("did not raise", "ValueError"),
        also=[("self.blocked[:t, :t]", "torch.ones(t, t, dtype=torch.bool).triu(1)")],
        id="causal-no-value-error-for-too-long-inputs",
    ),
    mistake(
        CAUSAL,
        "raise ValueError(",
        "raise IndexError(",
        ("raised IndexError", "expected a ValueError"),
        id="causal-wrong-exception-for-too-long-inputs",
    ),
    mistake(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))",
        "weights = torch.softmax(scores, dim=-1)",
        "same as without dropout",
        id="causal-dropout-never-applied",
    ),
    mistake(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))\n        return weights @ v",
        "weights = torch.softmax(scores, dim=-1)\n        return self.dropout(weights @ v)",
        "applied to the output",
        id="causal-dropout-on-the-output",
    ),
    mistake(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))",
        "weights = torch.softmax(scores, dim=-1)\n        weights = self.dropout(weights) * (1 - self.dropout.p)",
        "not rescaled",
        id="causal-dropout-without-rescaling",
    ),
    mistake(
        CAUSAL,
        "weights = self.dropout(torch.softmax(scores, dim=-1))",
        "weights = torch.softmax(self.dropout(scores), dim=-1)",
        "not what dropout on the attention weights gives",
        id="causal-dropout-on-the-scores",
    ),
    # CrossAttention
    wrong_answer(
        CROSS,
        _QUERIES_FROM_MEMORY,
        ("one row per memory position", "Queries must come from the decoder"),
        id="cross-queries-from-the-memory-shape",
    ),
    wrong_answer(
        CROSS,
        _QUERIES_FROM_MEMORY,
        "queries were taken from the memory",
        cases=[(2, 5, 5, 6, None, None, False, 3)],
        id="cross-queries-from-the-memory-equal-lengths",
    ),
    mistake(
        CROSS,
        "self.W_query = nn.Linear(d_model, d_model",
        "self.W_query = nn.Linear(d_memory, d_model",
        ("W_query reads d_memory", "Queries come from the decoder"),
        id="cross-query-layer-reads-the-memory",
    ),
    mistake(
        CROSS,
        "k = self.W_key(memory)\n        v = self.W_value(memory)",
        "k = self.W_key(x)\n        v = self.W_value(x)",
        "keys and values were taken from x",
        id="cross-keys-and-values-from-x",
    ),
    mistake(
        CROSS,
        "math.sqrt(q.shape[-1])",
        "math.sqrt(memory.shape[-1])",
        "sqrt(d_memory)",
        id="cross-scaled-by-the-memory-width",
    ),
    mistake(
        CROSS,
        "masked_fill(~memory_mask",
        "masked_fill(memory_mask",
        "memory_mask is inverted",
        id="cross-inverted-memory-mask",
    ),
    mistake(
        CROSS, "if memory_mask is not None:", "if False:", "memory_mask was ignored", id="cross-memory-mask-ignored"
    ),
    mistake(
        CROSS,
        "def __init__(self, d_model, d_memory=None, qkv_bias=False)",
        "def __init__(self, d_model, d_memory, qkv_bias=False)",
        "raised TypeError",
        id="cross-default-memory-width",
    ),
]

_LOSS = "F.cross_entropy(logits.transpose(1, 2), targets)"
_FLAT = "F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))"
MISTAKES += [
    mistake(TRAIN, "    optimizer.zero_grad(set_to_none=True)\n", "", "gradients accumulate", id="train-no-zero-grad"),
    mistake(
        TRAIN,
        "    optimizer.zero_grad(set_to_none=True)\n",
        "",
        ("gradients accumulate", "at the start of the step"),
        also=[("    optimizer.step()\n", "    optimizer.step()\n    optimizer.zero_grad()\n")],
        id="train-zero-grad-at-the-end",
    ),
    mistake(
        TRAIN,
        "    optimizer.zero_grad(set_to_none=True)\n",
        "",
        "weights did not change",
        also=[("    optimizer.step()\n", "    optimizer.zero_grad()\n    optimizer.step()\n")],
        id="train-zero-grad-between-backward-and-step",
    ),
    mistake(TRAIN, "    optimizer.step()\n", "", "weights did not change", id="train-no-step"),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(torch.softmax(logits, dim=-1).transpose(1, 2), targets)",
        "softmax was applied",
        id="train-softmax-first",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.nll_loss(logits.transpose(1, 2), targets)",
        "F.nll_loss was given raw logits",
        id="train-nll-on-logits",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(logits.transpose(1, 2), targets, reduction='sum')",
        "summed",
        id="train-summed-loss",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(logits, targets)",
        ("raised", "flatten logits to (B*T, V)"),
        id="train-logits-as-they-are",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(logits, targets)",
        ("<hidden case 1>", "reads the classes from dimension 1"),
        cases=[(2, 4, 4, 12)],  # T == V: F.cross_entropy raises no error
        id="train-logits-as-they-are-when-T-equals-V",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(logits.transpose(1, 2).reshape(-1, logits.shape[-1]), targets.reshape(-1))",
        "transposed to (B, V, T) before being flattened",
        id="train-transposed-then-flattened",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.T.reshape(-1))",
        "another order",
        id="train-targets-flattened-time-first",
    ),
    mistake(
        TRAIN,
        _LOSS,
        "F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets)",
        ("Expected input batch_size", "flatten"),
        id="train-targets-not-flattened",
    ),
    mistake(
        TRAIN,
        "    return float(loss.detach())",
        "    return loss",
        "return the loss as a Python float",
        id="train-returns-a-tensor",
    ),
    mistake(
        TRAIN,
        "    return float(loss.detach())",
        f"    return float({_LOSS.replace('logits', 'model(inputs)')})",
        "measured after optimizer.step()",
        id="train-loss-measured-after-the-step",
    ),
    mistake(
        TRAIN, "    loss.backward()", "    loss.detach().backward()", "does not require grad", id="train-detached-loss"
    ),
]

_MODULE_CALLING_THE_REFERENCE = """
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
_PYTORCHS_SDPA = """
import math
import torch
import torch.nn.functional as F

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.softmax(scores, dim=-1)
"""
_PYTORCHS_MULTIHEAD_MODULE = """
import torch
from torch import nn

def scaled_dot_product_attention(q, k, v, mask=None):
    mha = nn.MultiheadAttention(q.shape[-1], 1, batch_first=True)
    return mha(q, k, v)
"""

# Answers that are not written from scratch: the reference (subclassed, wrapped or called) or PyTorch's own version.
BORROWED = [
    *(
        wrong_answer(
            name,
            f"from course_lib.attention import {name} as Base\n\nclass {name}(Base):\n    pass\n",
            ("subclasses", "earns no points"),
            id=f"subclass-of-the-reference-{name}",
        )
        for name in ["SelfAttention", CAUSAL, CROSS]
    ),
    *(
        wrong_answer(
            name,
            functools.partial(getattr(ref, name)),
            "wraps the course's reference",
            id=f"partial-of-the-reference-{name}",
        )
        for name in ["simple_self_attention", SDPA, "causal_mask"]
    ),
    wrong_answer(
        SDPA,
        "from course_lib.attention import scaled_dot_product_attention as reference\n\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n    return reference(q, k, v, mask)\n",
        ("course_lib.attention.scaled_dot_product_attention", "earns no points"),
        id="sdpa-calling-the-reference-imported-by-name",
    ),
    wrong_answer(
        SDPA,
        "import course_lib.attention as a\n\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    return a.scaled_dot_product_attention(q, k, v, mask)\n",
        ("course_lib.attention.scaled_dot_product_attention", "earns no points"),
        id="sdpa-calling-the-reference-through-its-module",
    ),
    wrong_answer(
        "SelfAttention",
        _MODULE_CALLING_THE_REFERENCE,
        ("course_lib.attention.SelfAttention", "earns no points"),
        id="module-calling-the-reference-module",
    ),
    wrong_answer(
        SDPA,
        _PYTORCHS_SDPA,
        ("torch.nn.functional.scaled_dot_product_attention", "earns no points"),
        id="pytorchs-scaled-dot-product-attention",
    ),
    wrong_answer(
        SDPA,
        _PYTORCHS_MULTIHEAD_MODULE,
        ("torch.nn.MultiheadAttention", "earns no points"),
        id="pytorchs-multihead-module-for-sdpa",
    ),
    wrong_answer(
        TRAIN,
        "import course_lib.attention as a\n\n"
        "def train_step(model, optimizer, inputs, targets):\n"
        "    return a.train_step(model, optimizer, inputs, targets)\n",
        ("course_lib.attention.train_step", "earns no points"),
        id="train-step-calling-the-reference",
    ),
    wrong_answer(
        TRAIN,
        functools.partial(ref.train_step),
        "wraps the course's reference",
        id="partial-of-the-reference-train-step",
    ),
    wrong_answer(
        "causal_mask",
        "from torch import nn\n\ndef causal_mask(T, device=None):\n"
        "    return nn.Transformer.generate_square_subsequent_mask(T, device=device) == 0\n",
        ("generate_square_subsequent_mask", "earns no points"),
        id="pytorchs-square-subsequent-mask",
    ),
]


def test_the_lessons_worked_example_is_the_graders():
    nb = read(source_path(LESSON))
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith('tokens = ["Your"'))
    namespace = run_cell("import torch\n" + cell.source.replace("x.shape", "None"))
    assert namespace["tokens"] == grading.JOURNEY_TOKENS
    assert torch.equal(namespace["x"], torch.tensor(grading.JOURNEY_VECTORS))


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    KIT.fails(
        "simple_self_attention", "def simple_self_attention(x):\n    while True:\n        pass\n", "did not finish"
    )
    code = KIT.variant(
        "SelfAttention", "q, k, v = self.W_query(x)", "while True:\n            pass\n        q, k, v = self.W_query(x)"
    )
    KIT.fails("SelfAttention", code, "did not finish")


@pytest.mark.parametrize("name", KIT.exercises)
def test_an_unwritten_answer_says_so(name):
    if name[0].isupper():
        code = f"from torch import nn\n\nclass {name}(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        code += "        super().__init__()\n        raise NotImplementedError()\n"
    else:
        code = f"def {name}(*args, **kwargs):\n    raise NotImplementedError()\n"
    KIT.fails(name, code, "not written yet")
    KIT.fails(name, code, "not written yet", cases=KIT.hidden(name))


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(SDPA, "mask.logical_not()", "mask")
    message = KIT.fails(SDPA, code, "<hidden case 2>", "inverted", cases=KIT.hidden(SDPA))
    assert "(2, 2, 6, 32)" not in message and "causal" not in message
    code = KIT.variant(CAUSAL, "diagonal=1", "diagonal=0")
    message = KIT.fails(CAUSAL, code, "<hidden case 1>", "diagonal excluded", cases=KIT.hidden(CAUSAL))
    assert "context_length=4" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED
