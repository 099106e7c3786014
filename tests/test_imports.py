"""The import graph of course_lib: no cycles, and the modules a learner reads never import the machinery."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_the_graph_is_read():
    graph = _imports()
    assert "course_lib.grading.kit.guard" in graph["course_lib.grading.kit.core"]
    assert "course_lib.manifest" in graph["course_lib.workflow.course"]


def test_no_import_cycle_anywhere_in_course_lib():
    assert _cycle(_imports()) is None, " -> ".join(_cycle(_imports()) or [])


def test_a_cycle_would_be_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_teaching_modules_never_import_grading_or_workflow():
    graph = _imports()
    machinery_packages = ("course_lib.grading", "course_lib.workflow", "course_lib.__main__", "course_lib.lesson")
    teaching = [m for m in graph if m.count(".") == 1 and m not in machinery_packages]
    assert "course_lib.attention" in teaching
    for module in teaching:
        machinery = {t for t in graph[module] if t.startswith(("course_lib.grading", "course_lib.workflow"))}
        assert not machinery, f"{module} imports {machinery}"
