"""Argument checks shared by the course modules: one line at the top of a function, so the math comes first.

Each check raises TypeError (the wrong kind of object) or ValueError (the right kind, a wrong value) with a
message that names the argument, shows the value and says what was expected. One exception, kept because
tests pin it: the number checks of the tensor modules (`positive_int`, `int_between`, `positive_even`,
`divisible`, `positive_number`, `probability`) raise ValueError for any bad value, a float or a str included.

Tensor shapes are written like the shape comments of the lessons:

    "B, T, d_in"          3-D; with d_in=8 the last dimension must be 8
    "..., T, D"           at least 2-D; the leading dimensions are free
    "B, T, n_heads*D"     with n_heads=4 the last dimension must be a multiple of 4
    "B, T<=max_len, C"    with max_len=16 at most 16 positions

Where checks go: at the entry points a learner calls — the exercises' reference functions, the top-level
model's forward — not inside a layer's forward that runs within a bigger model (nor the helpers it calls,
such as `attention_weights` or `split_heads`): there they would cost every forward pass, and a compiled forward
must hold nothing but the model (GPT2.forward checks its inputs only when not under torch.compile). A layer
keeps only the ValueError its contract names, and MultiHeadCrossAttention the mask check lesson 07 shows.
Constructors keep brief checks of their sizes, where a wrong value would otherwise fail later, far from its cause.

Messages write the argument in backticks (`x` must be ...), except the checks of plain Python values from
lesson 01 (`string`, `integer`, `items`, `int_list`), which keep that lesson's wording: "stride must be >= 1".

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from numbers import Integral

import numpy as np
import torch
from torch import Tensor

# ------------------------------------------------------------------------------------------------------------
# Numbers and choices
# ------------------------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(name: str, value: object) -> None:
    """An int >= 1 (a bool, float or str raises ValueError too)."""
    if not _is_int(value) or value < 1:
        raise ValueError(f"`{name}` must be a positive int, got {value!r}")


def positive_ints(**values: object) -> None:
    """`positive_int` for each keyword: positive_ints(d_in=d_in, d_out=d_out)."""
    for name, value in values.items():
        positive_int(name, value)


def int_between(name: str, value: object, low: int, high: int | None = None, note: str = "") -> None:
    """An int in low..high (both included; no upper end when `high` is None). `note` says why, in brackets."""
    if not _is_int(value) or value < low or (high is not None and value > high):
        expected = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"`{name}` must be an int {expected}{f' ({note})' if note else ''}, got {value!r}")


def positive_even(name: str, value: object, note: str) -> None:
    """A positive even int; `note` says why, e.g. "sin/cos pairs"."""
    if not _is_int(value) or value < 1 or value % 2:
        raise ValueError(f"`{name}` must be a positive even int ({note}), got {value!r}")


def divisible(name: str, value: object, by_name: str, by: object) -> None:
    """Two positive ints, the first a multiple of the second: divisible("d_model", 12, "n_heads", 4)."""
    positive_ints(**{name: value, by_name: by})
    if value % by:
        raise ValueError(f"`{name}`={value} must be divisible by `{by_name}`={by}")


def positive_number(name: str, value: object) -> None:
    """An int or float > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number, got {value!r}")


def probability(name: str, value: object) -> None:
    """A dropout probability: an int or float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be a probability in [0, 1), got {value!r}")


def number(name: str, value: object) -> float:
    """A single number (int, float, numpy scalar or one-element tensor) as a float."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(f"`{name}` must be a single number, got a tensor of shape {tuple(value.shape)}")
        return float(value.item())
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"`{name}` must be a number, got {type(value).__name__}: {value!r:.60}")
    return float(value)


def one_of(name: str, value: object, options: Sequence[object]) -> None:
    """One of a few allowed values, e.g. one_of("backend", backend, ("altair", "matplotlib"))."""
    if value not in options:
        raise ValueError(f"`{name}` must be one of {tuple(options)}, got {value!r}")


def instance(name: str, value: object, cls: type | tuple[type, ...], what: str) -> None:
    """An instance of `cls`; `what` describes it for the message, e.g. "a dict {token: id}"."""
    if not isinstance(value, cls):
        raise TypeError(f"`{name}` must be {what}, got {type(value).__name__}")


# ------------------------------------------------------------------------------------------------------------
# Tensors
# ------------------------------------------------------------------------------------------------------------


