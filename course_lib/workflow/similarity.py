"""Answers that look copied from the course's own code, renamed: a flag for a person to look at, never a score.

The lessons import the course's reference implementations (`course_lib/<unit>.py`), so every learner can read
them; the from-scratch guard stops an answer that *calls* a reference, but not one that retypes it with other
names. `similarity(answer, reference)` compares the two as code, not as text:

1. each is parsed; docstrings, comments, type annotations and formatting are gone with the syntax tree, and so are
   the statements that call the course's argument checks (`course_lib._checks`), which a reference has for a
   learner calling it and a copy drops first;
2. every name the code binds (arguments, variables, loop targets, helper functions, import aliases) becomes one
   placeholder, and so does every attribute it assigns on an object (`self.proj = ...`); names it only uses
   (`torch`, `range`, `softmax`) stay, since they say what the code does; strings become one placeholder;
3. each statement is read on its own (a loop or an `if` by its header; its body's statements are read apart) as a
   sequence of tokens (node kinds, the names and constants kept), and cut into overlapping runs of `K` tokens.
   Runs never cross from one statement into the next, so statements moved around keep all of theirs;
4. the score is the Jaccard index of the two sets of runs: the runs both have, over the runs either has.

An exercise is compared with every reference the manifest names for it (with the functions of its own module it
calls, which a copy would bring along) and with the instructor's solution when the instructor source is at hand,
each as written and with its helpers written out inline (`inline_helpers`: a copy may keep a helper or paste its
body where it was called); the highest score counts (`candidates`). Answers too short to tell (`MIN_RUNS`) are not
scored: a one-line function has few ways to be written. `tests/test_similarity.py` measures precision and recall
on a labelled set of copies (renamed, reordered, helpers inlined) and independently written answers;
`DEFAULT_THRESHOLD` lies between the two groups' scores there (copies 0.55 and up, independent answers 0.41 and
below).
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from course_lib import manifest

__all__ = [
    "DEFAULT_THRESHOLD",
    "Match",
    "candidates",
    "inline_helpers",
    "reference_sources",
    "runs",
    "similarity",
    "suspicious",
    "tokens",
    "units",
]

DEFAULT_THRESHOLD = 0.5
K = 3  # tokens per run
MIN_RUNS = 10  # an answer with fewer runs than this is too short to tell
_BOUND = "V"
_ATTRIBUTE = "S"
_SKIPPED_FIELDS = {"annotation", "returns", "type_comment", "ctx", "type_params"}
_SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)


def _without_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0].value if node.body and isinstance(node.body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = node.body[1:] or [ast.Pass()]


def _bound_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names the code binds, attributes it assigns on objects)."""
    names: set[str] = set()
    attributes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            attributes.add(node.attr)
    return names, attributes


def _walk(node: ast.AST, names: set[str], attributes: set[str]) -> Iterator[str]:
    """Depth-first tokens of an expression (or a statement's header): node kinds, with names, attributes and
    constants normalised. Nested statements are not entered: each is a unit of its own (`units`)."""
    if isinstance(node, ast.Name):
        yield _BOUND if node.id in names else node.id
        return
    if isinstance(node, ast.arg):
        yield _BOUND
        return
    if isinstance(node, ast.Constant):
        yield "STR" if isinstance(node.value, str | bytes) else repr(node.value)
        return
    if isinstance(node, ast.alias):
        yield "alias"
        return
    yield type(node).__name__
    if isinstance(node, ast.Attribute):
        yield from _walk(node.value, names, attributes)
        yield _ATTRIBUTE if node.attr in attributes else node.attr
        return
    for name, value in ast.iter_fields(node):
        if name in _SKIPPED_FIELDS:
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST) and not isinstance(child, ast.expr_context | ast.stmt):
                yield from _walk(child, names, attributes)


def _header(statement: ast.stmt) -> Iterator[ast.AST]:
    """The parts of a statement that are not statements themselves (a loop's target and iterable, an if's test)."""
    for _, value in ast.iter_fields(statement):
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST) and not isinstance(child, ast.stmt | ast.excepthandler):
                yield from ast.walk(child)


