"""The from-scratch guard (COURSE_SPEC §5 and §6 "Forbidden shortcuts").

An exercise that asks for X written from scratch earns no points when the answer *is*, *subclasses*, *wraps*
or *calls* the course's reference X, or one of the shortcuts listed for X. Two checks do this:

- `check_definition(exercise, answer)` looks at the answer object itself: identity, base classes, wrappers
  (`functools.partial`, `functools.wraps`, bound methods) and everything its code can reach by name (globals,
  closure cells, default values), recursively through nested functions and class methods.
- `watch_calls(exercise)` watches a call of the learner's code with `sys.setprofile` and records every Python
  function and C builtin it enters. The grader uses the reference *outside* this window to compute expected
  values, so only the learner's own call is judged.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from course_lib.grading.core import GradingError

__all__ = ["FORBIDDEN_SHORTCUTS", "REFERENCE_MODULES", "check_definition", "forbidden_for", "watch_calls"]

# Where the course's reference of each exercise lives (contract names of COURSE_SPEC §6).
REFERENCE_MODULES: dict[str, str] = {
    **dict.fromkeys(["count_characters", "next_token_pairs", "normalize_rows"], "course_lib.welcome"),
    **dict.fromkeys(
        [
            "SimpleTokenizer",
            "get_pair_counts",
            "merge_pair",
            "train_bpe",
            "bpe_encode",
            "bpe_decode",
            "sliding_window_pairs",
        ],
        "course_lib.tokenization",
    ),
    **dict.fromkeys(["one_hot_embed", "cosine_similarity", "most_similar"], "course_lib.embeddings"),
    **dict.fromkeys(["sinusoidal_position_encoding", "PositionEncoding", "apply_rope"], "course_lib.position"),
    **dict.fromkeys(
        [
            "simple_self_attention",
            "scaled_dot_product_attention",
            "causal_mask",
            "SelfAttention",
            "CausalSelfAttention",
            "CrossAttention",
        ],
        "course_lib.attention",
    ),
    **dict.fromkeys(
        ["split_heads", "merge_heads", "MultiHeadAttention", "multihead_parameter_count"], "course_lib.multihead"
    ),
}

_TOKENIZER_LIBRARIES = ["module:tiktoken", "module:tokenizers"]

# Shortcuts forbidden besides the reference (dotted paths; "module:x" forbids all of package x).
FORBIDDEN_SHORTCUTS: dict[str, list[str]] = {
    "scaled_dot_product_attention": [
        "torch.nn.functional.scaled_dot_product_attention",
        "torch.nn.MultiheadAttention",
    ],
    "layer_norm": ["torch.nn.functional.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm"],
    "MultiHeadAttention": ["torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward"],
    "causal_mask": ["torch.nn.Transformer.generate_square_subsequent_mask"],
    **dict.fromkeys(["SimpleTokenizer", "train_bpe", "bpe_encode", "bpe_decode"], _TOKENIZER_LIBRARIES),
}


def _resolve(dotted: str) -> Any:
    """Import `a.b.c` as far as the module goes, then walk attributes. None if it does not exist."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


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


@functools.cache
def forbidden_for(exercise: str) -> Forbidden:
    """The reference named `exercise` and the shortcuts listed for it."""
    forbidden = Forbidden()
    module = REFERENCE_MODULES.get(exercise)
    if module is not None:
        reference = _resolve(f"{module}.{exercise}")
        if reference is not None:
            forbidden.add(reference, f"the course's reference `{module}.{exercise}`")
    for path in FORBIDDEN_SHORTCUTS.get(exercise, []):
        if path.startswith("module:"):
            package = path.removeprefix("module:")
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.origin:
                forbidden.packages[package] = os.path.dirname(spec.origin)
            continue
        obj = _resolve(path)
        if obj is not None:
            forbidden.add(obj, f"`{path}`")
    return forbidden


def _fail(exercise: str, label: str, how: str) -> GradingError:
    return GradingError(
        exercise,
        f"your answer {how} {label}. This exercise asks you to write `{exercise}` yourself, so it earns no "
        "points this way; the lesson shows the reference right after the exercise.",
    )


def _names_in_code(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_in_code(const)


def check_definition(exercise: str, answer: Any) -> None:
    """Raise `GradingError` if `answer` is, subclasses or wraps a forbidden object (see module docstring)."""
    forbidden = forbidden_for(exercise)
    seen: set[int] = set()

    def match(obj: Any) -> str | None:
        for bad, label in forbidden.objects:
            if obj is bad:
                return label
        if isinstance(obj, types.ModuleType):
            for package in forbidden.packages:
                if obj.__name__ == package or obj.__name__.startswith(package + "."):
                    return f"the `{package}` library"
        module = getattr(obj, "__module__", None) or ""
        for package in forbidden.packages:
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
def watch_calls(exercise: str) -> Iterator[None]:
    """Fail after the body if it entered anything forbidden for `exercise` (reference or shortcut)."""
    forbidden = forbidden_for(exercise)
    if not (forbidden.codes or forbidden.builtins or forbidden.packages):
        yield
        return
    hits: list[str] = []

    def profiler(frame, event, arg):
        if hits:
            return
        if event == "call":
            label = forbidden.codes.get(id(frame.f_code))
            if label is None:
                package = forbidden.package_of_code(frame.f_code)
                label = f"the `{package}` library" if package else None
            if label is not None:
                hits.append(label)
        elif event == "c_call":
            label = forbidden.builtins.get(id(arg))
            if label is None and forbidden.packages:
                owner = getattr(arg, "__self__", None)
                module = getattr(arg, "__module__", None) or type(owner).__module__ or ""
                for package in forbidden.packages:
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
        if hits:
            raise _fail(exercise, hits[0], "calls")
