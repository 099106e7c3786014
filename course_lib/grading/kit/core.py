"""The grading toolkit every lesson's test cells use.

A test cell calls a `check_<exercise>` function (one module per lesson in this package). Those functions are
built from the pieces here:

- `GradingError`: the one exception a failed check raises. In Jupyter it renders as a single readable message,
  without a traceback: the message is the feedback, and a traceback would only show grader internals (and, in
  a hidden test cell, the hidden test's own text).
- `call_answer`: calls the learner's code with a time limit and the from-scratch guard, and turns any exception
  it raises into a `GradingError` that says which input made it fail (with a hint, where one fits).
  `catching` wraps code that should raise, so that a check can look at what it raised.
- `expect`, `expect_close`, `expect_equal`, `expect_type`, `expect_int_list`, `expect_unchanged`: comparisons
  whose failure message is the hint a learner can act on.
- `tagged_cases`, `call_label`: visible or hidden cases, and how a call is named in messages.
- `is_instance`, `type_name`, `make`: what a check asks of an answer that may live in a sandbox (`remote.py`);
  graders use these and never `remote` itself.
- `generator`, `random_tensor`: deterministic random inputs, so a failure can be reproduced.

`course_lib.grading.kit.diagnose` builds on these to name the likely mistake behind a wrong answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from numbers import Integral
from typing import Any

import torch

from course_lib.grading.kit import remote
from course_lib.grading.kit.errors import GradingError, Passed
from course_lib.grading.kit.exercise import Graded, require_graded
from course_lib.grading.kit.guard import fail_message, touched_message, watch_calls

__all__ = [
    "Graded",
    "GradingError",
    "Hint",
    "Passed",
    "call_answer",
    "call_label",
    "catching",
    "describe",
    "expect",
    "expect_close",
    "expect_equal",
    "expect_int_list",
    "expect_type",
    "expect_unchanged",
    "generator",
    "is_instance",
    "is_int",
    "make",
    "random_tensor",
    "tagged_cases",
    "time_limit",
    "type_name",
]

# Seconds one call of learner code may take before we call it an infinite loop. nbgrader's per-cell timeout
# (notebooks/nbgrader_config.py) is the backstop for code that cannot be interrupted from Python.
DEFAULT_CALL_TIMEOUT = float(os.environ.get("COURSE_CALL_TIMEOUT", "20"))

Hint = tuple[Callable[[str], bool], str]  # (does this error message fit?, what to add to it)


class _CallTimedOut(BaseException):
    """Raised inside learner code by the alarm; a BaseException so a bare `except Exception` cannot eat it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the body after `seconds` (main thread on Unix only; elsewhere no limit is applied)."""
    usable = (
        seconds is not None
        and seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def _alarm(signum, frame):
        raise _CallTimedOut

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def describe(value: Any, limit: int = 120) -> str:
    """A short, readable rendering of a value for messages (tensors show shape and dtype)."""
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)}, dtype {value.dtype}"
        if value.numel() <= 12:
            text += f": {value.tolist()}"
        return text
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_answer(
    exercise: Graded,
    fn: Callable[..., Any],
    *args: Any,
    what: str | None = None,
    timeout: float | None = None,
    guard: bool = True,
    hints: Sequence[Hint] = (),
    **kwargs: Any,
) -> Any:
    """Call learner code `fn(*args, **kwargs)` and return its result; `exercise` is the `Graded` the check names
    its exercise by (a bare name is refused with TypeError: it carries no reference to guard with).

    `what` describes the call for messages, e.g. "encode('Hello, world')". With `guard`, the call is watched by the
    from-scratch guard (docs/ARCHITECTURE.md, The from-scratch guard): calling the course's reference or a
    forbidden shortcut fails. The time limit is `DEFAULT_CALL_TIMEOUT` as it is at call time, unless `timeout` is
    given. When the learner's code raises, the first of `hints` whose test fits the message is added to it.
    """
    exercise = require_graded(exercise, "call_answer")
    label = what or f"{getattr(fn, '__name__', exercise)}(...)"
    timeout = DEFAULT_CALL_TIMEOUT if timeout is None else timeout
    try:
        if remote.is_remote(fn):  # graded in a sandbox, which watches and times every call itself
            return remote.call(fn, args, kwargs, timeout=timeout)
        watcher = watch_calls(exercise) if guard else contextlib.nullcontext()
        with watcher, time_limit(timeout):
            return fn(*args, **kwargs)
    except GradingError:
        raise
    except remote.ForbiddenCall as exc:
        raise GradingError(exercise, fail_message(exercise, exc.label, "calls")) from None
    except remote.Touched as exc:
        raise GradingError(exercise, touched_message(exercise, exc.what)) from None
    except (_CallTimedOut, remote.TimedOut):
        raise GradingError(
            exercise,
            f"{label} did not finish within {timeout:g} s. Is there a loop that never ends "
            "(an index that never advances, a `while` condition that stays true)?",
        ) from None
    except NotImplementedError:
        raise GradingError(
            exercise, f"{label}: not written yet (the answer cell still raises NotImplementedError)."
        ) from None
    except RecursionError:
        raise GradingError(
            exercise, f"{label} recursed too deeply (RecursionError). Does a function call itself by mistake?"
        ) from None
    except MemoryError:  # past the memory limit of the process grading it (course_lib/grading/kit/confine.py)
        raise GradingError(
            exercise,
            f"{label} ran out of memory (MemoryError): it allocated more than a graded answer may. Does a loop "
            "keep adding to a list or a tensor?",
        ) from None
    except Exception as exc:  # the learner's own exception becomes feedback
        message = f"{label} raised {type(exc).__name__}: {exc}"
        hint = next((hint for fits, hint in hints if fits(message)), None)
        raise GradingError(exercise, message if hint is None else f"{message} — {hint}") from None


def catching(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap `fn` so that it returns the exception it raises (None if it raises none), for code that should raise.

    Call the wrapper through `call_answer`: NotImplementedError still goes through, as "not written yet".
    """

    if remote.is_remote(fn):
        return remote.catching(fn)

    def captured(*args: Any, **kwargs: Any) -> Exception | None:
        try:
            fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:
            return exc
        return None

    return captured