@functools.cache
def _parse(shape: str) -> tuple[bool, tuple[tuple[str, str, tuple[str, ...]], ...]]:
    """ "..., T<=max_len, n_heads*D" -> (True, (("T", "max_len", ("T",)), ("n_heads*D", "", ("n_heads", "D")))):
    whether leading dimensions are free, and each label with its bound (or "") and its factors."""
    labels = [label.strip() for label in shape.split(",")]
    free = labels[0] == "..."
    parsed = []
    for label in labels[1:] if free else labels:
        label, _, limit = label.partition("<=")
        parsed.append((label, limit, tuple(label.split("*"))))
    return free, tuple(parsed)


def _broadcast(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The shape that `shapes` broadcast to, or None: torch.broadcast_shapes without its cost on every call."""
    result = [1] * max((len(shape) for shape in shapes), default=0)
    for shape in shapes:
        for i, size in enumerate(shape, start=len(result) - len(shape)):
            if size != 1:
                if result[i] not in (1, size):
                    return None
                result[i] = size
    return tuple(result)


def _not_shaped(name: str, value: Tensor, shape: str, sizes: dict[str, int]) -> ValueError:
    """The error for a tensor that does not fit `shape`; built only when needed (most checks pass)."""
    free, labels = _parse(shape)
    used = set(shape.replace("<=", ",").replace("*", ",").replace(" ", "").split(","))
    where = ", ".join(f"{label}={size}" for label, size in sizes.items() if label in used)
    rank = f"at least {len(labels)}-D" if free else f"{len(labels)}-D"
    where = f" where {where}" if where else ""
    return ValueError(f"`{name}` must be {rank} with shape ({shape}){where}, got {tuple(value.shape)}")


def tensor(name: str, value: object, shape: str | None = None, *, integer: bool = False, **sizes: int) -> dict:
    """A torch.Tensor, with an integer dtype if `integer`, shaped like `shape` (see the module docstring).

    `sizes` give the labels a size: tensor("x", x, "B, T, d_in", d_in=8). Returns the size of each label of
    `shape` (a bounded one by its name, "T" for "T<=max_len"), e.g. {"B": 2, "T": 5, "d_in": 8}, and for a
    shape starting with "..." the leading dimensions under "...".
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(value).__name__}")
    if integer and (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool):
        raise TypeError(f"`{name}` must be an integer tensor (e.g. torch.long), got {value.dtype}")
    if shape is None:
        return {}
    positive_ints(**sizes)
    free, labels = _parse(shape)
    if value.dim() < len(labels) or (not free and value.dim() > len(labels)):
        raise _not_shaped(name, value, shape, sizes)
    found: dict[str, int | tuple[int, ...]] = {"...": tuple(value.shape[: value.dim() - len(labels)])} if free else {}
    for (label, limit, factors), size in zip(labels, value.shape[value.dim() - len(labels) :], strict=True):
        if limit and size > sizes[limit]:
            raise ValueError(f"`{name}` has {label}={size}, more than {limit}={sizes[limit]}")
        known = [sizes[factor] for factor in factors if factor in sizes] if sizes else ()
        if known and (size != math.prod(known) if len(known) == len(factors) else size % math.prod(known)):
            raise _not_shaped(name, value, shape, sizes)
        if found.setdefault(label, size) != size:
            raise _not_shaped(name, value, shape, sizes)
    return found


def tensors(**specs: tuple[object, str] | int) -> None:
    """Several tensors at once: each keyword is a (tensor, shape) pair, or an int size as in `tensor`.

    A label that appears in several shapes must have the same size in all of them, and the leading "..."
    dimensions must broadcast together: tensors(q=(q, "..., Tq, dk"), k=(k, "..., Tk, dk")).
    """
    sizes = {label: size for label, size in specs.items() if not isinstance(size, tuple)}
    shapes = {name: spec for name, spec in specs.items() if isinstance(spec, tuple)}
    first: dict[str, tuple[str, int]] = {}  # label -> (the first tensor that has it, its size there)
    leading: dict[str, tuple[int, ...]] = {}  # the "..." dimensions of each tensor that has them
    for name, (value, shape) in shapes.items():
        for label, size in tensor(name, value, shape, **sizes).items():
            if label == "...":
                leading[name] = size
                continue
            other, other_size = first.setdefault(label, (name, size))
            if size != other_size:
                what = "batch size B" if label == "B" else f"dimension {label}"
                raise ValueError(
                    f"`{other}` and `{name}` must have the same {what}, "
                    f"got {other} {tuple(shapes[other][0].shape)} and {name} {tuple(value.shape)}"
                )
    if len(set(leading.values())) > 1 and _broadcast(*leading.values()) is None:
        got = " and ".join(f"{name} {tuple(shapes[name][0].shape)}" for name in leading)
        names = " and ".join(f"`{name}`" for name in leading)
        raise ValueError(f"the leading dimensions (...) of {names} must broadcast together, got {got}")


