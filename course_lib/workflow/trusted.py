"""Verdicts a learner's code cannot touch (COURSE_SPEC §5): the grader's side of grading a notebook.

nbgrader runs a submitted notebook in a kernel, and everything in that kernel — the checks included — is within
reach of the learner's code. So the kernel's test-cell results decide nothing. After the kernel has run, `grade`
takes each exercise's answer cell from the notebook and, for each exercise separately:

1. reads the answer's source (never runs it) for forbidden shortcuts and for reaching into the machinery
   (`guard.source_problems`): such an answer scores 0 for that exercise and is reported;
2. starts a sandbox (`course_lib.grading.kit.sandbox`): a fresh process forked from this one, running the lesson's
   preamble, the course's references of the lesson's *other* exercises (so one answer never depends on another)
   and the answer cell, with the from-scratch watcher on from the first line of the answer;
3. runs each of the exercise's test cells here, with the answer's names bound to `Remote` stand-ins: the checks
   choose the inputs, only plain data comes back, and expected values and comparisons are computed here.

Test cells are not executed as code: each is read as "import check_X from a course grader; call it with these
names and these data", and anything else is refused. The checks and references this process runs are the ones
`prepare` loaded before any submission ran; `restore_files` puts back any course file a submission changed on
disk, so one submission cannot change the grading of the next, in this run or a later one.
"""

from __future__ import annotations

import ast
import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from course_lib import manifest
from course_lib.grading.kit import confine, guard
from course_lib.grading.kit.core import DEFAULT_CALL_TIMEOUT
from course_lib.grading.kit.errors import GradingError, Passed
from course_lib.grading.kit.remote import Remote, TimedOut
from course_lib.grading.kit.sandbox import Sandbox, SandboxDied

__all__ = ["Verdict", "available", "grade", "parse_test_cell", "prepare", "restore_files"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_modules: dict[str, ModuleType] = {}
_snapshot: dict[Path, bytes] = {}
_watched_dirs: list[Path] = []
_MEMORY = confine.parse_size(confine.DEFAULT_MEMORY)  # what a sandbox may allocate unless told otherwise


def available() -> bool:
    """Trusted grading forks the grader's process, which needs a POSIX system."""
    return hasattr(os, "fork")


def prepare(course_root: Path | None = None) -> None:
    """Load every grader and reference module, and remember the course's code files as they are now.

    Call this before any submission's code runs (the course's sanitizing preprocessor does); later calls do nothing.
    """
    if _modules:
        return
    for lesson in manifest.LESSONS:
        for name in (lesson.grader, lesson.references):
            _modules[name] = importlib.import_module(name)
    _watched_dirs.append(PACKAGE_DIR)
    for path in PACKAGE_DIR.rglob("*"):
        if path.is_file():
            _snapshot[path] = path.read_bytes()
    if course_root is not None and (course_root / "nbgrader_config.py").is_file():
        config = (course_root / "nbgrader_config.py").resolve()
        _snapshot[config] = config.read_bytes()


def restore_files() -> list[str]:
    """Put back every remembered file a submission changed or deleted, and remove code files it added among the
    course's; return what was changed (paths relative to the package's parent), empty when nothing was.

    Python's bytecode caches (`__pycache__/*.pyc`) are put back or removed too, but not reported: an honest
    kernel writes them when it first imports a module, and a removed cache is simply compiled again.
    """
    changed = []
    for path, content in _snapshot.items():
        try:
            same = path.read_bytes() == content
        except OSError:
            same = False
        if not same:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            if not _is_cache(path):
                changed.append(_shown(path))
    for folder in _watched_dirs:
        for path in folder.rglob("*"):
            if path.is_file() and path not in _snapshot and path.suffix in (".py", ".pyc", ".pth", ".so"):
                path.unlink()
                if not _is_cache(path):
                    changed.append(_shown(path) + " (added; removed)")
    return changed


def _is_cache(path: Path) -> bool:
    return path.suffix == ".pyc" and path.parent.name == "__pycache__"


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(PACKAGE_DIR.parent))
    except ValueError:
        return path.name


@dataclass
class Verdict:
    """The trusted result of one test cell."""

    passed: bool
    message: str  # "✓ ..." when passed; else what the learner is told
    exercise: str


@dataclass
class Grading:
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # by test cell grade_id
    notes: list[str] = field(default_factory=list)  # interference the grader could tell; the submission is flagged


# ------------------------------------------------------------------------------------------------------------
# Reading test cells


