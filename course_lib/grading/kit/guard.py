"""The from-scratch guard (docs/ARCHITECTURE.md, The from-scratch guard), and what no graded answer may use.

An exercise that asks for X written from scratch earns no points when the answer *is*, *subclasses*, *wraps*
or *calls* the course's reference X, or one of the shortcuts listed for X. Two checks do this:

- `check_definition(answer, exercise)` looks at the answer object itself: identity, base classes, wrappers
  (`functools.partial`, `functools.wraps`, bound methods) and everything its code can reach by name (globals,
  closure cells, default values), recursively through nested functions and class methods.
- `watch_calls(exercise)` watches a call of the learner's code with `sys.setprofile` and records every Python
  function and C builtin it enters. The grader uses the reference *outside* this window to compute expected
  values, so only the learner's own call is judged.

Both are handed the exercise as a check names it, a `Graded`: the reference object itself, and its entry in
`course_lib.manifest`, whose `shortcuts` list the rest. When a notebook is graded, both run inside the sandbox that
runs the answer, alike for every answer.

The watcher runs in the same process as the answer's code, so an answer must not switch it off or get around it.
Two rules keep it so, and the visible checks in the notebook apply both exactly as the grader does:

- `refusals(source)` reads an answer cell's text for the few names no answer needs and which lead to the
  interpreter's frames, objects and hooks, to code the source check cannot read, or out of the watched process
  (`REFUSED_NAMES`, `REFUSED_ATTRIBUTES`, the course's grading machinery). Such an answer costs its exercise and
  nothing else. Everything else of Python (`getattr`, `setattr`, `vars`, `io`, `types`, ...) is graded like any
  other code.
- `watching(..., touched)` stops, while the answer runs, what those names would have reached by a way no source
  check can read (a name built from strings): switching the watcher off, reading frames, walking the
  interpreter's objects, running code written at run time, starting programs. An answer that does that has
  reached into the grading: it scores 0 and its submission is flagged.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import inspect
import linecache
import os
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from course_lib.grading.kit import remote
from course_lib.grading.kit.errors import GradingError
from course_lib.grading.kit.exercise import Graded, require_graded, resolve

__all__ = [
    "Forbidden",
    "Refusal",
    "RefusedAtRunTime",
    "answer_source",
    "check_definition",
    "forbidden",
    "refusal_message",
    "refusals",
    "remember_cell",
    "touched_message",
    "watch_calls",
    "watching",
]


@dataclass
class Forbidden:
    """Everything one exercise may not use, in the forms the two checks compare against."""

    objects: list[tuple[Any, str]] = field(default_factory=list)  # (object, how to name it in a message)
    # id() of the code of Python functions and methods. By identity: code objects compare equal by value, and
    # a learner's function that happens to compile to the same code is not a call of the reference.
    codes: dict[int, str] = field(default_factory=dict)
    builtins: dict[int, str] = field(default_factory=dict)  # id() of C functions
    packages: dict[str, str] = field(default_factory=dict)  # package name -> its folder

    def add(self, obj: Any, label: str) -> None:
        self.objects.append((obj, label))
        for code in _codes_of(obj):
            self.codes[id(code)] = label
        if isinstance(obj, types.BuiltinFunctionType | types.BuiltinMethodType):
            self.builtins[id(obj)] = label

    def package_of_code(self, code: types.CodeType) -> str | None:
        for name, folder in self.packages.items():
            if code.co_filename.startswith(folder):
                return name
        return None


def _codes_of(obj: Any) -> list[types.CodeType]:
    """Code objects that run when `obj` (a function, method or class) is used."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, staticmethod | classmethod):
        obj = obj.__func__
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        return [obj.__code__]
    if isinstance(obj, type):
        codes = []
        for value in vars(obj).values():
            if isinstance(value, property):
                value = value.fget
            if isinstance(value, types.FunctionType | staticmethod | classmethod):
                codes.extend(_codes_of(value))
        return codes
    return []


def reference_label(reference: Any) -> str:
    """How messages name a reference: `course_lib.attention.causal_mask`."""
    return f"{reference.__module__}.{reference.__qualname__}"


def forbidden(exercise: Graded) -> Forbidden:
    """The exercise's reference and the shortcuts its manifest entry lists."""
    exercise = require_graded(exercise, "forbidden")
    return _forbidden(exercise.reference, exercise.entry.shortcuts)


