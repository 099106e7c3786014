"""Lesson 03 graders: the lesson's answers pass; each common mistake is named; the reference earns nothing.

The tests every lesson gets, and the tables below, run through tests/grader_kit.py.
"""

from __future__ import annotations

import pytest

from course_lib.grading import position as grading
from tests.grader_kit import GraderKit, LessonGraderTests, wrong_answer

SIN_PE = "sinusoidal_position_encoding"

# The answers of the lesson notebook (notebooks/source/03_position_encoding), as a learner would write them.
SINUSOIDAL = """
import torch

def sinusoidal_position_encoding(max_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model/2,)
    angle = position / base ** (two_i / d_model)  # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
"""
MODULE = """
import torch
from torch import nn

from course_lib import position as ref

class PositionEncoding(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", ref.sinusoidal_position_encoding(max_len, d_model))  # (max_len, d_model)

    def forward(self, x):
        seq_len = x.shape[-2]  # T
        if seq_len > self.max_len:
            raise ValueError(f"sequence length T={seq_len} is longer than max_len={self.max_len}")
        return x + self.pe[:seq_len]  # (..., T, d_model) + (T, d_model)
"""
ROPE = """
import torch

def apply_rope(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)  # (D/2,)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq  # (T, D/2)
    cos, sin = angle.cos(), angle.sin()
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)  # (..., T, D/2, 2)
    return rotated.flatten(-2)  # (..., T, D)
"""

KIT = GraderKit(
    "03_position_encoding",
    grading,
    {SIN_PE: SINUSOIDAL, "PositionEncoding": MODULE, "apply_rope": ROPE},
)


# sinusoidal_position_encoding with one line changed
def _table(
    exponent="torch.arange(0, d_model, 2).float() / d_model",
    position="torch.arange(max_len).float()[:, None]",
    fill="pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)",
    base="base",
    check_odd=True,
    result="pe",
):
    guard_line = "if d_model % 2:\n        raise ValueError('odd')\n    " if check_odd else ""
    return (
        f"import torch\n\ndef f(max_len, d_model, base=10000.0):\n    {guard_line}"
        f"angle = ({position}) / {base} ** ({exponent})\n"
        f"    pe = torch.zeros(max_len, d_model)\n    {fill}\n    return {result}\n"
    )


# PositionEncoding with its buffer line or its forward changed
def _module(
    store="self.register_buffer('pe', table)",
    forward=(
        "T = x.shape[-2]\n        if T > self.max_len:\n            raise ValueError('too long')\n"
        "        return x + self.pe[:T]"
    ),
    signature="d_model, max_len",
):
    return (
        "from torch import nn\nfrom course_lib import position as ref\n\n"
        "class P(nn.Module):\n"
        f"    def __init__(self, {signature}):\n"
        "        super().__init__()\n"
        "        self.max_len = max_len\n"
        "        table = ref.sinusoidal_position_encoding(max_len, d_model)\n"
        f"        {store}\n\n"
        f"    def forward(self, x):\n        {forward}\n"
    )


# apply_rope with its pairing, its output or its angles changed
def _rope(
    pairs="x[..., 0::2], x[..., 1::2]",
    out="torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)",
    positions="torch.arange(T).float()",
    exponent="torch.arange(0, D, 2).float() / D",
    base="base",
    T="x.shape[-2]",
):
    return (
        f"import torch\n\ndef f(x, base=10000.0):\n    T, D = {T}, x.shape[-1]\n"
        f"    angle = ({positions})[:, None] * {base} ** (-({exponent}))\n"
        f"    cos, sin = angle.cos(), angle.sin()\n    a, b = {pairs}\n    return {out}\n"
    )


SIN_FILL_SWAPPED = "pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle)"
SIN_FILL_HALVES = "pe = torch.cat((torch.sin(angle), torch.cos(angle)), dim=-1)"

