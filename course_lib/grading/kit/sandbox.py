"""A short-lived process that runs one graded answer, for trusted grading (docs/ARCHITECTURE.md,
Trusted grading).

`Sandbox.start` forks the grader's process: the child has the course's code exactly as the grader loaded it
(nothing is read from disk again), runs the lesson's preamble and the answer cell's source under the from-scratch
watcher, and then serves requests — call this, read that attribute — until the grader closes the connection.
Every message is plain data (`course_lib.grading.kit.codec`); objects the answer makes stay here, named by
handles. The watcher stays on for the child's whole life, so everything the answer's code does is watched. A
request that runs too long is stopped here (SIGALRM); one that does not answer at all gets the child killed.
The child is confined (`confine.py`, within its `Limits`): a memory limit on what it allocates on top of the
grader's memory, so an answer that allocates without bound fails with MemoryError instead of taking the grader
down, and where Landlock is available it can write nowhere, connect nowhere and signal no process outside itself.

Fork is POSIX-only; on Windows the grader falls back to the notebook's own verdicts
(`course_lib.workflow.trusted.available`). This module is the server of the protocol whose client is `remote.py`;
both speak `codec.py`.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import select
import signal
import socket
import struct
import types
from dataclasses import dataclass
from typing import Any

import torch

from course_lib.grading.kit import codec, confine, guard
from course_lib.grading.kit.codec import Handle, RemoteFailure
from course_lib.grading.kit.core import DEFAULT_CALL_TIMEOUT
from course_lib.grading.kit.errors import GradingError
from course_lib.grading.kit.exercise import Graded
from course_lib.grading.kit.remote import TimedOut

__all__ = ["Limits", "Ready", "Sandbox", "SandboxDied"]

_HEADER = struct.Struct("!I")


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use. A limit a check means to reach is reached by the resource, not by the clock: a
    memory test sets a small `memory` and leaves `time` generous, so a slow machine cannot turn it into a time-out."""

    time: float = DEFAULT_CALL_TIMEOUT  # seconds for the answer cell, and for a direct call of what it defines
    memory: int | None = confine.parse_size(confine.DEFAULT_MEMORY)  # bytes on top of the grader's; None: no limit
    # How long past `time` the answer cell may take to report back before its process is killed: the alarm cannot
    # stop a long call into C (`sum(range(10**12))`), and a loaded machine can be slow to fork.
    grace: float = 15.0


class SandboxDied(RuntimeError):
    """The process running the answer ended (a crash, `os._exit`, a kill after a time-out)."""


def _send(sock: socket.socket, value: Any) -> None:
    data = codec.encode(value)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if size > codec.MAX_BYTES:
        raise codec.CodecError(f"message of {size} bytes is too large")
    return codec.decode(_recv_exact(sock, size))


@dataclass
class Ready:
    """What the sandbox reports once the answer cell has run: its names, or why it could not run."""

    names: dict[str, Handle | None]  # each name the exercise defines -> its handle, None if the cell did not define it
    failure: RemoteFailure | None  # the exception the cell raised, if any
    timed_out: bool
    forbidden: str | None  # what forbidden thing the cell entered while it ran, if any
    touched: str | None = None  # how the cell reached into the grading while it ran (`guard.watching`), if it did


