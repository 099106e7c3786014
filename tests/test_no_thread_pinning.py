"""Lessons never pin torch's thread count: a learner's laptop has more cores than the machine a lesson was written
on, and one thread would make every demo slower there. Benchmarks may pin (they say so); teaching code may offer a
`num_threads` option, but its default leaves PyTorch's own choice (None), and no lesson sets it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The grading machinery (grading/, workflow/) may pin: its sandboxes and kernels share a class's cores on purpose.
TEACHING = [
    p for p in (ROOT / "course_lib").rglob("*.py") if not {"grading", "workflow"} & set(p.relative_to(ROOT).parts)
]


def _thread_defaults(tree: ast.AST) -> list[tuple[str, int, str]]:
    """(function, line, default) for each `num_threads` parameter whose default is not None."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        for arg, default in pairs:
            if arg.arg == "num_threads" and not (isinstance(default, ast.Constant) and default.value is None):
                found.append((node.name, node.lineno, ast.unparse(default)))
    return found


def _pinned_by_constant(tree: ast.AST) -> list[int]:
    """Lines calling torch.set_num_threads(<a number>) outright."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "set_num_threads"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def test_teaching_code_leaves_the_thread_count_to_pytorch_by_default():
    problems = []
    for path in TEACHING:
        tree = ast.parse(path.read_text(), filename=str(path))
        rel = path.relative_to(ROOT)
        problems += [f"{rel}:{line} {name}(num_threads={d})" for name, line, d in _thread_defaults(tree)]
        problems += [f"{rel}:{line} set_num_threads(<constant>)" for line in _pinned_by_constant(tree)]
    assert problems == [], "teaching code pins threads:\n" + "\n".join(problems)


def test_no_lesson_sets_the_thread_count():
    offenders = []
    for path in sorted((ROOT / "notebooks" / "source").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            text = "".join(cell["source"])
            if cell["cell_type"] == "code" and ("set_num_threads" in text or "num_threads=" in text):
                offenders.append(f"{path.name}: {text.splitlines()[0]}")
    assert offenders == [], "\n".join(offenders)


def test_the_check_sees_a_pinned_default():
    """The AST check is not vacuous: a default of 1 and a constant call are both reported."""
    tree = ast.parse("def f(x, num_threads=1):\n    torch.set_num_threads(4)\ndef g(*, num_threads=None): pass\n")
    assert _thread_defaults(tree) == [("f", 1, "1")]
    assert _pinned_by_constant(tree) == [2]
