"""The from-scratch guard (docs/ARCHITECTURE.md, The from-scratch guard).

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
runs the answer, and `source_problems` also reads the answer's source on the grader's side, where the answer
cannot switch it off.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from course_lib import manifest
from course_lib.grading.kit import remote
from course_lib.grading.kit.errors import GradingError
from course_lib.grading.kit.exercise import Graded, require_graded, resolve

__all__ = ["Forbidden", "check_definition", "forbidden", "source_problems", "watch_calls"]


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


# Names an answer to these exercises never needs, and which reach into the machinery around it: the import system,
# the interpreter's hooks and frames, files and processes. The trusted grader reads each answer's source for them.
_ESCAPE_NAMES = {
    "__import__", "importlib", "sys", "builtins", "__builtins__", "exec", "eval", "compile", "globals", "locals",
    "vars", "ctypes", "gc", "inspect", "os", "subprocess", "shutil", "pathlib", "open", "io", "signal", "threading",
    "multiprocessing", "socket", "pickle", "marshal", "types", "breakpoint", "input", "course_lib", "setprofile",
    "settrace", "_getframe", "getattr", "setattr", "delattr",
}  # fmt: skip
_ESCAPE_ATTRIBUTES = {
    "__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__bases__", "__mro__", "__dict__",
    "__loader__", "__spec__", "__import__", "f_globals", "f_locals", "f_back", "f_code", "tb_frame", "gi_frame",
    "cr_frame", "setprofile", "settrace", "_getframe", "modules", "__setattr__", "__getattribute__",
}  # fmt: skip


def source_problems(source: str, exercise: Graded) -> list[str]:
    """Read an answer's source (never run it): what it uses that is forbidden for `exercise` or reaches into the
    grading machinery. Empty when nothing was found; a source that does not parse is left to the sandbox."""
    import ast

    shortcuts = require_graded(exercise, "source_problems").entry.shortcuts
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    shortcut_names = {path.removeprefix("module:").split(".")[-1] for path in shortcuts}
    modules = {path.removeprefix("module:") for path in shortcuts if path.startswith("module:")}
    found: list[str] = []

    def note(what: str) -> None:
        if what not in found:
            found.append(what)

    teaching = {lesson.references for lesson in manifest.LESSONS}  # what lessons bind as `ref`: allowed
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if isinstance(node, ast.ImportFrom) and node.module == "course_lib":
                roots = [f"course_lib.{n}" for n in names]
            else:
                roots = names if isinstance(node, ast.Import) else [node.module or ""]
            for root in roots:
                top = root.split(".")[0]
                if top in modules:
                    note(f"the `{top}` library")
                elif top in _ESCAPE_NAMES and root not in teaching:
                    note(f"`import {root}`")
            if isinstance(node, ast.ImportFrom) and node.module != "course_lib":
                for name in names:
                    if name in shortcut_names:
                        note(f"`{name}` (a shortcut this exercise forbids)")
                    elif name in _ESCAPE_NAMES or name in _ESCAPE_ATTRIBUTES:
                        note(f"`{name}`")
        elif isinstance(node, ast.Attribute):
            if node.attr in shortcut_names:
                note(f"`{node.attr}` (a shortcut this exercise forbids)")
            elif node.attr in _ESCAPE_ATTRIBUTES:
                note(f"`.{node.attr}`")
        elif isinstance(node, ast.Name) and node.id in _ESCAPE_NAMES and node.id not in ("input", "vars"):
            note(f"`{node.id}`")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("input", "vars"):
            note(f"`{node.func.id}()`")
    return found


def _names_in_code(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_in_code(const)


def check_definition(answer: Any, exercise: Graded) -> None:
    """Raise `GradingError` if `answer` is, subclasses or wraps the exercise's reference or one of its shortcuts."""
    exercise = require_graded(exercise, "check_definition")
    if remote.is_remote(answer):
        message = remote.check_definition(answer, exercise.path)
        if message is not None:
            raise GradingError(exercise, message)
        return
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
    """Fail after the body if it entered the exercise's reference or one of its shortcuts."""
    hits: list[str] = []
    with watching(forbidden(exercise), hits):
        yield
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
def watching(banned: Forbidden, hits: list[str]) -> Iterator[None]:
    """Append to `hits` the label of the first forbidden function the body enters (no error is raised here)."""

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
    try:
        yield
    finally:
        sys.setprofile(previous)