class Sandbox:
    """The grader's end of one sandbox: `request` sends a message and waits for the reply."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid, self.sock, self.dead = pid, sock, None
        self.touched: str | None = None  # the first reply that said the answer reached into the grading: what it did

    @classmethod
    def start(
        cls,
        *,
        preamble: str,
        bindings: dict[str, Any],
        source: str,
        names: tuple[str, ...],
        exercises: tuple[Graded, ...],
        limits: Limits | None = None,
    ) -> tuple[Sandbox, Ready]:
        """Fork a sandbox that runs `preamble`, binds `bindings`, runs the answer `source` under the guard of
        `exercises` and exports `names`, within `limits` (`Limits()` when None)."""
        limits = limits or Limits()
        parent, child = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the child never returns
            parent.close()
            _child(child, preamble, bindings, source, names, exercises, limits.time, limits.memory)
        child.close()
        sandbox = cls(pid, parent)
        reply = sandbox._receive(limits.time + limits.grace)
        ready = Ready(reply["names"], reply["failure"], reply["timed_out"], reply["forbidden"], reply.get("touched"))
        return sandbox, ready

    def _receive(self, timeout: float) -> Any:
        if self.dead:
            raise SandboxDied(self.dead)
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            self.close("it was stopped after it did not answer in time")
            raise TimedOut
        try:
            reply = _recv(self.sock)
        except (EOFError, OSError, codec.CodecError) as exc:
            status = self._reap()
            self.close(f"the process running your answer ended unexpectedly ({status or exc})")
            raise SandboxDied(self.dead) from None
        if isinstance(reply, dict) and reply.get("touched") and self.touched is None:
            self.touched = str(reply["touched"])
        return reply

    def request(self, message: dict[str, Any], timeout: float) -> Any:
        if self.dead:
            raise SandboxDied(self.dead)
        try:
            _send(self.sock, message)
        except OSError:
            self.close(f"the process running your answer ended unexpectedly ({self._reap() or 'no reply'})")
            raise SandboxDied(self.dead) from None
        return self._receive(timeout)

    def _reap(self) -> str:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return ""
        if pid == 0:
            return ""
        if os.WIFSIGNALED(status):
            return f"signal {os.WTERMSIG(status)}"
        return f"exit code {os.WEXITSTATUS(status)}"

    def close(self, why: str = "closed") -> None:
        """Stop the child (it is never left running) and remember why."""
        self.dead = self.dead or why
        try:
            self.sock.close()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


# ------------------------------------------------------------------------------------------------------------
# The child


class _Timeout(BaseException):
    """Raised in the answer's code by the alarm (a BaseException, so `except Exception` cannot swallow it)."""


def _alarm(signum, frame):
    raise _Timeout


class _Objects:
    """The answer's objects that stay here, numbered by identity (the same object keeps its handle)."""

    def __init__(self) -> None:
        self.by_number: dict[int, Any] = {}
        self.numbers: dict[int, int] = {}

    def handle(self, obj: Any) -> Handle:
        number = self.numbers.get(id(obj))
        if number is None:
            number = len(self.by_number) + 1
            self.by_number[number] = obj
            self.numbers[id(obj)] = number
        mro = tuple(f"{c.__module__}.{c.__qualname__}" for c in type(obj).__mro__)
        return Handle(number, type(obj).__name__, mro, callable(obj))

    def export(self, value: Any) -> Any:
        """Plain data as it is; containers opened up; anything else as a handle."""
        if isinstance(value, types.GeneratorType):
            value = list(value)
        if isinstance(value, torch.nn.Parameter):
            value = value.detach()
        if codec.is_plain(value):
            return value.detach().clone() if isinstance(value, torch.Tensor) else value
        if type(value) in (list, tuple):
            return type(value)(self.export(v) for v in value)
        if isinstance(value, dict) and type(value).__module__ in ("builtins", "collections"):
            return {k: self.export(v) for k, v in value.items() if codec.is_plain(k)}
        return self.handle(value)

    def resolve(self, value: Any) -> Any:
        """Incoming arguments: handles back to objects, generator states to generators."""
        if isinstance(value, Handle):
            return self.by_number[value.number]
        if type(value) is list:
            return [self.resolve(v) for v in value]
        if type(value) is tuple:
            return tuple(self.resolve(v) for v in value)
        if type(value) is dict:
            if set(value) == {"__generator__"}:
                return torch.Generator().set_state(value["__generator__"])
            return {k: self.resolve(v) for k, v in value.items()}
        return value


def _failure(exc: BaseException) -> RemoteFailure:
    mro = tuple(f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__)
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ fails still fails the call
        message = "(its message could not be read)"
    return RemoteFailure(type(exc).__name__, mro, message[:2000])


def _after(value: Any) -> Any:
    """How an argument looks after the call, for the grader to mirror (others: None)."""
    if isinstance(value, torch.Generator):
        return {"__generator__": value.get_state()}
    if isinstance(value, torch.Tensor) or type(value) in (list, dict):
        return value if codec.is_plain(value) else None
    return None