def _calls_argument_checks(statement: ast.stmt) -> bool:
    """Whether a statement (its header, for a compound one) calls the course's argument checks (`_checks.x(...)`)."""
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "_checks"
        for n in _header(statement)
    )


def _without_argument_checks(tree: ast.AST) -> None:
    """Drop the statements that call the course's argument checks (`course_lib._checks`): a reference validates
    its arguments for a learner calling it, which an answer need not do, and a copy leaves them out first."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                kept = [s for s in statements if not _calls_argument_checks(s)]
                setattr(node, field, kept or [ast.Pass()])


def units(source: str) -> list[list[str]]:
    """The normalised tokens of each statement of `source` (see the module docstring); empty when it does not
    parse."""
    try:
        tree = ast.parse(_SOLUTION_MARKERS.sub("", source))
    except (SyntaxError, ValueError):
        return []
    _without_docstrings(tree)
    _without_argument_checks(tree)
    names, attributes = _bound_names(tree)
    return [list(_walk(node, names, attributes)) for node in ast.walk(tree) if isinstance(node, ast.stmt)]


class _Substitute(ast.NodeTransformer):
    """A helper's parameters replaced by what the call passes (copied, so that each use is a node of its own)."""

    def __init__(self, arguments: dict[str, ast.expr]):
        self.arguments = arguments

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.arguments:
            return copy.deepcopy(self.arguments[node.id])
        return node


def _inlinable(function: ast.FunctionDef) -> bool:
    """A helper that ends in its only `return` (so its body can stand in for a call of it) and takes no *args."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    last = function.body[-1] if function.body else None
    args = function.args
    return (
        len(returns) == 1
        and returns[0] is last
        and last.value is not None
        and args.vararg is None
        and args.kwarg is None
        and not args.posonlyargs
    )


def _arguments(function: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr] | None:
    """What each parameter of `function` is at `call` (defaults for the rest); None when the call does not fit."""
    params = function.args.args + function.args.kwonlyargs
    defaults = dict(zip([a.arg for a in function.args.args][::-1], function.args.defaults[::-1], strict=False))
    defaults |= {a.arg: d for a, d in zip(function.args.kwonlyargs, function.args.kw_defaults, strict=True) if d}
    if len(call.args) > len(function.args.args) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    bound = {param.arg: value for param, value in zip(function.args.args, call.args, strict=False)}
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        bound[keyword.arg] = keyword.value
    for param in params:
        if param.arg not in bound:
            if param.arg not in defaults:
                return None
            bound[param.arg] = defaults[param.arg]
    return bound


def _written_out(statement: ast.stmt, helpers: dict[str, ast.FunctionDef], used: set[str]) -> list[ast.stmt] | None:
    """`x = helper(...)`, `return helper(...)` or `helper(...)` with the helper's body in place of the call."""
    call = statement.value if isinstance(statement, ast.Assign | ast.Return | ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in helpers):
        return None
    helper = helpers[call.func.id]
    arguments = _arguments(helper, call)
    if arguments is None:
        return None
    body = [_Substitute(arguments).visit(copy.deepcopy(s)) for s in helper.body]
    result = body.pop().value  # the helper's one `return`, last
    used.add(helper.name)
    if isinstance(statement, ast.Assign):
        return [*body, ast.Assign(targets=statement.targets, value=result)]
    if isinstance(statement, ast.Return):
        return [*body, ast.Return(value=result)]
    return body