# Each known mistake, as a whole answer built from one of the templates above, and what its message names.
MISTAKES = [
    # sinusoidal_position_encoding
    wrong_answer(SIN_PE, _table(fill=SIN_FILL_SWAPPED), "sine and cosine are swapped", id="sinusoidal-sin-cos-swapped"),
    wrong_answer(
        SIN_PE,
        _table(exponent="torch.arange(d_model // 2).float() / d_model"),
        "2i/d_model",
        id="sinusoidal-exponent-i-not-2i",
    ),
    wrong_answer(SIN_PE, _table(fill=SIN_FILL_HALVES), "interleaved", id="sinusoidal-halves-not-interleaved"),
    wrong_answer(
        SIN_PE,
        _table(position="torch.arange(1, max_len + 1).float()[:, None]"),
        "positions start at 1",
        id="sinusoidal-positions-start-at-1",
    ),
    wrong_answer(SIN_PE, _table(base="10000.0"), "use the `base` argument", id="sinusoidal-base-ignored"),
    wrong_answer(SIN_PE, _table(result="pe.T"), "transposed", id="sinusoidal-transposed"),
    wrong_answer(SIN_PE, _table(check_odd=False), "raise a ValueError", id="sinusoidal-odd-d_model-accepted"),
    wrong_answer(
        SIN_PE,
        "def f(max_len, d_model, base=10000.0):\n    raise NotImplementedError()",
        "not written yet",
        id="sinusoidal-unwritten",
    ),
    # PositionEncoding
    wrong_answer(
        "PositionEncoding",
        _module(store="self.pe = table"),
        "plain attribute, not a buffer",
        id="module-table-as-plain-attribute",
    ),
    wrong_answer(
        "PositionEncoding",
        _module(store="self.register_buffer('pe', table, persistent=False)"),
        "non-persistent buffer",
        id="module-non-persistent-buffer",
    ),
    wrong_answer(
        "PositionEncoding",
        _module(store="self.pe = nn.Parameter(table)"),
        "nn.Parameter",
        id="module-table-as-parameter",
    ),
    wrong_answer(
        "PositionEncoding", _module(store="self.table = table"), "no attribute `pe`", id="module-buffer-not-named-pe"
    ),
    wrong_answer(
        "PositionEncoding",
        _module(store="self.register_buffer('pe', table[None])"),
        "without a batch dimension",
        id="module-table-with-a-batch-dimension",
    ),
    wrong_answer(
        "PositionEncoding", _module(signature="max_len, d_model"), "in this order", id="module-arguments-swapped"
    ),
    wrong_answer(
        "PositionEncoding",
        _module(forward="return x + self.pe[: x.shape[-2]]"),
        "must raise a ValueError when T",
        id="module-too-long-input-accepted",
    ),
    wrong_answer(
        "PositionEncoding",
        _module(forward="return x + self.pe[: x.shape[1]]"),
        "T = x.shape[-2]",
        id="module-length-from-dim-1",
    ),
    wrong_answer(
        "PositionEncoding",
        _module(forward="return x + self.pe[1 : x.shape[-2] + 1]"),
        "first position is row 0",
        id="module-rows-from-1",
    ),
    wrong_answer(
        "PositionEncoding",
        _module(forward="x += self.pe[: x.shape[-2]]\n        return x"),
        "in place",
        id="module-adds-in-place",
    ),
    # apply_rope
    wrong_answer(
        "apply_rope",
        _rope(pairs="x[..., : D // 2], x[..., D // 2 :]", out="torch.cat((a * cos - b * sin, a * sin + b * cos), -1)"),
        "rotate half",
        id="rope-rotate-half",
    ),
    wrong_answer(
        "apply_rope",
        _rope(out="torch.cat((a * cos - b * sin, a * sin + b * cos), -1)"),
        "channels 2i and 2i+1",
        id="rope-pairs-not-put-back-in-place",
    ),
    wrong_answer(
        "apply_rope",
        _rope(out="torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1).flatten(-2)"),
        "wrong way",
        id="rope-rotates-the-wrong-way",
    ),
    wrong_answer(
        "apply_rope",
        _rope(positions="torch.arange(1, T + 1).float()"),
        "positions start at 1",
        id="rope-positions-start-at-1",
    ),
    wrong_answer(
        "apply_rope", _rope(exponent="torch.arange(D // 2).float() / D"), "base**(-2i/D)", id="rope-exponent-i-not-2i"
    ),
    wrong_answer("apply_rope", _rope(base="10000.0"), "use the `base` argument", id="rope-base-ignored"),
    wrong_answer("apply_rope", _rope(T="x.shape[0]"), "positions run along dim -2", id="rope-positions-along-dim-0"),
]

_MODULE_BUILT_AT_RUN_TIME = """
import course_lib.position
from torch import nn

class P(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.inner = getattr(course_lib.position, "Position" + "Encoding")(d_model, max_len)
        self.register_buffer("pe", self.inner.pe.clone())

    def forward(self, x):
        return self.inner(x)
"""

# Answers that wrap, subclass or call the reference.
BORROWED = [
    wrong_answer(
        SIN_PE,
        "from course_lib import position as ref\n\n"
        "def f(n, d, base=10000.0):\n    return ref.sinusoidal_position_encoding(n, d, base)",
        f"write `{SIN_PE}` yourself",
        id="sinusoidal-calling-the-reference",
    ),
    wrong_answer(
        "PositionEncoding",
        "from course_lib.position import PositionEncoding as PE\n\nclass P(PE):\n    pass",
        "write `PositionEncoding` yourself",
        id="module-subclass-of-the-reference",
    ),
    wrong_answer(
        "apply_rope",
        "from course_lib.position import apply_rope as r\n\ndef f(x, base=10000.0):\n    return r(x, base)",
        "write `apply_rope` yourself",
        id="rope-calling-the-reference",
    ),
    wrong_answer(
        "PositionEncoding",
        _MODULE_BUILT_AT_RUN_TIME,
        "write `PositionEncoding` yourself",
        id="module-building-the-reference-module-at-run-time",
    ),
]


@pytest.mark.parametrize(
    "name, code, words, first",
    [
        pytest.param(SIN_PE, _table(fill=SIN_FILL_SWAPPED), "sine and cosine are swapped", 0, id="sinusoidal-swapped"),
        pytest.param(SIN_PE, _table(base="10000.0"), "use the `base` argument", 0, id="sinusoidal-base-ignored"),
        pytest.param(
            "PositionEncoding",
            _module(store="self.register_buffer('pe', table[None])"),
            "without a batch",
            0,
            id="module-batch-dimension",
        ),
        pytest.param(
            "PositionEncoding",
            _module(forward="return x + self.pe[: x.shape[-2]]"),
            "must raise a ValueError",
            0,
            id="module-too-long-input-accepted",
        ),
        # the first hidden case uses T = max_len, where rows 1..T do not exist: start at the second
        pytest.param(
            "PositionEncoding",
            _module(forward="return x + self.pe[1 : x.shape[-2] + 1]"),
            "row 0",
            1,
            id="module-rows-from-1",
        ),
        pytest.param(
            "apply_rope",
            _rope(out="torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1).flatten(-2)"),
            "wrong way",
            0,
            id="rope-rotates-the-wrong-way",
        ),
    ],
)
def test_hidden_cases_are_named_by_number_and_their_inputs_stay_hidden(name, code, words, first):
    message = KIT.fails(name, code, "<hidden case ", words, cases=KIT.hidden(name)[first:])
    assert "of shape (" not in message
    for case in KIT.hidden(name):  # no hidden input appears in the message
        assert repr(case) not in message and repr(case[:2])[1:-1] not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED
