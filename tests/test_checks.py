"""Tests of course_lib._checks: every check accepts good values and names the argument and the value when not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import _checks

BOOL_MASK = torch.ones(3, 4, dtype=torch.bool)

# (check, args, kwargs, exception, fragments the message must contain: the argument, the value, the expectation)
BAD = [
    (_checks.positive_int, ("T", 0), {}, ValueError, ["`T`", "0", "positive int"]),
    (_checks.positive_int, ("T", 2.0), {}, ValueError, ["`T`", "2.0", "positive int"]),
    (_checks.positive_int, ("T", True), {}, ValueError, ["`T`", "True", "positive int"]),
    (_checks.positive_int, ("T", "3"), {}, ValueError, ["`T`", "'3'", "positive int"]),
    (_checks.positive_ints, (), {"d_in": 4, "d_out": -1}, ValueError, ["`d_out`", "-1", "positive int"]),
    (_checks.int_between, ("k", 7, 1, 5, "rows left"), {}, ValueError, ["`k`", "7", "in 1..5", "(rows left)"]),
    (_checks.int_between, ("warmup", -1, 0), {}, ValueError, ["`warmup`", "-1", ">= 0"]),
    (_checks.int_between, ("warmup", 1.5, 0), {}, ValueError, ["`warmup`", "1.5", "an int"]),
    (_checks.positive_even, ("d_model", 7, "sin/cos pairs"), {}, ValueError, ["`d_model`", "7", "even", "sin/cos"]),
    (_checks.positive_even, ("D", 0, "pairs"), {}, ValueError, ["`D`", "0", "positive even"]),
    (_checks.divisible, ("d_model", 10, "n_heads", 3), {}, ValueError, ["`d_model`=10", "`n_heads`=3", "divisible"]),
    (_checks.divisible, ("d_model", 8, "n_heads", 0), {}, ValueError, ["`n_heads`", "0", "positive int"]),
    (_checks.positive_number, ("base", 0.0), {}, ValueError, ["`base`", "0.0", "positive number"]),
    (_checks.positive_number, ("base", "1e4"), {}, ValueError, ["`base`", "'1e4'", "positive number"]),
    (_checks.probability, ("dropout", 1.0), {}, ValueError, ["`dropout`", "1.0", "[0, 1)"]),
    (_checks.probability, ("dropout", None), {}, ValueError, ["`dropout`", "None", "[0, 1)"]),
    (_checks.number, ("loss", "x"), {}, TypeError, ["`loss`", "'x'", "a number"]),
    (_checks.number, ("loss", torch.ones(2)), {}, ValueError, ["`loss`", "(2,)", "single number"]),
    (_checks.one_of, ("backend", "svg", ("altair", "matplotlib")), {}, ValueError, ["`backend`", "'svg'", "altair"]),
    (_checks.instance, ("vocab", ["a"], dict, "a dict {token: id}"), {}, TypeError, ["`vocab`", "list", "a dict"]),
    (_checks.tensor, ("x", [1.0]), {}, TypeError, ["`x`", "list", "torch.Tensor"]),
    (_checks.tensor, ("ids", torch.zeros(3)), {"integer": True}, TypeError, ["`ids`", "float32", "integer tensor"]),
    (_checks.tensor, ("x", torch.zeros(2, 3)), {"shape": "B, T, C"}, ValueError, ["`x`", "(2, 3)", "3-D", "(B, T, C)"]),
    (_checks.tensor, ("x", torch.zeros(4)), {"shape": "..., T, D"}, ValueError, ["`x`", "(4,)", "at least 2-D"]),
    (
        _checks.tensor,
        ("x", torch.zeros(2, 3, 4)),
        {"shape": "B, T, d_in", "d_in": 5},
        ValueError,
        ["`x`", "d_in=5", "(2, 3, 4)"],
    ),
    (
        _checks.tensor,
        ("x", torch.zeros(2, 3, 8)),
        {"shape": "B, T, H*D", "H": 3},
        ValueError,
        ["`x`", "H=3", "(2, 3, 8)"],
    ),
    (
        _checks.tensor,
        ("x", torch.zeros(1, 9, 4)),
        {"shape": "B, T<=max_len, C", "max_len": 8},
        ValueError,
        ["`x`", "T=9", "max_len=8"],
    ),
    (
        _checks.tensor,
        ("x", torch.zeros(2, 3, 4)),
        {"shape": "B, T, C", "C": 0},
        ValueError,
        ["`C`", "0", "positive int"],
    ),
    (_checks.tensor, ("x", torch.zeros(3, 4)), {"shape": "T, T"}, ValueError, ["`x`", "(3, 4)", "(T, T)"]),
    (_checks.mask, ("mask", torch.ones(3, 4), (2, 3, 4)), {}, TypeError, ["`mask`", "float32", "torch.bool"]),
    (_checks.mask, ("mask", [[True]], (2, 3, 4)), {}, TypeError, ["`mask`", "list", "bool torch.Tensor"]),
    (_checks.mask, ("mask", BOOL_MASK, (2, 3, 5)), {}, ValueError, ["`mask`", "(3, 4)", "(2, 3, 5)", "broadcast"]),
    (_checks.indices, ("token_ids", torch.tensor([0, 4]), 4, "the rows"), {}, ValueError, ["`token_ids`", "4", "0..3"]),
    (_checks.string, ("text", b"hi"), {}, TypeError, ["text", "bytes", "b'hi'", "a str"]),
    (_checks.integer, ("stride", 1.5), {}, TypeError, ["stride", "1.5", "an int"]),
    (_checks.integer, ("stride", 0), {"minimum": 1}, ValueError, ["stride must be >= 1", "0"]),
    (
        _checks.items,
        ("pieces", "abc", (str, bytes), "str or bytes"),
        {},
        TypeError,
        ["pieces", "'abc'", "a list of str"],
    ),
    (_checks.items, ("pieces", ["a", 3], str, "str"), {}, TypeError, ["pieces", "item 1", "int: 3"]),
    (_checks.int_list, ("ids", [1, True]), {}, TypeError, ["ids", "item 1", "True", "only ints"]),
    (_checks.int_list, ("sizes", []), {"non_empty": True}, ValueError, ["sizes", "empty"]),
    (_checks.int_list, ("sizes", [300, 100]), {"minimum": 256}, ValueError, ["sizes", "100", ">= 256"]),
    (_checks.array, ("weights", [[0.5]]), {}, TypeError, ["`weights`", "list", "numpy array"]),
    (_checks.array, ("weights", np.array(["a"])), {}, TypeError, ["`weights`", "ndarray", "numeric"]),
    (_checks.labels, ("x_labels", ["a"], 2), {}, ValueError, ["`x_labels`", "1 labels", "(2)"]),
    (_checks.labels, ("x_labels", "ab", 2), {}, ValueError, ["`x_labels`", "'ab'", "one label per position"]),
    (_checks.finite_range, ("pe", np.array([np.nan, np.inf])), {}, ValueError, ["`pe`", "no finite values"]),
    (_checks.max_cells, ("`weights`", 200, 100), {}, ValueError, ["`weights`", "200", "max_cells=100"]),
]


@pytest.mark.parametrize(
    ("check", "args", "kwargs", "error", "fragments"),
    BAD,
    ids=[f"{case[0].__name__}-{i}" for i, case in enumerate(BAD)],
)
def test_bad_values_raise_with_the_argument_value_and_expectation(check, args, kwargs, error, fragments):
    with pytest.raises(error) as info:
        check(*args, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} missing from {str(info.value)!r}"


def test_every_check_is_tested():
    public = {
        name
        for name, value in vars(_checks).items()
        if not name.startswith("_") and callable(value) and value.__module__ == "course_lib._checks"
    }
    assert public <= {case[0].__name__ for case in BAD} | {"tensors"}


def test_good_values_pass_and_conversions_return():
    _checks.positive_int("T", 3)
    _checks.positive_ints(a=1, b=2)
    _checks.int_between("k", 5, 1, 5)
    _checks.int_between("warmup", 0, 0)
    _checks.positive_even("D", 4, "pairs")
    _checks.divisible("d_model", 12, "n_heads", 4)
    _checks.positive_number("base", 10000)
    _checks.probability("dropout", 0)
    assert _checks.number("loss", torch.tensor([2.5])) == 2.5
    assert _checks.number("loss", np.float32(1.5)) == 1.5
    _checks.one_of("layout", "grid", ("auto", "grid"))
    _checks.instance("vocab", {}, dict, "a dict")
    _checks.mask("mask", None, (2, 3, 4))
    _checks.mask("mask", torch.ones(4, dtype=torch.bool), (2, 3, 4))
    _checks.indices("ids", torch.tensor([], dtype=torch.long), 4, "rows")
    _checks.string("text", "")
    _checks.integer("seed", np.int64(3), minimum=0)
    assert _checks.items("tokens", ("a", "b"), str, "str") == ["a", "b"]
    assert _checks.int_list("ids", (np.int64(3), 4)) == [3, 4]
    assert type(_checks.int_list("ids", [np.int64(3)])[0]) is int
    assert _checks.array("w", torch.ones(2, dtype=torch.float16)).dtype == np.float64
    assert _checks.labels("x_labels", None, 3) == ["0", "1", "2"]
    assert _checks.finite_range("w", np.array([np.nan, 1.0, -2.0])) == (-2.0, 1.0)
    _checks.max_cells("`w`", 100, 100)


def test_tensor_shapes_return_the_size_of_each_label():
    x = torch.zeros(2, 5, 12, dtype=torch.long)
    assert _checks.tensor("x", x) == {}
    assert _checks.tensor("x", x, "B, T, C", integer=True) == {"B": 2, "T": 5, "C": 12}
    bounded = _checks.tensor("x", x, "..., T<=max_len, n_heads*D", max_len=5, n_heads=4)
    assert bounded == {"...": (2,), "T": 5, "n_heads*D": 12}
    assert _checks.tensor("x", x, "..., C", C=12) == {"...": (2, 5), "C": 12}
    assert _checks.tensor("x", x, "..., B, T, C") == {"...": (), "B": 2, "T": 5, "C": 12}


@pytest.mark.parametrize(
    "shapes", [((2, 1, 4), (3, 1)), ((0, 1), (1, 5)), ((), (2, 3)), ((2, 3), (3, 2)), ((0,), (2,)), ((4, 1), (1,))]
)
def test_broadcast_agrees_with_torch(shapes):
    try:
        expected = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        expected = None
    assert _checks._broadcast(*shapes) == expected


def test_tensors_compare_shared_labels_and_broadcast_leading_dimensions():
    q, k, v = torch.zeros(2, 1, 3, 4), torch.zeros(1, 8, 5, 4), torch.zeros(5, 6)
    _checks.tensors(q=(q, "..., Tq, dk"), k=(k, "..., Tk, dk"), v=(v, "..., Tk, dv"))
    with pytest.raises(ValueError, match=r"`q` and `k` must have the same dimension dk, got q \(2, 1, 3, 4\) and k"):
        _checks.tensors(q=(q, "..., Tq, dk"), k=(torch.zeros(5, 7), "..., Tk, dk"))
    with pytest.raises(ValueError, match=r"`k` and `v` must have the same dimension Tk"):
        _checks.tensors(q=(q, "..., Tq, dk"), k=(k, "..., Tk, dk"), v=(torch.zeros(4, 6), "..., Tk, dv"))
    with pytest.raises(ValueError, match=r"`x` and `memory` must have the same batch size B"):
        _checks.tensors(x=(torch.zeros(2, 3, 6), "B, Tq, C"), memory=(torch.zeros(3, 5, 6), "B, Tk, C"))
    with pytest.raises(ValueError, match=re.escape("leading dimensions (...) of `a` and `b` must broadcast")):
        _checks.tensors(a=(torch.zeros(2, 3), "..., C"), b=(torch.zeros(4, 3), "..., C"))
    with pytest.raises(ValueError, match=r"`memory` must be 3-D with shape \(B, Tk, d_memory\) where d_memory=6"):
        _checks.tensors(
            x=(torch.zeros(2, 3, 6), "B, Tq, d_model"),
            memory=(torch.zeros(2, 5, 4), "B, Tk, d_memory"),
            d_model=6,
            d_memory=6,
        )
    with pytest.raises(TypeError, match="`k` must be a torch.Tensor"):
        _checks.tensors(q=(q, "..., Tq, dk"), k=(k.tolist(), "..., Tk, dk"))


def test_no_module_imports_another_modules_private_names():
    """The house rule _checks exists for: shared helpers are public names or live in _checks."""
    offenders = []
    for path in sorted(Path(_checks.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "_checks"]
                offenders += [f"{path.name}: from {node.module} import {name}" for name in private]
    assert offenders == []