@functools.cache
def _forbidden(reference: Any, shortcuts: tuple[str, ...]) -> Forbidden:
    found = Forbidden()
    found.add(reference, f"the course's reference `{reference_label(reference)}`")
    for path in shortcuts:
        if path.startswith("module:"):
            package = path.removeprefix("module:")
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.origin:
                found.packages[package] = os.path.dirname(spec.origin)
            continue
        obj = resolve(path)
        if obj is not None:
            found.add(obj, f"`{path}`")
    return found


def fail_message(exercise: Graded | str, label: str, how: str) -> str:
    """What a learner is told when the answer is, wraps or calls something forbidden (`how`: "is", "calls", ...)."""
    return (
        f"your answer {how} {label}. This exercise asks you to write `{exercise}` yourself, so it earns no "
        "points this way; the lesson shows the reference right after the exercise."
    )


def _fail(exercise: Graded | str, label: str, how: str) -> GradingError:
    return GradingError(exercise, fail_message(exercise, label, how))


# What a graded answer may not name at all, whatever the exercise: each entry says why, and docs/GRADING.md and
# lesson 00 list the same names. Everything else of Python is graded like any other code (`getattr`, `setattr`,
# `vars`, `io`, `types`, `pathlib`, ...): the verdict is reached outside the answer's process, and a sandbox writes
# nowhere. What is left here would let the answer's code get past the from-scratch watcher that runs beside it
# (switch it off, run code where it does not look, reach the grader's objects in its process) or run code the
# source check cannot read first.
_FRAMES = "ways into the interpreter that runs your answer: its frames, its objects, the from-scratch watcher"
_HIDDEN_CODE = "ways to run code the grader cannot read before it runs"
_ELSEWHERE = "ways to run code outside the process the grader watches, or to talk to the grader's own process"
_MACHINERY = "the course's grading machinery"
REFUSED_NAMES: dict[str, str] = {
    "sys": _FRAMES, "inspect": _FRAMES, "gc": _FRAMES, "ctypes": _FRAMES, "builtins": _FRAMES,
    "__builtins__": _FRAMES,
    "exec": _HIDDEN_CODE, "eval": _HIDDEN_CODE, "compile": _HIDDEN_CODE, "__import__": _HIDDEN_CODE,
    "importlib": _HIDDEN_CODE, "pickle": _HIDDEN_CODE, "marshal": _HIDDEN_CODE,
    "os": _ELSEWHERE, "subprocess": _ELSEWHERE, "multiprocessing": _ELSEWHERE, "threading": _ELSEWHERE,
    "_thread": _ELSEWHERE, "concurrent": _ELSEWHERE, "signal": _ELSEWHERE, "socket": _ELSEWHERE,
}  # fmt: skip
# Attributes that lead to the same places (`f.__globals__`, `frame.f_back`, `sys.setprofile` by another way in).
REFUSED_ATTRIBUTES: dict[str, str] = {
    name: _FRAMES
    for name in (
        "__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "f_globals", "f_locals", "f_back",
        "f_code", "f_builtins", "tb_frame", "gi_frame", "gi_code", "cr_frame", "ag_frame", "setprofile", "settrace",
        "_getframe", "_current_frames",
    )
} | {"__import__": _HIDDEN_CODE}  # fmt: skip
# `course_lib` itself and these parts of it are the machinery; its teaching modules (what the lessons import, `ref`)
# are not, and the from-scratch guard decides which of their objects an exercise may use.
MACHINERY_MODULES = ("grading", "workflow", "lesson", "manifest", "__main__")
_NAMED_AS_WRITTEN = {"exec", "eval", "compile"}  # builtins: `re.compile`, `torch.compile` are other functions


@dataclass(frozen=True)
class Refusal:
    """One thing an answer's source names that no graded answer may use."""

    what: str  # as a message names it: "`sys`", "`.f_back`", "`import course_lib.grading`"
    why: str  # why it is refused


def _course_part(module: str) -> str | None:
    """The machinery a `course_lib...` import reaches, as a message names it; None for a teaching module."""
    parts = module.split(".")
    if parts[0] != "course_lib":
        return None
    if len(parts) == 1 or parts[1] in MACHINERY_MODULES:
        return ".".join(parts[:2])
    return None


