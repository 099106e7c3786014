"""The import graph of course_lib: no cycles, and each room imports only the rooms below it.

The rooms (docs/ARCHITECTURE.md, "Rooms and imports"): the teaching modules a learner reads (`course_lib/<unit>.py`
and `course_lib/diagrams/`); `course_lib.manifest`, plain data; `course_lib.grading` with its `kit`; and the
machinery of `course_lib.workflow` with the entry points `course_lib.lesson` and `course_lib.__main__`. Each rule
below is a function of a graph, so the tests can show it failing on a small graph made up for the purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import course_lib

PACKAGE = Path(course_lib.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every course_lib module -> the course_lib modules it imports anywhere in its code (functions included)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


ENTRY_POINTS = ("course_lib.lesson", "course_lib.__main__")  # what a learner's kernel and the command line run


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _teaching(module: str) -> bool:
    """A module a learner reads: `course_lib/<unit>.py`, or a diagram of `course_lib/diagrams/`."""
    if _within(module, "course_lib.diagrams"):
        return True
    rooms = ("course_lib.grading", "course_lib.workflow", "course_lib.manifest", *ENTRY_POINTS)
    return module.count(".") == 1 and module not in rooms


def _machinery(module: str) -> bool:
    return _within(module, "course_lib.grading") or _within(module, "course_lib.workflow")


def _grader_outside_the_kit(module: str) -> bool:
    return _within(module, "course_lib.grading") and not _within(module, "course_lib.grading.kit")


# The rooms of class grading inside workflow, from the top: each imports only the rooms after it.
CLASS_ROOMS = ("class_command", "nbgrader_runs", "nbgrader_plugins", "submissions")


def _class_room(module: str) -> int | None:
    """Where `module` stands among `CLASS_ROOMS` (0: the top), None outside them."""
    for rank, room in enumerate(CLASS_ROOMS):
        if _within(module, f"course_lib.workflow.{room}"):
            return rank
    return None


# rule -> (which modules it binds, what they may not import)
RULES = {
    "teaching modules import neither grading nor workflow": (_teaching, _machinery),
    "course_lib.manifest imports nothing from course_lib": (
        lambda m: m == "course_lib.manifest",
        lambda t: _within(t, "course_lib"),
    ),
    "grading imports nothing from workflow or the entry points": (
        lambda m: _within(m, "course_lib.grading"),
        lambda t: _within(t, "course_lib.workflow") or t in ENTRY_POINTS,
    ),
    "graders reach remote answers only through kit.core": (
        _grader_outside_the_kit,
        lambda t: t == "course_lib.grading.kit.remote",
    ),
}
# Class grading's rooms: a rule per room, its module against every room above it.
for _rank, _room in enumerate(CLASS_ROOMS[1:], 1):
    RULES[f"workflow.{_room} imports no room above it ({', '.join(CLASS_ROOMS[:_rank])})"] = (
        lambda m, rank=_rank: _class_room(m) == rank,
        lambda t, rank=_rank: _class_room(t) is not None and _class_room(t) < rank,
    )


def _broken(graph: dict[str, set[str]], rule: str) -> dict[str, set[str]]:
    """Each module the rule binds -> what it imports that the rule forbids (only modules that break it)."""
    bound, forbidden = RULES[rule]
    found = {m: {t for t in targets if forbidden(t)} for m, targets in graph.items() if bound(m)}
    return {m: bad for m, bad in found.items() if bad}


def test_the_graph_is_read():
    graph = _imports()
    assert "course_lib.grading.kit.guard" in graph["course_lib.grading.kit.core"]
    assert "course_lib.manifest" in graph["course_lib.workflow.course"]
    assert "course_lib.grading.kit.remote" in graph["course_lib.grading.kit.core"]


def test_no_import_cycle_anywhere_in_course_lib():
    assert _cycle(_imports()) is None, " -> ".join(_cycle(_imports()) or [])


def test_a_cycle_would_be_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_rooms_are_named_as_expected():
    graph = _imports()
    assert {"course_lib.attention", "course_lib.gpt2", "course_lib.diagrams.gpt2"} <= {m for m in graph if _teaching(m)}
    assert not {"course_lib.manifest", "course_lib.lesson", "course_lib.grading"} & {m for m in graph if _teaching(m)}
    assert "course_lib.grading.attention_common" in {m for m in graph if _grader_outside_the_kit(m)}
    assert "course_lib.grading.kit.core" not in {m for m in graph if _grader_outside_the_kit(m)}


@pytest.mark.parametrize("rule", RULES)
def test_each_room_imports_only_what_it_may(rule):
    broken = _broken(_imports(), rule)
    assert not broken, f"{rule}: {broken}"


# For each rule, a made-up graph that breaks it once, and the one module that must be named.
BREAKS = {
    "teaching modules import neither grading nor workflow": (
        {"course_lib.diagrams.gpt2": {"course_lib.gpt2", "course_lib.grading.kit.core"}},
        "course_lib.diagrams.gpt2",
    ),
    "course_lib.manifest imports nothing from course_lib": (
        {"course_lib.manifest": {"course_lib"}},
        "course_lib.manifest",
    ),
    "grading imports nothing from workflow or the entry points": (
        {"course_lib.grading.kit.guard": {"course_lib.manifest", "course_lib.workflow.course"}},
        "course_lib.grading.kit.guard",
    ),
    "graders reach remote answers only through kit.core": (
        {
            "course_lib.grading.position": {"course_lib.grading.kit.core", "course_lib.grading.kit.remote"},
            "course_lib.grading.kit.core": {"course_lib.grading.kit.remote"},
            "course_lib.workflow.trusted": {"course_lib.grading.kit.remote"},
        },
        "course_lib.grading.position",
    ),
}
for _rank, _room in enumerate(CLASS_ROOMS[1:], 1):  # each room importing the one right above it
    _culprit = f"course_lib.workflow.{_room}.x"
    BREAKS[f"workflow.{_room} imports no room above it ({', '.join(CLASS_ROOMS[:_rank])})"] = (
        {_culprit: {f"course_lib.workflow.{CLASS_ROOMS[_rank - 1]}.y"}, "course_lib.workflow.class_command.z": set()},
        _culprit,
    )


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_would_find_a_module_that_breaks_it(rule):
    graph, culprit = BREAKS[rule]
    assert list(_broken(graph, rule)) == [culprit]
