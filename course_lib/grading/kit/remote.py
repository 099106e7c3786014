"""Answers that live in another process: the grader's side of trusted grading.

When a notebook is graded, each exercise's answer runs in a sandbox process of its own
(`course_lib.grading.kit.sandbox`). The checks run in the grader's process, unchanged, and reach the answer through a
`Remote`: a stand-in whose calls and attribute reads travel to the sandbox as requests, with only plain data
coming back (`course_lib.grading.kit.codec`). Objects the answer makes that are not plain data (a module it
built, a tokenizer instance) stay in the sandbox; the grader gets another `Remote` for them.

A check that must hand an answer something that is not plain data (a model and its optimizer, for a training
step) builds it where the answer lives with `make`, from a function of the course's graders. Checks never call
this module: `course_lib.grading.kit.core` has the functions they use (`call_answer`, `is_instance`,
`type_name`, `make`, ...), which come here for a Remote and act locally otherwise.

So that a check behaves exactly as it does in the notebook, a call also carries the grader's torch random state
and grad mode there and brings the random state back, and tensors, lists and dicts passed as arguments come back
as the answer left them (a check can see that an answer changed its input in place).
"""

from __future__ import annotations

import builtins
import contextlib
import signal
from collections.abc import Iterator
from typing import Any, Protocol

import torch

from course_lib.grading.kit.codec import Handle, RemoteFailure

__all__ = [
    "Channel",
    "ForbiddenCall",
    "Remote",
    "TimedOut",
    "Touched",
    "call",
    "catching",
    "check_definition",
    "is_instance",
    "is_remote",
    "make",
    "type_name",
]


class Channel(Protocol):
    """The connection to one sandbox (`course_lib.grading.kit.sandbox.Sandbox`)."""

    def request(self, message: dict[str, Any], timeout: float) -> Any: ...


class TimedOut(Exception):
    """The answer did not finish in time (the sandbox stopped it, or was stopped)."""


class ForbiddenCall(Exception):
    """The answer entered the course's reference or a forbidden shortcut; `label` names what."""

    def __init__(self, label: str):
        super().__init__(label)
        self.label = label


class Touched(Exception):
    """The answer reached into the grading while it ran (`guard.watching`); `what` says how."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class Remote:
    """A stand-in for an object that lives in a sandbox (see the module docstring)."""

    __slots__ = ("_channel", "_handle", "_timeout")

    def __init__(self, channel: Channel, handle: Handle, timeout: float = 20.0):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_timeout", timeout)  # seconds a direct call may take (checks pass their own)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in ("__name__", "__qualname__"):
            raise AttributeError(name)
        reply = self._channel.request({"op": "getattr", "target": self._handle.number, "name": name}, timeout=10)
        value = _value(self, reply["value"])
        if isinstance(value, _Raised):
            raise AttributeError(value.error) from None
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("a graded answer's objects cannot be changed from the grader's side")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call(self, args, kwargs, timeout=self._timeout)

    def __repr__(self) -> str:
        return f"<{self._handle.type_name} object>"


class _Catching:
    """`catching(remote)`: a call of it returns the exception the answer raised (None if none) as a value."""

    def __init__(self, target: Remote):
        self.target = target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call(self, args, kwargs, timeout=self.target._timeout)


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


def is_remote(value: Any) -> bool:
    return isinstance(value, Remote | _Catching)


def catching(target: Remote) -> _Catching:
    return _Catching(target)


def type_name(value: Remote) -> str:
    """The class name of the object a Remote stands for (for messages)."""
    return value._handle.type_name


def is_instance(value: Remote, cls: type) -> bool:
    """Whether the object a Remote stands for is a `cls`, by the qualified names of its classes."""
    return f"{cls.__module__}.{cls.__qualname__}" in value._handle.classes


def check_definition(answer: Remote, reference: str) -> str | None:
    """Run the guard's definition check where the answer lives; the message, or None when it passed."""
    reply = answer._channel.request(
        {"op": "check_definition", "target": answer._handle.number, "reference": reference}, timeout=30
    )
    return reply["value"]


_BUILTIN_ERRORS = {
    f"builtins.{name}": cls
    for name, cls in vars(builtins).items()
    if isinstance(cls, type) and issubclass(cls, Exception)
}


def rebuild(failure: RemoteFailure) -> Exception:
    """An exception like the one the answer raised: same class name, same message, the nearest built-in base."""
    base = next((_BUILTIN_ERRORS[n] for n in failure.classes if n in _BUILTIN_ERRORS), RuntimeError)
    message = failure.message
    cls = type(failure.type_name, (base,), {"__str__": lambda self: message, "__module__": "answer"})
    return cls(message)


