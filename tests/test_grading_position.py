"""Lesson 03 graders: the lesson's answers pass; each common mistake is named; the reference earns nothing."""

from __future__ import annotations

import re

import pytest

from course_lib import position
from course_lib.grading import GradingError
from course_lib.grading.position import check_apply_rope, check_PositionEncoding, check_sinusoidal_position_encoding
from tests.answers import assert_passes, define, hidden_cases

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

# The hidden cases of the lesson notebook, as its hidden test cells pass them.
HIDDEN = hidden_cases("03_position_encoding")

CHECKS = {
    "sinusoidal_position_encoding": (check_sinusoidal_position_encoding, SINUSOIDAL),
    "PositionEncoding": (check_PositionEncoding, MODULE),
    "apply_rope": (check_apply_rope, ROPE),
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_lesson_answers_pass_visible_and_hidden_cases(name):
    check, code = CHECKS[name]
    answer = define(code, name)
    assert "visible checks passed" in repr(check(answer))
    assert "hidden checks passed" in repr(check(answer, cases=HIDDEN[name]))


@pytest.mark.parametrize("name", list(CHECKS))
def test_reference_agrees_with_its_grader_when_the_guard_is_off(name, no_guard):
    assert set(HIDDEN) == set(CHECKS)
    check, _ = CHECKS[name]
    assert_passes(check, getattr(position, name), HIDDEN[name])


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


@pytest.mark.parametrize(
    "check, code, words",
    [
        # sinusoidal_position_encoding
        (check_sinusoidal_position_encoding, _table(fill=SIN_FILL_SWAPPED), "sine and cosine are swapped"),
        (
            check_sinusoidal_position_encoding,
            _table(exponent="torch.arange(d_model // 2).float() / d_model"),
            "2i/d_model",
        ),
        (check_sinusoidal_position_encoding, _table(fill=SIN_FILL_HALVES), "interleaved"),
        (
            check_sinusoidal_position_encoding,
            _table(position="torch.arange(1, max_len + 1).float()[:, None]"),
            "positions start at 1",
        ),
        (check_sinusoidal_position_encoding, _table(base="10000.0"), "use the `base` argument"),
        (check_sinusoidal_position_encoding, _table(result="pe.T"), "transposed"),
        (check_sinusoidal_position_encoding, _table(check_odd=False), "raise a ValueError"),
        (
            check_sinusoidal_position_encoding,
            "def f(max_len, d_model, base=10000.0):\n    raise NotImplementedError()",
            "not written yet",
        ),
        # PositionEncoding
        (check_PositionEncoding, _module(store="self.pe = table"), "plain attribute, not a buffer"),
        (
            check_PositionEncoding,
            _module(store="self.register_buffer('pe', table, persistent=False)"),
            "non-persistent buffer",
        ),
        (check_PositionEncoding, _module(store="self.pe = nn.Parameter(table)"), "nn.Parameter"),
        (check_PositionEncoding, _module(store="self.table = table"), "no attribute `pe`"),
        (check_PositionEncoding, _module(store="self.register_buffer('pe', table[None])"), "without a batch dimension"),
        (check_PositionEncoding, _module(signature="max_len, d_model"), "in this order"),
        (
            check_PositionEncoding,
            _module(forward="return x + self.pe[: x.shape[-2]]"),
            "must raise a ValueError when T",
        ),
        (check_PositionEncoding, _module(forward="return x + self.pe[: x.shape[1]]"), "T = x.shape[-2]"),
        (check_PositionEncoding, _module(forward="return x + self.pe[1 : x.shape[-2] + 1]"), "first position is row 0"),
        (check_PositionEncoding, _module(forward="x += self.pe[: x.shape[-2]]\n        return x"), "in place"),
        # apply_rope
        (
            check_apply_rope,
            _rope(
                pairs="x[..., : D // 2], x[..., D // 2 :]", out="torch.cat((a * cos - b * sin, a * sin + b * cos), -1)"
            ),
            "rotate half",
        ),
        (check_apply_rope, _rope(out="torch.cat((a * cos - b * sin, a * sin + b * cos), -1)"), "channels 2i and 2i+1"),
        (
            check_apply_rope,
            _rope(out="torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1).flatten(-2)"),
            "wrong way",
        ),
        (check_apply_rope, _rope(positions="torch.arange(1, T + 1).float()"), "positions start at 1"),
        (check_apply_rope, _rope(exponent="torch.arange(D // 2).float() / D"), "base**(-2i/D)"),
        (check_apply_rope, _rope(base="10000.0"), "use the `base` argument"),
        (check_apply_rope, _rope(T="x.shape[0]"), "positions run along dim -2"),
    ],
)
def test_common_mistakes_are_named(check, code, words):
    with pytest.raises(GradingError, match=re.escape(words)):
        check(define(code, "f") if "def f(" in code else define(code, "P"))


@pytest.mark.parametrize(
    "name, answer",
    [
        ("sinusoidal_position_encoding", position.sinusoidal_position_encoding),
        ("PositionEncoding", position.PositionEncoding),
        ("apply_rope", position.apply_rope),
        (
            "sinusoidal_position_encoding",
            define(
                "from course_lib import position as ref\n\n"
                "def f(n, d, base=10000.0):\n    return ref.sinusoidal_position_encoding(n, d, base)",
                "f",
            ),
        ),
        (
            "PositionEncoding",
            define("from course_lib.position import PositionEncoding as PE\n\nclass P(PE):\n    pass", "P"),
        ),
        (
            "apply_rope",
            define(
                "from course_lib.position import apply_rope as r\n\ndef f(x, base=10000.0):\n    return r(x, base)", "f"
            ),
        ),
    ],
)
def test_the_reference_earns_nothing(name, answer):
    check, _ = CHECKS[name]
    with pytest.raises(GradingError, match=f"write `{name}` yourself"):
        check(answer)


def test_a_module_that_builds_the_reference_module_at_run_time_earns_nothing():
    code = """
import importlib
from torch import nn

class P(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        module = importlib.import_module("course_lib.position")
        self.inner = getattr(module, "Position" + "Encoding")(d_model, max_len)
        self.register_buffer("pe", self.inner.pe.clone())

    def forward(self, x):
        return self.inner(x)
"""
    with pytest.raises(GradingError, match="write `PositionEncoding` yourself"):
        check_PositionEncoding(define(code, "P"))


@pytest.mark.parametrize(
    "check, code, words, first",
    [
        (check_sinusoidal_position_encoding, _table(fill=SIN_FILL_SWAPPED), "sine and cosine are swapped", 0),
        (check_sinusoidal_position_encoding, _table(base="10000.0"), "use the `base` argument", 0),
        (check_PositionEncoding, _module(store="self.register_buffer('pe', table[None])"), "without a batch", 0),
        (check_PositionEncoding, _module(forward="return x + self.pe[: x.shape[-2]]"), "must raise a ValueError", 0),
        # the first hidden case uses T = max_len, where rows 1..T do not exist: start at the second
        (check_PositionEncoding, _module(forward="return x + self.pe[1 : x.shape[-2] + 1]"), "row 0", 1),
        (
            check_apply_rope,
            _rope(out="torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1).flatten(-2)"),
            "wrong way",
            0,
        ),
    ],
)
def test_hidden_cases_are_named_by_number_and_their_inputs_stay_hidden(check, code, words, first):
    name = check.__name__.removeprefix("check_")
    with pytest.raises(GradingError) as failure:
        check(define(code, "f") if "def f(" in code else define(code, "P"), cases=HIDDEN[name][first:])
    message = failure.value.message
    assert "<hidden case " in message and words in message
    assert "of shape (" not in message
    for case in HIDDEN[name]:  # no hidden input appears in the message
        assert repr(case) not in message and repr(case[:2])[1:-1] not in message