def is_instance(value: Any, cls: type) -> bool:
    """`isinstance(value, cls)`, also for an answer that lives in a sandbox (by the qualified names of its classes):
    `isinstance` itself cannot see through the stand-in a graded answer is reached by."""
    return remote.is_instance(value, cls) if isinstance(value, remote.Remote) else isinstance(value, cls)


def type_name(value: Any) -> str:
    """The class name of a value, also of an answer that lives in a sandbox (for messages)."""
    return remote.type_name(value) if isinstance(value, remote.Remote) else type(value).__name__


def make(beside: Any, factory: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`factory(*args, **kwargs)`, built where the answer `beside` lives: in its sandbox when it is graded there (the
    result is then reached like the answer), here otherwise. `factory` is a module-level function of
    `course_lib.grading` (a sandbox builds nothing else); it runs with the grader's random state and leaves the
    grader's as it was."""
    if isinstance(beside, remote.Remote):
        return remote.make(beside, factory, *args, **kwargs)
    with torch.random.fork_rng(devices=[]):
        return factory(*args, **kwargs)


def expect(exercise: Graded | str, condition: bool, message: str) -> None:
    """Fail with `message` unless `condition` holds."""
    if not condition:
        raise GradingError(exercise, message)


def expect_equal(exercise: Graded | str, got: Any, expected: Any, what: str, hint: str = "") -> None:
    """Exact equality (lists, dicts, strings, ints)."""
    if got != expected:
        message = f"{what}: expected {describe(expected)}, got {describe(got)}."
        raise GradingError(exercise, f"{message} {hint}".strip())


def expect_type(exercise: Graded | str, got: Any, kind: type | tuple[type, ...], what: str, description: str) -> Any:
    """Return `got` if it is a `kind`; else fail, saying what came back. `description`: e.g. "a dict {(a, b): n}"."""
    if got is None:
        raise GradingError(exercise, f"{what} returned None. Did you forget the `return`?")
    if not isinstance(got, kind):
        raise GradingError(exercise, f"{what} should return {description}, got {type(got).__name__}: {describe(got)}")
    return got


def is_int(value: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def expect_int_list(exercise: Graded | str, got: Any, what: str) -> None:
    """`got` must be a plain Python list of ints (token ids), not a tensor."""
    if isinstance(got, torch.Tensor):
        raise GradingError(exercise, f"{what} returned a tensor; return a plain Python list of ints.")
    expect_type(exercise, got, list, what, "a list of ints")
    for position, item in enumerate(got):
        if not is_int(item):
            kind = type(item).__name__
            raise GradingError(
                exercise, f"{what} should return a list of ints, but item {position} is {kind}: {item!r}"
            )


def expect_id_batch_pair(exercise: Graded | str, got: Any, shape: tuple[int, int], what: str) -> tuple[Any, Any]:
    """`got` must be a pair (x, y) of integer tensors (batches of token ids of `shape`); returns it as a tuple."""
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise GradingError(exercise, f"{what} should return a pair (x, y), got {describe(got)}.")
    for label, value in zip("xy", got, strict=True):
        if not isinstance(value, torch.Tensor):
            raise GradingError(exercise, f"{what}: {label} should be a tensor of shape {shape}, got {describe(value)}.")
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            raise GradingError(
                exercise, f"{what}: {label} has dtype {value.dtype}; token ids stay integers (torch.long)."
            )
    return got[0], got[1]


def expect_unchanged(exercise: Graded | str, inputs: dict[str, tuple[torch.Tensor, torch.Tensor]], what: str) -> None:
    """Fail if the learner's call changed one of its input tensors: {argument: (after the call, copy before)}."""
    for argument, (after, before) in inputs.items():
        if not torch.equal(after, before):
            raise GradingError(
                exercise, f"{what} changed its argument `{argument}` in place; compute a new tensor and return it."
            )


def expect_close(
    exercise: Graded | str,
    got: Any,
    expected: torch.Tensor,
    what: str,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    hint: str = "",
) -> None:
    """Tensor comparison: type, shape, dtype class, then values (reporting the largest difference)."""
    if not isinstance(got, torch.Tensor):
        raise GradingError(exercise, f"{what}: expected a torch.Tensor, got {type(got).__name__}. {hint}".strip())
    if tuple(got.shape) != tuple(expected.shape):
        raise GradingError(
            exercise,
            f"{what}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}. {hint}".strip(),
        )
    if got.dtype.is_floating_point != expected.dtype.is_floating_point:
        raise GradingError(exercise, f"{what}: expected dtype like {expected.dtype}, got {got.dtype}.")
    got_c = got.detach().to(expected.dtype)
    if not torch.allclose(got_c, expected, atol=atol, rtol=rtol, equal_nan=True):
        diff = (got_c - expected).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        worst = int(diff.flatten().argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), expected.shape))
        message = (
            f"{what}: values differ from the reference (largest difference {float(diff.max()):.3g} "
            f"at index {index}: got {float(got_c[index]):.5g}, expected {float(expected[index]):.5g})."
        )
        raise GradingError(exercise, f"{message} {hint}".strip())


def tagged_cases(cases: list | None, visible: list) -> list[tuple[str | None, Any]]:
    """(tag, case) pairs: the visible cases untagged, or the hidden `cases` tagged "hidden case k".

    Messages about a hidden case name it by its tag, never by its input, so hidden test text stays hidden.
    """
    if cases is None:
        return [(None, case) for case in visible]
    return [(f"hidden case {number}", case) for number, case in enumerate(cases, 1)]


def call_label(call: str, shown: str, tag: str | None) -> str:
    """How a call is named in messages: `f(1, 2)` for a visible case, `f(<hidden case 2>)` for a hidden one."""
    return f"{call}({shown})" if tag is None else f"{call}(<{tag}>)"


def generator(seed: int) -> torch.Generator:
    """A CPU generator with a fixed seed: every grading input is reproducible."""
    return torch.Generator().manual_seed(seed)


def random_tensor(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Standard normal float32 tensor from a fixed seed."""
    return torch.randn(*shape, generator=generator(seed)) * scale