def _serve(sock, objects: _Objects, hits: list[str], touched: list[str], known: dict[str, Graded]) -> None:
    while True:
        try:
            message = _recv(sock)
        except EOFError:
            return
        op = message["op"]
        target = objects.by_number[message["target"]]
        reply: dict[str, Any] = {}
        if op == "getattr":
            try:
                reply["value"] = objects.export(getattr(target, message["name"]))
            except Exception as exc:
                reply["value"] = _failure(exc)
        elif op == "check_definition":
            try:
                exercise = known.get(message["reference"]) or Graded(_lookup(message["reference"]))
                guard.check_definition(target, exercise)
                reply["value"] = None
            except GradingError as exc:
                reply["value"] = exc.message
        elif op == "make":  # something a check hands the answer (a model and its optimizer), built here
            try:
                factory = _factory(message["factory"])
                args, kwargs = objects.resolve(message["args"]), objects.resolve(message["kwargs"])
                torch.set_rng_state(message["rng"])
                reply["value"] = objects.export(factory(*args, **kwargs))
            except Exception as exc:
                reply["value"] = _failure(exc)
        elif op == "call":
            args = objects.resolve(message["args"])
            kwargs = objects.resolve(message["kwargs"])
            torch.set_rng_state(message["rng"])
            try:
                with torch.set_grad_enabled(message["grad"]):
                    signal.setitimer(signal.ITIMER_REAL, message["timeout"])
                    try:
                        result = target(*args, **kwargs)
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                reply["value"] = objects.export(result)
            except _Timeout:
                reply["timeout"] = True
            except Exception as exc:
                reply["value"] = _failure(exc)
            reply["rng"] = torch.get_rng_state()
            reply["args"] = [_after(a) for a in args]
            reply["kwargs"] = {k: _after(v) for k, v in kwargs.items()}
        if hits:
            reply["forbidden"] = hits[0]
        if touched:
            reply["touched"] = touched[0]
        reply.setdefault("value", None)
        try:
            _send(sock, reply)
        except (codec.CodecError, ValueError, TypeError, RuntimeError) as exc:  # e.g. a value JSON cannot hold
            reply["value"] = _failure(exc)
            reply.pop("args", None), reply.pop("kwargs", None)
            _send(sock, reply)


def _factory(path: str) -> Any:
    """A function of the course's graders that builds what a check hands an answer; nothing else can be made."""
    if not path.startswith("course_lib.grading."):
        raise LookupError(f"{path} is not a function of the course's graders")
    return _lookup(path)


def _lookup(path: str) -> Any:
    """`course_lib.attention.causal_mask` from the modules this process already has (never from disk)."""
    import sys

    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            obj = module
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
    raise LookupError(path)


def _child(sock, preamble, bindings, source, names, exercises, timeout, memory) -> None:
    """Runs in the forked child and never returns."""
    code, log = 0, None
    try:
        debug = os.environ.get("COURSE_SANDBOX_DEBUG")  # where a grader developer can read why a sandbox stopped
        log = open(debug, "a") if debug else None  # noqa: SIM115 (opened before writes are shut off)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        if memory:
            confine.limit_memory(memory, on_top=True)
        if confine.landlock_abi():
            confine.restrict_writes(())  # nothing is written by an honest answer here
        torch.set_num_threads(1)  # the grader's thread pool does not survive a fork; tiny inputs need none
        signal.signal(signal.SIGALRM, _alarm)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        exec(compile(preamble, "<lesson preamble>", "exec"), namespace)
        namespace.update(bindings)
        banned = guard.Forbidden()
        for exercise in exercises:
            found = guard.forbidden(exercise)
            banned.objects += found.objects
            banned.codes |= found.codes
            banned.builtins |= found.builtins
            banned.packages |= found.packages
        hits: list[str] = []
        touched: list[str] = []
        objects = _Objects()
        known = {e.path: e for e in exercises}  # taken before the answer can rebind anything
        failure, timed_out = None, False
        with guard.watching(banned, hits, touched):
            try:
                signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    exec(compile(source, "<answer cell>", "exec"), namespace)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _Timeout:
                timed_out = True
            except BaseException as exc:  # SystemExit included: it is reported, the sandbox carries on
                failure = _failure(exc)
            exported = {n: objects.handle(namespace[n]) if n in namespace else None for n in names}
            first = {"forbidden": hits[0] if hits else None, "touched": touched[0] if touched else None}
            _send(sock, {"names": exported, "failure": failure, "timed_out": timed_out} | first)
            _serve(sock, objects, hits, touched, known)
    except BaseException:
        code = 1
        if log is not None:
            import traceback

            traceback.print_exc(file=log)
            log.flush()
    finally:
        os._exit(code)
