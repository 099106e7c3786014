"""Every module a lesson imports is installed by `pip install -e .` alone, which is all Colab's set-up cell runs.

Nothing is installed here: the imports are read from the lessons' code cells and from the `course_lib` modules
they reach, and each outside module is looked up (`importlib.metadata.packages_distributions()`) in
`[project.dependencies]` of `pyproject.toml`. A module that is only in an extra (`test`, `lab`) would stop a
learner on Colab at the lesson's import cell. An import inside `try: ... except ImportError` is optional: the code
says what to install when it is missing (self-grading's nbgrader, lesson 11's `datasets`).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSON_SOURCES = sorted((ROOT / "notebooks" / "source").glob("*/*.ipynb"))
# Modules a runtime brings with it and no pip install can provide; the code imports them only there.
PLATFORM = {"google": "Colab's own `google.colab`, imported only when the lesson runs on Colab"}
_OPTIONAL_ERRORS = {"ImportError", "ModuleNotFoundError"}


@dataclass(frozen=True)
class Import:
    module: str  # dotted name, as imported (`from a.b import c` gives a.b, and a.b.c when that is a module)
    where: str  # file (and cell) and line, for the failure message
    optional: bool  # inside `try:` with an `except ImportError` (or ModuleNotFoundError)


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(isinstance(n, ast.Name) and n.id in _OPTIONAL_ERRORS for n in names):
            return True
    return False


def imports_in(source: str, where: str, package: str = "") -> list[Import]:
    """Every import in `source`, at any depth (functions, branches); relative ones resolved against `package`."""
    found: list[Import] = []

    def visit(node: ast.AST, optional: bool) -> None:
        if isinstance(node, ast.Try):
            guarded = optional or _catches_import_error(node)
            for child in node.body:
                visit(child, guarded)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, optional)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, f"{where}:{node.lineno}", optional) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append(Import(module, f"{where}:{node.lineno}", optional))
            # `from course_lib import gpt2` imports the module course_lib.gpt2
            found.extend(
                Import(f"{module}.{alias.name}", f"{where}:{node.lineno}", optional)
                for alias in node.names
                if _course_file(f"{module}.{alias.name}") is not None
            )
        for child in ast.iter_child_nodes(node):
            visit(child, optional)

    visit(ast.parse(source), False)
    return found


def code_cells(path: Path) -> list[tuple[int, str]]:
    """(cell number, Python source) of a notebook's code cells; IPython's `%magic` and `!shell` lines become `pass`."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = []
    for number, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines = [re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in source.splitlines()]
        out.append((number, "\n".join(lines)))
    return out


def _course_file(module: str) -> Path | None:
    if module != "course_lib" and not module.startswith("course_lib."):
        return None
    path = ROOT / module.replace(".", "/")
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def runtime_imports(notebook: Path) -> list[Import]:
    """The notebook's imports and those of every course_lib module it reaches (not through optional imports)."""
    found: list[Import] = []
    for number, source in code_cells(notebook):
        found += imports_in(source, f"{_shown(notebook)} cell {number}")
    todo = [i.module for i in found if not i.optional and _course_file(i.module)]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        parts = module.split(".")
        todo += [".".join(parts[:n]) for n in range(1, len(parts))]  # importing a.b.c runs a and a.b first
        if module in seen:
            continue
        seen.add(module)
        path = _course_file(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        more = imports_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), package)
        found += more
        todo += [i.module for i in more if not i.optional and _course_file(i.module)]
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions(pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    requirements = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    return {_normalise(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in requirements}


def undeclared(imports: list[Import], declared: set[str]) -> list[str]:
    """One line per import that `pip install -e .` would not make importable: where, module, and why."""
    owners = importlib.metadata.packages_distributions()
    problems = []
    for item in imports:
        top = item.module.split(".")[0]
        if item.optional or top in sys.stdlib_module_names or top == "course_lib" or top in PLATFORM:
            continue
        distributions = {_normalise(d) for d in owners.get(top, [])}
        if not distributions:
            problems.append(f"{item.where}: `{item.module}` comes from no installed distribution")
        elif not distributions & declared:
            names = ", ".join(sorted(distributions))
            problems.append(f"{item.where}: `{item.module}` is from {names}, not in [project.dependencies]")
    return problems


@pytest.mark.parametrize("notebook", LESSON_SOURCES, ids=lambda p: p.parent.name)
def test_every_import_of_a_lesson_is_a_runtime_dependency(notebook):
    imports = runtime_imports(notebook)
    assert any(i.module == "torch" for i in imports), "no import found: the parser is wrong"
    problems = undeclared(imports, declared_distributions())
    assert not problems, "pip install -e . would leave these out:\n" + "\n".join(problems)


def test_the_lessons_are_all_read():
    assert len(LESSON_SOURCES) >= 12


PLANTED = {
    "cells": [
        {"cell_type": "code", "source": ["!pip install -q nbgrader\n", "%matplotlib inline\n", "import torch\n"]},
        {"cell_type": "markdown", "source": ["import not_code_at_all"]},
        {"cell_type": "code", "source": ["def later():\n", "    from pytest import approx\n", "    return approx\n"]},
        {"cell_type": "code", "source": ["import yaml.constructor as c"]},
        {"cell_type": "code", "source": ["try:\n", "    import hypothesis\n", "except ImportError:\n", "    pass\n"]},
        {"cell_type": "code", "source": ["from course_lib import gpt2_weights\n", "import numpy, re"]},
    ]
}


def test_a_planted_undeclared_import_is_named(tmp_path):
    """pytest and pyyaml are installed here but only in the `test` extra: a lesson importing them is caught."""
    notebook = tmp_path / "planted.ipynb"
    notebook.write_text(json.dumps(PLANTED), encoding="utf-8")
    imports = runtime_imports(notebook)
    modules = {i.module for i in imports}
    assert {"torch", "pytest", "yaml.constructor", "numpy", "re", "course_lib.gpt2_weights"} <= modules
    assert "not_code_at_all" not in modules and "nbgrader" not in modules  # markdown and `!pip` are not code
    assert "transformers" in modules  # reached through course_lib.gpt2_weights
    problems = undeclared(imports, declared_distributions())
    assert any("cell 2:2: `pytest` is from pytest, not in [project.dependencies]" in p for p in problems), problems
    assert any("cell 3:1: `yaml.constructor` is from pyyaml" in p for p in problems), problems
    assert not any("hypothesis" in p for p in problems)  # optional: guarded by except ImportError
    without_transformers = declared_distributions() - {"transformers"}
    assert any("`transformers` is from transformers" in p for p in undeclared(imports, without_transformers))
    assert undeclared([Import("not_installed_anywhere", "x:1", False)], set()) == [
        "x:1: `not_installed_anywhere` comes from no installed distribution"
    ]


def test_relative_imports_are_resolved():
    source = "from . import gpt2\nfrom .kit.core import check\nfrom .. import data\n"
    modules = [i.module for i in imports_in(source, "x", "course_lib.grading")]
    assert modules == [
        "course_lib.grading",
        "course_lib.grading.gpt2",
        "course_lib.grading.kit.core",
        "course_lib",
        "course_lib.data",
    ]
