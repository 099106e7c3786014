"""Graders of lesson 03 — Position (one `check_<exercise>` per exercise; docs/ARCHITECTURE.md,
Exercise contract).

The recipe is lesson 02's (see `course_lib.grading.embeddings`): the guard first, seeded inputs, expected
values from `course_lib.position` computed outside the learner's call, and on a mismatch each known wrong
variant of the formula is computed on the same input so that the mistake can be named
(`course_lib.grading.kit.diagnose`).

With `cases=None` a check runs its visible cases; a hidden test cell passes its own `cases` (the format is in
each check's docstring) and only those run. Messages about a hidden case call it "<hidden case k>" and never show
its input.

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from course_lib import position as ref
from course_lib.grading.kit import core
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Hint,
    Passed,
    call_answer,
    call_label,
    catching,
    expect_unchanged,
    random_tensor,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor, tensor_result
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_PositionEncoding", "check_apply_rope", "check_sinusoidal_position_encoding"]

# float32 angles of up to ~100 radians are off by ~1e-5 however carefully they are computed.
ATOL = 1e-4
RTOL = 1e-4
BASE = 10000.0


# ------------------------------------------------------------------------------------------------------------
# Wrong (and right) versions of the sinusoidal table


def _table(
    max_len: int,
    d_model: int,
    base: float,
    *,
    start: int = 0,
    exponent: str = "2i/d",
    layout: str = "interleaved",
    swap: bool = False,
    multiply: bool = False,
) -> Tensor:
    """The sinusoidal table with one mistake switched on (all off: the right table), in float64."""
    position = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    if exponent == "j/d":  # every channel its own exponent j / d_model: pairs no longer share a frequency
        j = torch.arange(d_model, dtype=torch.float64)  # (d_model,)
        angle = position / base ** (j / d_model)  # (max_len, d_model)
        first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
        pe = second(angle)
        pe[:, 0::2] = first(angle[:, 0::2])
        return pe
    pair = torch.arange(0, d_model // 2, dtype=torch.float64)  # (d_model/2,) pair index i
    power = (2 * pair if exponent == "2i/d" else pair) / d_model  # (d_model/2,)
    angle = position * base**power if multiply else position / base**power  # (max_len, d_model/2)
    first, second = (torch.cos(angle), torch.sin(angle)) if swap else (torch.sin(angle), torch.cos(angle))
    if layout == "halves":
        return torch.cat((first, second), dim=-1)  # (max_len, d_model): [sin | cos]
    return torch.stack((first, second), dim=-1).flatten(-2)  # (max_len, d_model): sin, cos, sin, cos, ...


def _table_variants(max_len: int, d_model: int, base: float) -> list[Variant]:
    """Each known mistake in building the table, with what to say about it."""
    variants: list[Variant] = [
        (
            lambda: _table(max_len, d_model, base, swap=True),
            "sine and cosine are swapped: the even channels 0, 2, 4, ... hold sin, the odd channels hold cos "
            "(row 0 is [0, 1, 0, 1, ...]).",
        ),
        (
            lambda: _table(max_len, d_model, base, exponent="i/d"),
            "the exponent is i/d_model with i = 0, 1, 2, ... counting the pairs; it must be 2i/d_model — the "
            "even channel index over d_model, e.g. torch.arange(0, d_model, 2) / d_model.",
        ),
        (
            lambda: _table(max_len, d_model, base, exponent="j/d"),
            "each channel got its own exponent (channel j uses base**(j/d_model)); a sin/cos pair shares one "
            "frequency: channels 2i and 2i+1 both use base**(2i/d_model).",
        ),
        (
            lambda: _table(max_len, d_model, base, layout="halves"),
            "the sines fill the first half of the channels and the cosines the second half ([sin | cos], "
            "concatenated); they must be interleaved: pe[:, 0::2] = sin, pe[:, 1::2] = cos.",
        ),
        (
            lambda: _table(max_len, d_model, base, start=1),
            "positions start at 1; they start at 0, so row 0 is [sin 0, cos 0, ...] = [0, 1, 0, 1, ...].",
        ),
        (
            lambda: _table(max_len, d_model, base, multiply=True),
            "the position was multiplied by base**(2i/d_model); divide by it: angle = p / base**(2i/d_model).",
        ),
        (
            lambda: _table(max_len, d_model, base).T,
            "the table is transposed: one row per position, shape (max_len, d_model).",
        ),
    ]
    if base != BASE:
        variants.append(
            (
                lambda: _table(max_len, d_model, BASE),
                "this is the table for base 10000, but this call passed another base: use the `base` argument.",
            )
        )
    return variants


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: sinusoidal_position_encoding

# (max_len, d_model) or (max_len, d_model, base)
_SINUSOID_CASES: list[tuple] = [(8, 4), (16, 10), (50, 32), (12, 6, 100.0)]
_ODD_D_MODEL = (6, 7)  # (max_len, d_model) that must raise ValueError


def check_sinusoidal_position_encoding(answer: Any, cases: list | None = None) -> Passed:
    """Check `sinusoidal_position_encoding(max_len, d_model, base=10000.0)`, and its ValueError for odd d_model.

    A case is `(max_len, d_model)` or `(max_len, d_model, base)` with d_model even; every run also checks that
    an odd d_model raises ValueError.
    """
    name = Graded(ref.sinusoidal_position_encoding)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _SINUSOID_CASES)
    for tag, case in chosen:
        max_len, d_model = case[:2]
        args = tuple(case)
        base = float(case[2]) if len(case) > 2 else BASE
        expected = ref.sinusoidal_position_encoding(max_len, d_model, base)  # (max_len, d_model)
        what = call_label(name, ", ".join(repr(a) for a in args), tag)
        got = tensor_result(name, call_answer(name, answer, *args, what=what), what)
        diagnose_tensor(name, what, got, expected, _table_variants(max_len, d_model, base), atol=ATOL, rtol=RTOL)
    _check_odd_d_model(name, answer)
    return Passed(name, len(chosen) + 1, hidden=cases is not None)


def _check_odd_d_model(name: str, answer: Any) -> None:
    max_len, d_model = _ODD_D_MODEL
    what = f"sinusoidal_position_encoding({max_len}, {d_model})"
    outcome = call_answer(name, catching(answer), max_len, d_model, what=what)
    if isinstance(outcome, ValueError):
        return
    if isinstance(outcome, Exception):
        raise GradingError(
            name,
            f"{what} raised {type(outcome).__name__} ({outcome}); an odd d_model cannot be split into sin/cos "
            "pairs, so check it first and raise a ValueError that says so.",
        )
    raise GradingError(
        name,
        f"{what} returned a result, but an odd d_model cannot be split into sin/cos pairs: raise a ValueError "
        "(e.g. `if d_model % 2: raise ValueError(...)`).",
    )


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: PositionEncoding

# (d_model, max_len, shape of x, seed): x is (..., T, d_model) with T <= max_len.
_MODULE_CASES: list[tuple[int, int, tuple[int, ...], int]] = [
    (8, 16, (2, 5, 8), 0),
    (6, 10, (10, 6), 1),
    (4, 7, (3, 2, 7, 4), 2),
]

_FORWARD_HINTS: list[Hint] = [
    (
        lambda m: "size of tensor" in m or "broadcast" in m,
        "add only the first T rows of the table, T = x.shape[-2] (the second-to-last dimension: x may have "
        "several batch dimensions in front): x + self.pe[:T].",
    ),
]


def check_PositionEncoding(answer: Any, cases: list | None = None) -> Passed:
    """Check `PositionEncoding(d_model, max_len)`: the persistent buffer `pe`, forward, and T > max_len.

    A case is `(d_model, max_len, x_shape, seed)` with x_shape = (..., T, d_model) and T <= max_len.
    """
    name = Graded(ref.PositionEncoding)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _MODULE_CASES)
    for tag, (d_model, max_len, x_shape, seed) in chosen:
        label = call_label(name, f"{d_model}, {max_len}", tag)  # how the module is named in messages
        module = _build_module(name, answer, d_model, max_len, label)
        table = ref.sinusoidal_position_encoding(max_len, d_model)  # (max_len, d_model)
        _check_buffer(name, module, table, d_model, max_len, label)
        _check_forward(name, module, table, random_tensor(*x_shape, seed=seed), label, shown=tag is None)
        _check_too_long(name, module, d_model, max_len, label, shown=tag is None)
    return Passed(name, 3 * len(chosen), hidden=cases is not None)


def _build_module(name: str, answer: Any, d_model: int, max_len: int, label: str) -> nn.Module:
    module = call_answer(name, answer, d_model, max_len, what=label)
    if not core.is_instance(module, nn.Module):
        raise GradingError(
            name,
            f"{label} made a {core.type_name(module)}, not a torch.nn.Module: write `class "
            "PositionEncoding(nn.Module)` and call super().__init__() first in __init__.",
        )
    return module


def _check_buffer(name: str, module: nn.Module, table: Tensor, d_model: int, max_len: int, label: str) -> None:
    what = f"{label}.pe"
    pe = getattr(module, "pe", None)
    if pe is None:
        raise GradingError(
            name, f"{what}: the module has no attribute `pe`; store the table with self.register_buffer('pe', table)."
        )
    if "pe" in {parameter for parameter, _ in module.named_parameters()}:
        raise GradingError(
            name,
            f"{what} is an nn.Parameter, so an optimizer would train it. The sinusoidal table is fixed: make it a "
            "buffer with self.register_buffer('pe', table).",
        )
    if "pe" not in dict(module.named_buffers()):
        raise GradingError(
            name,
            f"{what} is a plain attribute, not a buffer: it would stay behind on the CPU after model.to('cuda') "
            "and is not saved in the state dict. Use self.register_buffer('pe', table).",
        )
    if "pe" not in module.state_dict():
        raise GradingError(
            name,
            f"{what} is a non-persistent buffer (persistent=False), so it is missing from the state dict; the "
            "contract keeps it there: self.register_buffer('pe', table) with the default persistent=True.",
        )
    got = tensor_result(name, pe, what)
    if tuple(got.shape) == (1, max_len, d_model):
        raise GradingError(
            name,
            f"{what} has a leading dimension of size 1; store it as (max_len, d_model), without a batch "
            "dimension (broadcasting adds it when you compute x + pe[:T]).",
        )
    variants = _table_variants(max_len, d_model, BASE)
    if max_len % 2 == 0:
        variants.insert(
            0,
            (
                lambda: _table(d_model, max_len, BASE),
                "the table has d_model positions of max_len channels: the arguments are "
                "PositionEncoding(d_model, max_len), in this order (as the toy model of lesson 08 calls it).",
            ),
        )
    diagnose_tensor(name, what, got, table, variants, atol=ATOL, rtol=RTOL)


def _check_forward(name: str, module: nn.Module, table: Tensor, x: Tensor, label: str, shown: bool) -> None:
    T = x.shape[-2]
    expected = x + table[:T]  # (..., T, d_model)
    x_in = x.clone()
    what = f"{label}(x of shape {tuple(x.shape)})" if shown else f"{label} called on its input"
    got = tensor_result(name, call_answer(name, module, x_in, what=what, hints=_FORWARD_HINTS), what)
    expect_unchanged(name, {"x": (x_in, x)}, what)
    variants: list[Variant] = [
        (lambda: x, "you returned x unchanged: add the table, x + self.pe[:T]."),
        (lambda: table[:T].expand_as(x), "you returned the table alone: return x + self.pe[:T]."),
        (
            lambda: x + table[1 : T + 1],
            "you added rows 1..T of the table; the first position is row 0: x + self.pe[:T].",
        ),
        (lambda: x * table[:T], "you multiplied x by the table; position encodings are added: x + self.pe[:T]."),
    ]
    diagnose_tensor(name, what, got, expected, variants, atol=ATOL, rtol=RTOL)


def _check_too_long(name: str, module: nn.Module, d_model: int, max_len: int, label: str, shown: bool) -> None:
    T = max_len + 1
    shape = f"x of shape (2, {T}, {d_model})" if shown else "an input"
    what = f"{label} on {shape} with T = max_len + 1"
    x = random_tensor(2, T, d_model, seed=99)
    outcome = call_answer(name, catching(module), x, what=what)
    if isinstance(outcome, ValueError):
        return
    cure = (
        "the table has only max_len rows, so forward must raise a ValueError when T = x.shape[-2] is larger "
        "than max_len, with a message that gives both numbers."
    )
    if isinstance(outcome, Exception):
        raise GradingError(name, f"{what} raised {type(outcome).__name__} ({outcome}) instead of a ValueError: {cure}")
    raise GradingError(name, f"{what} returned a result instead of raising a ValueError: {cure}")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: apply_rope


def _rope(
    x: Tensor,
    base: float,
    *,
    start: int = 0,
    exponent: str = "2i/D",
    sign: float = 1.0,
    out_layout: str = "interleaved",
) -> Tensor:
    """Interleaved RoPE with one mistake switched on (all off: the right rotation), in float64."""
    T, D = x.shape[-2], x.shape[-1]
    pair = torch.arange(D // 2, dtype=torch.float64)  # (D/2,)
    power = (2 * pair if exponent == "2i/D" else pair) / D  # (D/2,)
    position = torch.arange(start, start + T, dtype=torch.float64)[:, None]  # (T, 1)
    angle = sign * position * base ** (-power)  # (T, D/2)
    cos, sin = angle.cos(), angle.sin()  # (T, D/2) each
    a, b = x.double()[..., 0::2], x.double()[..., 1::2]  # (..., T, D/2) each
    first, second = a * cos - b * sin, a * sin + b * cos  # (..., T, D/2) each
    if out_layout == "halves":
        return torch.cat((first, second), dim=-1)  # (..., T, D)
    return torch.stack((first, second), dim=-1).flatten(-2)  # (..., T, D)


# (shape of x, seed) or (shape of x, seed, base); x is (..., T, D) with D even (D >= 4 to tell layouts apart).
_ROPE_CASES: list[tuple] = [((6, 4), 0), ((2, 5, 8), 1), ((2, 3, 7, 6), 2, 500.0)]


def check_apply_rope(answer: Any, cases: list | None = None) -> Passed:
    """Check `apply_rope(x, base=10000.0)` on interleaved channel pairs, positions 0..T-1 along dim -2.

    A case is `(x_shape, seed)` or `(x_shape, seed, base)`, x_shape = (..., T, D) with D even.
    """
    name = Graded(ref.apply_rope)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _ROPE_CASES)
    for tag, case in chosen:
        x = random_tensor(*case[0], seed=case[1])
        base = float(case[2]) if len(case) > 2 else BASE
        _rope_case(name, answer, x, base, with_base=len(case) > 2, tag=tag)
    return Passed(name, len(chosen), hidden=cases is not None)


def _rope_case(name: str, answer: Any, x: Tensor, base: float, with_base: bool, tag: str | None) -> None:
    expected = ref.apply_rope(x, base)  # (..., T, D)
    x_in = x.clone()
    args = (x_in, base) if with_base else (x_in,)
    what = call_label(name, f"x of shape {tuple(x.shape)}" + (f", base={base:g}" if with_base else ""), tag)
    hints: list[Hint] = [
        (
            lambda m: "size of tensor" in m or "broadcast" in m,
            "positions run along dim -2 (T = x.shape[-2]) and the pairs along the last dim (D = x.shape[-1]); "
            "x may have several batch dimensions in front. Angles of shape (T, D/2) broadcast against "
            "x[..., 0::2].",
        )
    ]
    got = tensor_result(name, call_answer(name, answer, *args, what=what, hints=hints), what)
    expect_unchanged(name, {"x": (x_in, x)}, what)
    variants: list[Variant] = [
        (
            lambda: ref.rope_rotate_half(x, base),
            "this is the 'rotate half' layout (GPT-NeoX, Hugging Face Llama), which pairs channel i with channel "
            "i + D/2. The contract pairs neighbours: (x[..., 2i], x[..., 2i+1]), i.e. x[..., 0::2] with "
            "x[..., 1::2].",
        ),
        (
            lambda: _rope(x, base, out_layout="halves"),
            "the pairs are rotated correctly but written back as [all first members | all second members]; put "
            "each rotated pair back in channels 2i and 2i+1 (e.g. torch.stack((a2, b2), dim=-1).flatten(-2)).",
        ),
        (
            lambda: _rope(x, base, sign=-1.0),
            "each pair is rotated the wrong way (by minus the angle): the new pair is "
            "(a cos θ − b sin θ, a sin θ + b cos θ).",
        ),
        (
            lambda: _rope(x, base, start=1),
            "positions start at 1; they start at 0, so the first position is not rotated at all.",
        ),
        (
            lambda: _rope(x, base, exponent="i/D"),
            "the angle uses base**(-i/D) with i counting the pairs; it must be base**(-2i/D) — the even channel "
            "index over D.",
        ),
    ]
    if base != BASE:
        variants.append(
            (
                lambda: _rope(x, BASE),
                "these angles use base 10000, but this call passed another base: use the `base` argument.",
            )
        )
    diagnose_tensor(name, what, got, expected, variants, atol=ATOL, rtol=RTOL)