def refusals(source: str) -> list[Refusal]:
    """Read an answer cell's source (never run it): the names in it that no graded answer may use
    (`REFUSED_NAMES`, `REFUSED_ATTRIBUTES`, the course's machinery). Empty when there is none; a source that does
    not parse is left to the code that runs it.

    The trusted grader does not run an answer cell this finds something in, and a visible check in the notebook
    refuses the same cell with the same message (`check_definition`), so a learner sees it first. What an
    exercise forbids (its reference, its shortcuts) is judged on the answer's objects and calls instead, by
    `check_definition` and `watch_calls`, alike in the notebook and in the grader's sandbox."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[Refusal] = []

    def note(what: str, why: str) -> None:
        if all(r.what != what for r in found):
            found.append(Refusal(what, why))

    def imported(module: str) -> None:
        machinery = _course_part(module)
        if machinery is not None:
            note(f"`import {machinery}`", _MACHINERY)
        elif module.split(".")[0] in REFUSED_NAMES:
            note(f"`{module.split('.')[0]}`", REFUSED_NAMES[module.split(".")[0]])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if module == "course_lib":  # `from course_lib import attention`: each name is a module of its own
                for alias in node.names:
                    imported(f"course_lib.{alias.name}")
                continue
            imported(module)
            for alias in node.names:
                why = REFUSED_NAMES.get(alias.name) or REFUSED_ATTRIBUTES.get(alias.name)
                if why is not None:
                    note(f"`{alias.name}`", why)
        elif isinstance(node, ast.Attribute):
            if node.attr in REFUSED_ATTRIBUTES:
                note(f"`.{node.attr}`", REFUSED_ATTRIBUTES[node.attr])
            elif node.attr in REFUSED_NAMES and node.attr not in _NAMED_AS_WRITTEN:  # `torch.os`: a module's `os`
                note(f"`.{node.attr}`", REFUSED_NAMES[node.attr])
            elif node.attr in MACHINERY_MODULES and _dotted(node.value) == "course_lib":
                note(f"`course_lib.{node.attr}`", _MACHINERY)
        elif isinstance(node, ast.Name) and node.id in REFUSED_NAMES:
            note(f"`{node.id}`", REFUSED_NAMES[node.id])
    return found


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def refusal_message(exercise: Graded | str, found: list[Refusal]) -> str:
    """What a learner is told about an answer cell `refusals` found something in: the same words in the notebook's
    visible check and in the grade."""
    reasons: dict[str, list[str]] = {}
    for refusal in found:
        reasons.setdefault(refusal.why, []).append(refusal.what)
    uses = " and ".join(f"{', '.join(names)} ({reason})" for reason, names in reasons.items())
    return (
        f"your answer uses {uses}. No graded answer may use these, so `{exercise}` earns no points this way; the "
        "rest of your notebook is graded as usual. Write the answer without them: plain Python, torch and the "
        "lesson's imports are enough (what answers may not use is listed in lesson 00 and in docs/GRADING.md)."
    )


def answer_source(answer: Any) -> str | None:
    """The text of the notebook cell that defined `answer` (a function or class), or None when it was not written
    in a cell: IPython keeps each cell's text under the cell's own name in `linecache`, and so do the course's tools
    that run a saved answer cell (`remember_cell`)."""
    for code in _codes_of(answer):
        if _written_in_a_cell(code):
            entry = linecache.cache.get(code.co_filename)
            if entry is not None and len(entry) == 4:
                return "".join(entry[2])
    return None


def remember_cell(source: str, name: str) -> str:
    """Keep `source` in `linecache` under `name`, as IPython keeps a cell it runs, so that `answer_source` finds
    it; returns `name` (compile the cell with it as the file name)."""
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    return name


def _names_in_code(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_in_code(const)


def check_definition(answer: Any, exercise: Graded) -> None:
    """Raise `GradingError` if `answer` is, subclasses or wraps the exercise's reference or one of its shortcuts, or
    if the cell it was written in uses what no answer may use (`refusals`), as the grader would refuse it."""
    exercise = require_graded(exercise, "check_definition")
    if remote.is_remote(answer):
        message = remote.check_definition(answer, exercise.path)
        if message is not None:
            raise GradingError(exercise, message)
        return
    source = answer_source(answer)  # the cell it was written in: refused here as the grader refuses it
    found = refusals(source) if source is not None else []
    if found:
        raise GradingError(exercise, refusal_message(exercise, found))
    banned = forbidden(exercise)
    seen: set[int] = set()

    def match(obj: Any) -> str | None:
        for bad, label in banned.objects:
            if obj is bad:
                return label
        if isinstance(obj, types.ModuleType):
            for package in banned.packages:
                if obj.__name__ == package or obj.__name__.startswith(package + "."):
                    return f"the `{package}` library"
        module = getattr(obj, "__module__", None) or ""
        for package in banned.packages:
            if module == package or module.startswith(package + "."):
                return f"the `{package}` library"
        return None

    def visit(obj: Any, how: str, depth: int) -> None:
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        label = match(obj)
        if label is not None:
            raise _fail(exercise, label, how)
        if isinstance(obj, type):
            for base in obj.__mro__[1:]:
                label = match(base)
                if label is not None:
                    raise _fail(exercise, label, "subclasses")
            if obj.__module__ in ("__main__", "builtins") or not obj.__module__.startswith(("torch", "course_lib")):
                for value in vars(obj).values():
                    if isinstance(value, property):
                        value = value.fget
                    if isinstance(value, staticmethod | classmethod):
                        value = value.__func__
                    if isinstance(value, types.FunctionType):
                        visit(value, "uses", depth + 1)
            return
        if isinstance(obj, functools.partial):
            visit(obj.func, "wraps", depth + 1)
            for arg in (*obj.args, *obj.keywords.values()):
                visit(arg, "wraps", depth + 1)
            return
        if isinstance(obj, types.MethodType):
            visit(obj.__func__, how, depth + 1)
            return
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None:
            visit(wrapped, "wraps", depth + 1)
        if isinstance(obj, types.FunctionType):
            # Only learner-side functions are opened up: library code is judged at call time instead.
            if obj.__module__ not in ("__main__", None) and not obj.__code__.co_filename.startswith("<"):
                return
            for cell in obj.__closure__ or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    visit(cell.cell_contents, "wraps", depth + 1)
            for default in (*(obj.__defaults__ or ()), *((obj.__kwdefaults__ or {}).values())):
                visit(default, "uses", depth + 1)
            for name in set(_names_in_code(obj.__code__)):
                if name in obj.__globals__:
                    visit(obj.__globals__[name], "uses", depth + 1)

    visit(answer, "is", 0)


@contextlib.contextmanager
def watch_calls(exercise: Graded) -> Iterator[None]:
    """Fail after the body if it entered the exercise's reference or one of its shortcuts, or reached into the
    grading at run time (`watching`)."""
    hits: list[str] = []
    touched: list[str] = []
    try:
        with watching(forbidden(exercise), hits, touched):
            yield
    except BaseException:
        if not touched:  # else the body stopped where it was refused (perhaps re-raised as another error)
            raise
    if touched:
        raise GradingError(exercise, touched_message(exercise, touched[0])) from None
    if hits:
        raise _fail(exercise, hits[0], "calls")


def _import_hook(frame: types.FrameType, banned: Forbidden) -> bool:
    """Code of a forbidden package that the import system called (directly, or through more of that package's
    code): a package such as transformers puts a finder on sys.meta_path, and then every new import in the
    learner's code passes through it. That is not a use of the package; a call from the learner's code is."""
    caller = frame.f_back
    while caller is not None and banned.package_of_code(caller.f_code) is not None:
        caller = caller.f_back
    return caller is not None and caller.f_code.co_filename.startswith("<frozen importlib")


@contextlib.contextmanager
def watching(banned: Forbidden, hits: list[str], touched: list[str] | None = None) -> Iterator[None]:
    """Append to `hits` the label of the first forbidden function the body enters (no error is raised here).

    With `touched`, also refuse what an answer's code does at run time to reach into the grading: the operation
    is stopped (it raises `RefusedAtRunTime`) and `touched` gets what it was (see `_RUN_TIME`)."""

    def profiler(frame, event, arg):
        if hits:
            return
        if event == "call":
            label = banned.codes.get(id(frame.f_code))
            if label is None:
                package = banned.package_of_code(frame.f_code)
                label = f"the `{package}` library" if package and not _import_hook(frame, banned) else None
            if label is not None:
                hits.append(label)
        elif event == "c_call":
            label = banned.builtins.get(id(arg))
            if label is None and banned.packages:
                owner = getattr(arg, "__self__", None)
                module = getattr(arg, "__module__", None) or type(owner).__module__ or ""
                for package in banned.packages:
                    if module == package or module.startswith(package + "."):
                        label = f"the `{package}` library"
            if label is not None:
                hits.append(label)

    previous = sys.getprofile()
    sys.setprofile(profiler)
    outer = _AUDIT.watch
    if touched is not None:
        _start_auditing()
        _AUDIT.watch = _Watch(touched, threading.get_ident())
    try:
        yield
    finally:
        _AUDIT.watch = None  # the watcher's own switch back is no answer's
        sys.setprofile(previous)
        _AUDIT.watch = outer


class RefusedAtRunTime(RuntimeError):
    """Raised in an answer's code where it reached into the grading at run time (`watching`)."""