def _value(origin: Remote, value: Any) -> Any:
    """Handles become Remotes (like `origin`), a failure becomes a `_Raised`; plain data passes, in containers too."""
    if isinstance(value, Handle):
        return Remote(origin._channel, value, origin._timeout)
    if isinstance(value, RemoteFailure):
        return _Raised(rebuild(value))
    if type(value) is list:
        return [_value(origin, v) for v in value]
    if type(value) is tuple:
        return tuple(_value(origin, v) for v in value)
    if type(value) is dict:
        return {k: _value(origin, v) for k, v in value.items()}
    return value


def _outgoing(value: Any) -> Any:
    """Arguments as they travel: Remotes as their handles, containers opened up, the rest as it is."""
    if isinstance(value, Remote):
        return value._handle
    if type(value) is list:
        return [_outgoing(v) for v in value]
    if type(value) is tuple:
        return tuple(_outgoing(v) for v in value)
    if type(value) is dict:
        return {k: _outgoing(v) for k, v in value.items()}
    if isinstance(value, torch.Generator):
        return {"__generator__": value.get_state()}
    return value


def _same(a: Any, b: Any) -> bool:
    """Equality of plain data that may hold tensors (`==` on two tensors gives a tensor, not a bool)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        both = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        return both and a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if type(a) in (list, tuple) and type(b) is type(a):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _write_back(original: Any, after: Any) -> None:
    """Make an argument look as the answer left it (in-place changes become visible to the check)."""
    if isinstance(original, torch.Generator) and isinstance(after, dict):
        original.set_state(after["__generator__"])
    elif isinstance(original, torch.Tensor) and isinstance(after, torch.Tensor):
        if original.shape == after.shape and original.dtype == after.dtype and not torch.equal(original, after):
            with torch.no_grad():
                original.copy_(after)
    elif type(original) is list and type(after) is list and not _same(original, after):
        original[:] = after
    elif type(original) is dict and type(after) is dict and not _same(original, after):
        original.clear()
        original.update(after)


@contextlib.contextmanager
def _alarm_deferred() -> Iterator[None]:
    """Hold back SIGALRM while a request is in flight, so a grader-side time limit cannot cut a message in two."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None or not hasattr(signal, "SIGALRM"):
        yield
        return
    previous = mask(signal.SIG_BLOCK, {signal.SIGALRM})
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, previous)


def make(beside: Remote, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """`factory(*args, **kwargs)`, run in the sandbox of the answer `beside` (the result comes back as a Remote).
    `factory` is a module-level function of `course_lib.grading` (the sandbox builds nothing else); it runs with
    the grader's random state."""
    message = {
        "op": "make",
        "target": beside._handle.number,
        "factory": f"{factory.__module__}.{factory.__qualname__}",
        "args": [_outgoing(a) for a in args],
        "kwargs": {k: _outgoing(v) for k, v in kwargs.items()},
        "rng": torch.get_rng_state(),
    }
    with _alarm_deferred():
        reply = beside._channel.request(message, timeout=beside._timeout + 10)
    if reply.get("touched"):
        raise Touched(reply["touched"])
    if reply.get("forbidden"):
        raise ForbiddenCall(reply["forbidden"])
    value = _value(beside, reply["value"])
    if isinstance(value, _Raised):
        raise value.error
    return value


def call(fn: Remote | _Catching, args: tuple, kwargs: dict, *, timeout: float) -> Any:
    """Call a remote answer with the grader's random state and grad mode; see the module docstring."""
    catch = isinstance(fn, _Catching)
    target = fn.target if catch else fn
    message = {
        "op": "call",
        "target": target._handle.number,
        "args": [_outgoing(a) for a in args],
        "kwargs": {k: _outgoing(v) for k, v in kwargs.items()},
        "timeout": float(timeout),
        "rng": torch.get_rng_state(),
        "grad": torch.is_grad_enabled(),
        "catch": catch,
    }
    with _alarm_deferred():
        reply = target._channel.request(message, timeout=timeout + 10)
    if "rng" in reply:
        torch.set_rng_state(reply["rng"])
    for original, after in zip(args, reply.get("args", ()), strict=False):
        _write_back(original, after)
    for key, after in reply.get("kwargs", {}).items():
        if key in kwargs:
            _write_back(kwargs[key], after)
    if reply.get("timeout"):
        raise TimedOut
    if reply.get("touched"):
        raise Touched(reply["touched"])
    if reply.get("forbidden"):
        raise ForbiddenCall(reply["forbidden"])
    value = _value(target, reply["value"])
    if isinstance(value, _Raised):
        if catch and not isinstance(value.error, NotImplementedError):  # "not written yet" still goes through
            return value.error
        raise value.error
    return value
