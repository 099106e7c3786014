"""The from-scratch guard: is, subclasses, wraps or calls the reference or a listed shortcut."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from course_lib import attention, tokenization
from course_lib.grading import GradingError, call_answer, check_definition
from course_lib.grading.kit.guard import FORBIDDEN_SHORTCUTS, REFERENCE_MODULES, forbidden_for
from tests.answers import define

Q = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
GOOD_SDPA = """
import torch
def sdpa(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1)
    return w @ v, w
"""


def test_every_reference_and_shortcut_resolves():
    for name, module in REFERENCE_MODULES.items():
        forbidden = forbidden_for(name)
        assert any(module in label for _, label in forbidden.objects), name
    for name, paths in FORBIDDEN_SHORTCUTS.items():
        forbidden = forbidden_for(name)
        objects = [p for p in paths if not p.startswith("module:")]
        assert len(forbidden.objects) >= len(objects), name


def test_an_honest_answer_passes():
    out, weights = call_answer("scaled_dot_product_attention", define(GOOD_SDPA, "sdpa"), Q, Q, Q)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, Q, Q))
    check_definition("scaled_dot_product_attention", define(GOOD_SDPA, "sdpa"))


@pytest.mark.parametrize(
    "answer, how",
    [
        (attention.scaled_dot_product_attention, "is"),
        (functools.partial(attention.scaled_dot_product_attention), "wraps"),
        (functools.wraps(attention.scaled_dot_product_attention)(lambda *a: None), "wraps"),
        (
            define(
                "from course_lib.attention import scaled_dot_product_attention as r\ndef f(q, k, v):\n"
                "    return r(q, k, v)",
                "f",
            ),
            "uses",
        ),
        (
            define(
                "def make(r):\n    def f(q, k, v):\n        return r(q, k, v)\n    return f\n"
                "from course_lib import attention\nf = make(attention.scaled_dot_product_attention)",
                "f",
            ),
            "wraps",
        ),
    ],
)
def test_definition_time_shortcuts_are_caught(answer, how):
    with pytest.raises(GradingError, match=f"your answer {how}"):
        check_definition("scaled_dot_product_attention", answer)


@pytest.mark.parametrize(
    "code",
    [
        "import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v), None",
        "import torch\ndef f(q, k, v):\n    m = torch.nn.MultiheadAttention(4, 1, batch_first=True)\n"
        "    return m(q, k, v)",
        "import course_lib.attention\ndef f(q, k, v):\n"
        "    return getattr(course_lib.attention, 'scaled_dot_' + 'product_attention')(q, k, v)",
    ],
)
def test_call_time_shortcuts_are_caught(code):
    with pytest.raises(GradingError, match="your answer calls"):
        call_answer("scaled_dot_product_attention", define(code, "f"), Q, Q, Q)


def test_subclassing_a_reference_class_is_caught():
    sub = define("from course_lib.tokenization import SimpleTokenizer as S\nclass T(S):\n    pass", "T")
    with pytest.raises(GradingError, match="subclasses"):
        check_definition("SimpleTokenizer", sub)


def test_tokenizer_libraries_are_forbidden_for_tokenizer_exercises():
    code = (
        "import tiktoken\nfrom course_lib.data import gpt2_encoding\ndef f(text, merges):\n"
        "    return gpt2_encoding().encode(text)"
    )
    with pytest.raises(GradingError, match="tiktoken"):
        call_answer("bpe_encode", define(code, "f"), "hello", {})
    # ...but allowed where the contract does not forbid it (the reference computes expected values freely).
    assert call_answer("sliding_window_pairs", define(code, "f"), "hello", {}) == [31373]


def test_learner_exceptions_and_loops_become_messages():
    with pytest.raises(GradingError, match=r"f\(\.\.\.\) raised KeyError: 'x'"):
        call_answer("merge_pair", define("def f():\n    return {}['x']", "f"))
    with pytest.raises(GradingError, match="did not finish within 0.5 s"):
        call_answer("merge_pair", define("def f():\n    while True:\n        pass", "f"), timeout=0.5)


def test_the_guard_restores_the_previous_profiler():
    import sys

    calls = []
    sys.setprofile(lambda *a: calls.append(1))
    try:
        call_answer("causal_mask", define("import torch\ndef f(T):\n    return torch.ones(T, T).tril().bool()", "f"), 3)
        assert sys.getprofile() is not None
    finally:
        sys.setprofile(None)
    assert tokenization is not None