def touched_message(exercise: Graded | str, what: str) -> str:
    """What a learner is told when their answer reached into the grading while it ran (`watching`)."""
    return (
        f"while it ran, your answer {what}. That reaches into the grading, which is refused: `{exercise}` earns no "
        "points, and when the notebook is graded the submission is flagged for your instructor to look at."
    )


@dataclass
class _Watch:
    touched: list[str]
    thread: int  # the thread that runs the answer
    busy: bool = False  # inside the audit hook already (it looks up a frame, which is an audited event itself)


class _Audit:
    watch: _Watch | None = None  # the one watch whose audit events are looked at now
    started = False


_AUDIT = _Audit()

# Audit events (PEP 578) that an answer's code raises when it reaches into the grading by a way the source check
# cannot read (`getattr(module, "set" + "profile")`): what it is, as the learner is told. Every event but the
# watcher's own counts only when the answer's own code (not a file on disk: a cell) raises it, since libraries do
# some of these for their own reasons (namedtuple reads its caller's frame, dataclasses compile code).
_RUN_TIME = {
    "sys.setprofile": "switched the from-scratch watcher off (`sys.setprofile`)",
    "sys.settrace": "set a trace function (`sys.settrace`), which sees the grader's frames",
    "sys._getframe": "read the interpreter's frames (`sys._getframe`)",
    "sys._current_frames": "read the interpreter's frames (`sys._current_frames`)",
    "object.__getattr__": "read {attribute}, which leads to the interpreter's frames or code",
    "gc.get_objects": "walked the interpreter's objects (`gc.get_objects`)",
    "gc.get_referrers": "walked the interpreter's objects (`gc.get_referrers`)",
    "gc.get_referents": "walked the interpreter's objects (`gc.get_referents`)",
    "code.__new__": "made a code object",
    "function.__new__": "made a function from a code object",
    "exec": "ran code it wrote while it ran (`exec`, `eval`, `compile`)",
    "compile": "ran code it wrote while it ran (`exec`, `eval`, `compile`)",
    "open": "opened a file descriptor by its number (the grader's connection is one)",
    "socket.__new__": "opened a socket",
    "os.system": "started a program (`os.system`)",
    "os.exec": "started a program (`os.exec*`)",
    "os.posix_spawn": "started a program (`os.posix_spawn`)",
    "os.spawn": "started a program (`os.spawn*`)",
    "os.fork": "started another process (`os.fork`)",
    "os.forkpty": "started another process (`os.forkpty`)",
    "subprocess.Popen": "started a program (`subprocess`)",
    "ctypes.dlopen": "loaded C code (`ctypes`)",
    "ctypes.dlsym": "loaded C code (`ctypes`)",
    "ctypes.cdata": "read raw memory (`ctypes`)",
}
_ANYWHERE = {"sys.setprofile", "sys.settrace"}  # the watcher's own: whoever switches it, in the answer's thread
_AUDITED_ATTRIBUTES = {"__code__", "tb_frame", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code"}
_IN_A_CELL: dict[str, bool] = {}


def _written_in_a_cell(code: types.CodeType) -> bool:
    """Code of a notebook cell or an answer cell, not of a module: its text was handed to `linecache` by whoever
    ran it (IPython does, and `remember_cell`: an entry without a modification time), or its file name is no file
    on disk (an answer cell in the grader's sandbox)."""
    name = code.co_filename
    known = _IN_A_CELL.get(name)
    if known is None:
        entry = linecache.cache.get(name)
        registered = entry is not None and len(entry) == 4 and entry[1] is None
        known = not name.startswith("<frozen") and (registered or not os.path.isfile(name))
        _IN_A_CELL[name] = known
    return known


def _audit(event: str, args: tuple) -> None:
    watch = _AUDIT.watch
    if watch is None or event not in _RUN_TIME or watch.busy or threading.get_ident() != watch.thread:
        return
    if event == "object.__getattr__" and args[1] not in _AUDITED_ATTRIBUTES:
        return
    if event == "open" and not isinstance(args[0], int):
        return  # reading or writing a file by its name is Landlock's to contain, not this
    if event not in _ANYWHERE:
        watch.busy = True
        try:
            caller = sys._getframe(1)  # the frame that raised the event (the hook is called from C)
            ours = _written_in_a_cell(caller.f_code)
        finally:
            watch.busy = False
        if not ours:
            return
    what = _RUN_TIME[event].format(attribute=f"`.{args[1]}`" if event == "object.__getattr__" else "")
    watch.touched.append(what)
    raise RefusedAtRunTime(f"refused while grading: your answer {what}")


def _start_auditing() -> None:
    """Add the audit hook, once per process (a hook cannot be removed; it does nothing outside a watch)."""
    if not _AUDIT.started:
        sys.addaudithook(_audit)
        _AUDIT.started = True