def inline_helpers(source: str) -> str | None:
    """`source` with each call of one of its own top-level functions (a helper) written out in place, as someone
    hiding a copy of a reference and its helper would write it, and the helpers written out dropped; None when
    `source` calls none of its functions that way (or does not parse)."""
    try:
        tree = ast.parse(_SOLUTION_MARKERS.sub("", source))
    except (SyntaxError, ValueError):
        return None
    _without_docstrings(tree)
    _without_argument_checks(tree)
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and _inlinable(n)}
    used: set[str] = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not (isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt)):
                continue
            out: list[ast.stmt] = []
            for statement in statements:
                written = _written_out(statement, {k: v for k, v in helpers.items() if v is not node}, used)
                out.extend([statement] if written is None else written)
            setattr(node, field, out)
    if not used:
        return None
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in used)]
    return ast.unparse(ast.fix_missing_locations(tree))


def tokens(source: str) -> list[str]:
    """All the normalised tokens of `source`, statement after statement (for reading; `runs` is what is compared)."""
    return [token for unit in units(source) for token in unit]


def runs(source: str, k: int = K) -> set[tuple[str, ...]]:
    """The runs of `k` consecutive tokens within each statement (a shorter statement is one run)."""
    out = set()
    for unit in units(source):
        out.update(tuple(unit[i : i + k]) for i in range(max(1, len(unit) - k + 1)))
    return out


def similarity(answer: str, reference: str) -> float | None:
    """The Jaccard index of the two codes' runs (0 to 1); None when the answer is too short to tell or does not
    parse."""
    mine = runs(answer)
    if len(mine) < MIN_RUNS:
        return None
    theirs = runs(reference)
    return len(mine & theirs) / len(mine | theirs)


@dataclass(frozen=True)
class Match:
    exercise: str
    reference: str  # where the matching code is: a course_lib path, or "the instructor's solution"
    score: float

    def __str__(self) -> str:
        return f"`{self.exercise}` {self.score:.0%} like {self.reference}"


def _helpers(function) -> list[str]:
    """Source of the functions `function` (a function or a class) calls that are defined in its own module (one
    level)."""
    module = inspect.getmodule(function)
    try:
        tree = ast.parse(inspect.getsource(function))
    except (OSError, TypeError):
        return []
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    out = []
    for name in sorted(called):
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper.__module__ == getattr(module, "__name__", None):
            out.append(inspect.getsource(helper))
    return out


@cache
def reference_sources(lesson: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each exercise of `lesson`: (where, source) of each reference with its same-module helpers."""
    from course_lib.grading.kit.exercise import resolve

    out = {}
    for exercise in manifest.lesson(lesson).exercises:
        found = []
        for path in exercise.references:
            reference = resolve(path)
            try:
                source = inspect.getsource(reference)
            except (OSError, TypeError):
                continue
            helpers = _helpers(reference) if inspect.isfunction(reference) or inspect.isclass(reference) else []
            found.append((f"`{path}`", "\n\n".join([source, *helpers])))
        out[exercise.name] = tuple(found)
    return out


def candidates(lesson: str, exercise: str, solution: str | None = None) -> list[tuple[str, str]]:
    """(where, source) of everything an answer to `exercise` is compared with: each of its references with their
    helpers, the instructor's `solution` when given, and each of these again with its helpers written out inline
    (`inline_helpers`), since a copy may have them either way."""
    found = list(reference_sources(lesson).get(exercise, ()))
    if solution is not None:
        found.append(("the instructor's solution", solution))
    for where, source in list(found):
        inlined = inline_helpers(source)
        if inlined is not None:
            found.append((f"{where} with its helpers written out", inlined))
    return found


def suspicious(
    answers: dict[str, str],
    lesson: str,
    threshold: float = DEFAULT_THRESHOLD,
    solutions: dict[str, str] | None = None,
) -> list[Match]:
    """The answers of `answers` ({exercise: answer cell source}) at least `threshold` like a reference of theirs
    (or like the instructor's solution in `solutions`), the closest match of each (`candidates`)."""
    found = []
    for exercise, answer in answers.items():
        compared = candidates(lesson, exercise, (solutions or {}).get(exercise))
        scored = [(s, where) for where, source in compared if (s := similarity(answer, source)) is not None]
        if scored:
            score, where = max(scored)
            if score >= threshold:
                found.append(Match(exercise, where, score))
    return found