_DATA_CALLS = {"list": list, "tuple": tuple, "range": range, "dict": dict, "bytes": bytes, "set": set}


def _data(node: ast.AST) -> Any:
    """The value of a test cell's data argument: literals, and list/tuple/range/dict/bytes/set of literals."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [_data(n) for n in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_data(n) for n in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_data(k): _data(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _data(node.operand)
        if isinstance(value, int | float):
            return -value if isinstance(node.op, ast.USub) else value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _DATA_CALLS
        and not node.keywords
    ):
        return _DATA_CALLS[node.func.id](*(_data(a) for a in node.args))
    raise ValueError(f"not plain data: {ast.unparse(node)}")


@dataclass(frozen=True)
class TestCall:
    module: str  # course_lib.grading.<lesson module>
    function: str  # check_<name>
    names: tuple[str, ...]  # the notebook names passed as positional arguments
    kwargs: dict[str, Any]


def parse_test_cell(source: str) -> TestCall:
    """A test cell as data: `from course_lib.grading.M import check_X` then `check_X(names..., cases=<data>)`."""
    tree = ast.parse(source)
    imports: dict[str, str] = {}
    calls = []
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and (statement.module or "").startswith("course_lib.grading."):
            for alias in statement.names:
                if alias.asname is None and alias.name.startswith("check_"):
                    imports[alias.name] = statement.module
                    continue
                raise ValueError(f"unexpected import of {alias.name}")
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            calls.append(statement.value)
        else:
            raise ValueError(f"unexpected statement: {ast.unparse(statement)[:80]}")
    if len(calls) != 1 or not isinstance(calls[0].func, ast.Name) or calls[0].func.id not in imports:
        raise ValueError("a test cell calls exactly one imported check_ function")
    call = calls[0]
    if not all(isinstance(a, ast.Name) for a in call.args):
        raise ValueError("a check's positional arguments are the answer's names")
    kwargs = {k.arg: _data(k.value) for k in call.keywords if k.arg is not None}
    names = tuple(a.id for a in call.args)  # type: ignore[attr-defined]
    return TestCall(imports[call.func.id], call.func.id, names, kwargs)


# ------------------------------------------------------------------------------------------------------------
# Grading


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _owner(test_id: str, exercises: list[manifest.Exercise]) -> manifest.Exercise | None:
    rest = test_id.removeprefix("test_")
    matches = [e for e in exercises if rest == e.name or rest.startswith(e.name + "_")]
    return max(matches, key=lambda e: len(e.name), default=None)


def _fail_all(grading: Grading, tests: list[str], exercise: str, message: str) -> None:
    for test_id in tests:
        grading.verdicts[test_id] = Verdict(False, message, exercise)


def grade(nb, lesson_id: str, only: tuple[str, ...] | None = None, memory: int | None = _MEMORY) -> Grading:
    """Trusted verdicts for every test cell of `nb`, a notebook of lesson `lesson_id` (see module docstring);
    `only` limits them to the test cells of those exercises; `memory`: what each sandbox may allocate (bytes)."""
    prepare()
    lesson = manifest.lesson(lesson_id)
    references = _modules[lesson.references]
    exercises = list(lesson.exercises)
    answers = {_grade_id(c): c.source for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    tests: dict[str, list[tuple[str, str]]] = {e.name: [] for e in exercises}
    grading = Grading()
    for cell in nb.cells:
        test_id = _grade_id(cell)
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution") or not test_id:
            continue
        owner = _owner(test_id, exercises)
        if owner is None:
            grading.verdicts[test_id] = Verdict(False, "this test cell belongs to no exercise of the lesson", test_id)
            continue
        tests[owner.name].append((test_id, cell.source))
    for exercise in exercises:
        if tests[exercise.name] and (only is None or exercise.name in only):
            answer = answers.get(exercise.name)
            _grade_exercise(grading, lesson, exercise, answer, tests[exercise.name], references, memory)
    return grading


def _grade_exercise(grading, lesson, exercise, source, tests, references, memory) -> None:
    test_ids = [test_id for test_id, _ in tests]
    own = tuple(getattr(references, n) for n in exercise.names)
    if source is None:
        _fail_all(grading, test_ids, exercise.name, "the answer cell was deleted, so there is no answer to grade.")
        return
    problems = [p for reference in own for p in guard.source_problems(source, reference)]
    if problems:
        shortcuts = [p for p in problems if "forbids" in p or "library" in p]
        if shortcuts:
            message = guard.fail_message(exercise.name, ", ".join(shortcuts), "uses")
        else:
            message = (
                f"your answer uses {', '.join(problems)}, which an answer to this exercise never needs and which "
                "can reach into the grading machinery, so it earns no points. Write the answer with plain Python "
                "and torch, inside its answer cell."
            )
            grading.notes.append(f"`{exercise.name}`: the answer uses {', '.join(problems)} (scored 0)")
        _fail_all(grading, test_ids, exercise.name, message)
        return
    bindings = {
        name: getattr(references, name)
        for other in lesson.exercises
        if other is not exercise
        for name in other.names
        if hasattr(references, name)
    }
    try:
        sandbox, ready = Sandbox.start(
            preamble=lesson.sandbox_preamble,
            bindings=bindings,
            source=source,
            names=exercise.names,
            references=own,
            timeout=DEFAULT_CALL_TIMEOUT,
            memory=memory,
        )
    except (SandboxDied, TimedOut) as exc:
        # The answer cell ended its process or held it past every limit (a C call that ignores the alarm, say):
        # that exercise scores 0, and the rest of the notebook is still graded.
        _fail_all(grading, test_ids, exercise.name, _start_failure(exc))
        return
    try:
        problem = _definition_problem(exercise, ready)
        if problem is not None:
            _fail_all(grading, test_ids, exercise.name, problem)
            return
        names = {name: Remote(sandbox, handle, DEFAULT_CALL_TIMEOUT) for name, handle in ready.names.items()}
        for test_id, test_source in tests:
            grading.verdicts[test_id] = _run_test(exercise.name, test_source, names)
    finally:
        sandbox.close()


def _start_failure(exc: Exception) -> str:
    if isinstance(exc, TimedOut):
        return (
            f"running the answer cell did not finish within {DEFAULT_CALL_TIMEOUT:g} s and did not answer when "
            "stopped, so its process was ended. Is there a loop or a very large computation at the top level?"
        )
    return f"running the answer cell ended the process it ran in: {exc}."


def _definition_problem(exercise: manifest.Exercise, ready) -> str | None:
    """Why the answer cell could not even be run on its own, if it could not."""
    if ready.forbidden:
        return guard.fail_message(exercise.name, ready.forbidden, "calls")
    if ready.timed_out:
        limit = f"{DEFAULT_CALL_TIMEOUT:g} s"
        return f"running the answer cell did not finish within {limit}. Is there a loop that never ends?"
    failure = ready.failure
    if failure is not None:
        if "builtins.NotImplementedError" in failure.classes:
            return "not written yet (the answer cell still raises NotImplementedError)."
        if "builtins.MemoryError" in failure.classes:
            return (
                "running the answer cell ran out of memory (MemoryError): it allocated more than a graded answer may "
                "(the limit per process). Does a loop at the top level keep adding to a list or a tensor?"
            )
        where = (
            " Graded answers run on their own: the answer cell, the lesson's usual imports (math, re, torch, nn, F, "
            "`ref`) and the other exercises' names — define anything else it needs inside the answer cell."
            if failure.type_name == "NameError"
            else ""
        )
        said = f": {failure.message}" if failure.message else ""
        return f"the answer cell raised {failure.type_name}{said}.{where}"
    missing = [name for name, handle in ready.names.items() if handle is None]
    if missing:
        return f"the answer cell does not define {', '.join(f'`{n}`' for n in missing)}."
    return None


def _run_test(exercise: str, source: str, names: dict[str, Remote]) -> Verdict:
    try:
        test = parse_test_cell(source)
        module = _modules.get(test.module)
        check = getattr(module, test.function, None) if module is not None else None
        if check is None or not all(n in names for n in test.names):
            raise ValueError(f"{test.module}.{test.function} is not a check of this lesson")
    except (SyntaxError, ValueError) as exc:
        return Verdict(False, f"this test cell is not one the course's grader can run ({exc}).", exercise)
    try:
        result = check(*(names[n] for n in test.names), **test.kwargs)
    except GradingError as exc:
        return Verdict(False, exc.message, exercise)
    except SandboxDied as exc:
        return Verdict(False, f"{exc}.", exercise)
    except TimedOut:
        return Verdict(False, "your answer did not answer in time and was stopped.", exercise)
    except Exception as exc:  # a surprise inside a check is a failed check, reported plainly
        return Verdict(False, f"the check stopped with {type(exc).__name__}: {exc}", exercise)
    if not isinstance(result, Passed):
        return Verdict(False, "the check returned no result.", exercise)
    return Verdict(True, repr(result), exercise)