def mask(name: str, value: object, target: tuple[int, ...]) -> None:
    """None, or a bool tensor (True = may attend) that broadcasts to `target`, the shape of the scores."""
    if value is None:
        return
    if not isinstance(value, Tensor):
        raise TypeError(f"`{name}` must be a bool torch.Tensor (True = may attend), got {type(value).__name__}")
    if value.dtype != torch.bool:
        raise TypeError(f"`{name}` must have dtype torch.bool (True = may attend), got {value.dtype}")
    if _broadcast(value.shape, target) != tuple(target):
        raise ValueError(
            f"`{name}` of shape {tuple(value.shape)} does not broadcast to the scores' shape {tuple(target)}"
        )


def indices(name: str, value: Tensor, n: int, what: str) -> None:
    """Every entry of an integer tensor is a valid index 0..n-1 of `what`, e.g. "the rows of `weight`"."""
    if value.numel() and (value.min() < 0 or value.max() >= n):
        low, high = value.min().item(), value.max().item()
        raise ValueError(f"`{name}` must lie in 0..{n - 1} ({what}), got values from {low} to {high}")


# ------------------------------------------------------------------------------------------------------------
# Plain Python values (lesson 01's wording: no backticks)
# ------------------------------------------------------------------------------------------------------------


def string(name: str, value: object) -> None:
    """A str."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}: {value!r:.60}")


def integer(name: str, value: object, minimum: int | None = None) -> None:
    """An int (TypeError otherwise; a bool is not one), at least `minimum` if given (ValueError)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r:.60}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def items(name: str, value: object, cls: type | tuple[type, ...], kind: str) -> list:
    """An iterable (not a str or bytes) of instances of `cls` (bools excluded), as a list; `kind` names them."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of {kind}, got {type(value).__name__}: {value!r:.60}")
    value = list(value)
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, cls):
            got = f"{type(item).__name__}: {item!r:.60}"
            raise TypeError(f"{name} must contain only {kind}, but item {position} is {got}")
    return value


def int_list(name: str, value: object, *, minimum: int | None = None, non_empty: bool = False) -> list[int]:
    """A list (or other iterable) of ints as a list of Python ints; optionally non-empty, each >= `minimum`."""
    ints = [int(item) for item in items(name, value, Integral, "ints")]
    if non_empty and not ints:
        raise ValueError(f"{name} must not be empty")
    if minimum is not None and ints and min(ints) < minimum:
        raise ValueError(f"{name} must hold ints >= {minimum}, got {min(ints)}")
    return ints


# ------------------------------------------------------------------------------------------------------------
# Arrays to plot
# ------------------------------------------------------------------------------------------------------------


def array(name: str, value: object) -> np.ndarray:
    """A torch.Tensor or numeric (or bool) numpy array, as a float64 numpy array."""
    if isinstance(value, Tensor):
        return value.detach().cpu().double().numpy()
    if isinstance(value, np.ndarray) and (np.issubdtype(value.dtype, np.number) or value.dtype == bool):
        return value.astype(np.float64)
    raise TypeError(f"`{name}` must be a torch.Tensor or a numeric numpy array, got {type(value).__name__}")


def labels(name: str, value: Sequence[object] | None, n: int) -> list[str]:
    """One label per position (n of them) as strs; None gives "0", "1", ..."""
    if value is None:
        return [str(i) for i in range(n)]
    if isinstance(value, str) or len(value) != n:
        got = repr(value) if isinstance(value, str) else f"{len(value)} labels"
        raise ValueError(f"`{name}` must have one label per position ({n}), got {got}")
    return [str(label) for label in value]


def finite_range(name: str, values: np.ndarray) -> tuple[float, float]:
    """(min, max) of the finite values; ValueError if there are none (nothing to draw)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        raise ValueError(f"`{name}` has no finite values to draw")
    return float(finite.min()), float(finite.max())


def max_cells(what: str, n_cells: int, limit: int) -> None:
    """An altair chart carries its data inline: refuse more than `limit` values instead of a huge notebook."""
    if n_cells > limit:
        raise ValueError(
            f"{what} has {n_cells} values, more than max_cells={limit} that an altair chart keeps inline "
            "in the notebook. Slice it, use backend='matplotlib', or pass a larger max_cells."
        )
