"""Verdicts a learner's code cannot touch: the grader's side of grading a notebook (docs/ARCHITECTURE.md,
Trusted grading).

Everything in a learner's kernel — the checks included — is within reach of the learner's code, so test-cell
results reached in a kernel decide nothing. When nbgrader grades a notebook (by default without running it in any
kernel; with `run_cells = "always"` after a kernel ran it), `TrustedGrader.grade` takes each exercise's answer cell
from the notebook and, for each exercise separately:

1. reads the answer's source (never runs it) for the few names no graded answer may use (`guard.refusals`): such
   an answer scores 0 for that exercise, with the message the visible check in the notebook gives for the same
   cell; it ran nothing, so it flags nothing;
2. starts a sandbox (`course_lib.grading.kit.sandbox`): a fresh process forked from this one, running the lesson's
   preamble, the course's references of the lesson's *other* exercises (so one answer never depends on another)
   and the answer cell, with the from-scratch watcher on from the first line of the answer;
3. runs each of the exercise's test cells here, with the answer's names bound to `Remote` stand-ins: the checks
   choose the inputs, only plain data comes back, and expected values and comparisons are computed here.

An answer that reached into the grading while it ran (switched the from-scratch watcher off, read frames, ...:
`guard.watching`) scores 0 for its exercise, and a note says what it did (`Grading.notes`: the submission is
flagged). That, and course files changed on disk, are the only things that flag a submission.

Test cells are not executed as code: each is read as "import check_X from a course grader; call it with these
names and these data", and anything else is refused. A `TrustedGrader` is made once per process, before any
submission's code runs in it: the checks and references it grades with are the ones it loaded then, and
`restore_files` puts back any course file a submission changed on disk since, so one submission cannot change
the grading of the next, in this run or a later one.
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
from course_lib.grading.kit import guard
from course_lib.grading.kit.errors import GradingError, Passed
from course_lib.grading.kit.exercise import Graded, resolve
from course_lib.grading.kit.remote import Remote, TimedOut
from course_lib.grading.kit.sandbox import Limits, Sandbox, SandboxDied

__all__ = ["CourseFiles", "Limits", "TrustedGrader", "Verdict", "available", "parse_test_cell"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def available() -> bool:
    """Trusted grading forks the grader's process, which needs a POSIX system."""
    return hasattr(os, "fork")


class CourseFiles:
    """The course's code files as they were when this was made, to put back what a submission changes on disk.

    Everything beneath `package_dir` is remembered, and each of `also` (the course's `nbgrader_config.py`).
    """

    def __init__(self, package_dir: Path = PACKAGE_DIR, also: tuple[Path, ...] = ()):
        self.package_dir = package_dir
        self.snapshot = {path: path.read_bytes() for path in package_dir.rglob("*") if path.is_file()}
        self.snapshot |= {path.resolve(): path.read_bytes() for path in also if path.is_file()}

    def restore(self) -> list[str]:
        """Put back every remembered file a submission changed or deleted, and remove code files it added beneath
        the package; return what was changed (paths relative to the package's parent), empty when nothing was.

        Python's bytecode caches (`__pycache__/*.pyc`) are put back or removed too, but not reported: an honest
        kernel writes them when it first imports a module, and a removed cache is simply compiled again.
        """
        changed = []
        for path, content in self.snapshot.items():
            try:
                same = path.read_bytes() == content
            except OSError:
                same = False
            if not same:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
                if not _is_cache(path):
                    changed.append(self._shown(path))
        for path in self.package_dir.rglob("*"):
            if path.is_file() and path not in self.snapshot and path.suffix in (".py", ".pyc", ".pth", ".so"):
                path.unlink()
                if not _is_cache(path):
                    changed.append(self._shown(path) + " (added; removed)")
        return changed

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.package_dir.parent))
        except ValueError:
            return path.name


def _is_cache(path: Path) -> bool:
    return path.suffix == ".pyc" and path.parent.name == "__pycache__"


@dataclass
class Verdict:
    """The trusted result of one test cell."""

    passed: bool
    message: str  # "✓ ..." when passed; else what the learner is told
    exercise: str


@dataclass
class Grading:
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # by test cell grade_id
    notes: list[str] = field(default_factory=list)  # an answer that reached into the grading: the submission is flagged


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


def _warm_up() -> None:
    """Make this process fit for grading, once, before the first sandbox is forked from it.

    - One torch thread. Every check computes on tiny tensors, where a thread pool only costs: each parallel region
      waits for threads to wake, which on a busy machine takes milliseconds (measured on a 2-core machine at load 7:
      lesson 04's `scaled_dot_product_attention` checks took 3.6 s with torch's default 2 threads, 0.16 s with one).
      Sandboxes already run with one (`sandbox.py`); this is the grader's side of the same calls.
    - What a sandbox would otherwise do on its first call and cannot: the first optimizer a process makes imports
      torch's compiler (`torch._dynamo`, hundreds of modules), which asks `tempfile` for a writable folder, and a
      sandbox under Landlock may write nowhere. Without this, the first submission a process graded lost the points
      of a check that makes an optimizer (lesson 04's `train_step`) with "No usable temporary directory". Every
      sandbox forked after this has both the folder's name and the modules.
    """
    import tempfile

    import torch

    torch.set_num_threads(1)
    tempfile.gettempdir()
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)


def _fail_all(grading: Grading, tests: list[str], exercise: str, message: str) -> None:
    for test_id in tests:
        grading.verdicts[test_id] = Verdict(False, message, exercise)


class TrustedGrader:
    """Trusted grading in one process (see the module docstring). Make it before any submission's code runs here:
    it loads every lesson's graders and references and remembers the course's files as they are then."""

    def __init__(self, course_root: Path | None = None, files: CourseFiles | None = None):
        """`course_root`: the nbgrader course folder, whose `nbgrader_config.py` is remembered with the package's
        files; `files`: the files to remember instead (tests)."""
        self.modules: dict[str, ModuleType] = {}
        self.exercises: dict[tuple[str, str], tuple[Graded, ...]] = {}  # (lesson, exercise) -> one per name
        self.references: dict[str, Any] = {}  # every exercise's reference, by its name in the manifest
        for lesson in manifest.LESSONS:
            for name in (lesson.grader, lesson.references):
                self.modules[name] = importlib.import_module(name)
            for exercise in lesson.exercises:
                graded = tuple(Graded(resolve(path)) for path in exercise.references)
                self.exercises[lesson.id, exercise.name] = graded
                self.references |= {e.path: e.reference for e in graded}
        if files is None:
            config = (course_root / "nbgrader_config.py",) if course_root is not None else ()
            files = CourseFiles(PACKAGE_DIR, config)
        self.files = files
        _warm_up()

    def restore_files(self) -> list[str]:
        """Put back the course's files a submission changed (`CourseFiles.restore`); what was changed."""
        return self.files.restore()

    def grade(self, nb, lesson_id: str, only: tuple[str, ...] | None = None, limits: Limits | None = None) -> Grading:
        """Trusted verdicts for every test cell of `nb`, a notebook of lesson `lesson_id` (see module docstring);
        `only` limits them to the test cells of those exercises; `limits`: what each sandbox may use (by default
        `Limits()`: the kit's call time limit, 4 GiB)."""
        limits = limits or Limits()
        lesson = manifest.lesson(lesson_id)
        exercises = list(lesson.exercises)
        answers = {
            _grade_id(c): c.source for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")
        }
        tests: dict[str, list[tuple[str, str]]] = {e.name: [] for e in exercises}
        grading = Grading()
        for cell in nb.cells:
            test_id = _grade_id(cell)
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution") or not test_id:
                continue
            owner = _owner(test_id, exercises)
            if owner is None:
                message = "this test cell belongs to no exercise of the lesson"
                grading.verdicts[test_id] = Verdict(False, message, test_id)
                continue
            tests[owner.name].append((test_id, cell.source))
        for exercise in exercises:
            if tests[exercise.name] and (only is None or exercise.name in only):
                answer = answers.get(exercise.name)
                self._grade_exercise(grading, lesson, exercise, answer, tests[exercise.name], limits)
        return grading

    def _grade_exercise(self, grading, lesson, exercise, source, tests, limits: Limits) -> None:
        test_ids = [test_id for test_id, _ in tests]
        own = self.exercises[lesson.id, exercise.name]
        if source is None:
            _fail_all(grading, test_ids, exercise.name, "the answer cell was deleted, so there is no answer to grade.")
            return
        refused = guard.refusals(source)
        if refused:  # never run; the visible check in the notebook refuses it with the same words
            _fail_all(grading, test_ids, exercise.name, guard.refusal_message(exercise.name, refused))
            return
        bindings = {  # the other exercises' names, bound to the course's references of them
            name: self.references[path]
            for other in lesson.exercises
            if other is not exercise
            for name, path in other.paths.items()
        }
        try:
            sandbox, ready = Sandbox.start(
                preamble=lesson.sandbox_preamble,
                bindings=bindings,
                source=source,
                names=exercise.names,
                exercises=own,
                limits=limits,
            )
        except (SandboxDied, TimedOut) as exc:
            # The answer cell ended its process or held it past every limit (a C call that ignores the alarm,
            # say): that exercise scores 0, and the rest of the notebook is still graded.
            _fail_all(grading, test_ids, exercise.name, _start_failure(exc, limits))
            return
        try:
            problem = _definition_problem(exercise, ready, limits)
            if problem is None:
                names = {name: Remote(sandbox, handle, limits.time) for name, handle in ready.names.items()}
                for test_id, test_source in tests:
                    grading.verdicts[test_id] = self._run_test(exercise.name, test_source, names)
        finally:
            sandbox.close()
        touched = ready.touched or sandbox.touched
        if touched:  # it did, at run time, what the source check refuses: the one thing that flags a submission
            _fail_all(grading, test_ids, exercise.name, guard.touched_message(exercise.name, touched))
            grading.notes.append(f"`{exercise.name}`: while it was graded, the answer {touched} (scored 0)")
        elif problem is not None:
            _fail_all(grading, test_ids, exercise.name, problem)

    def _run_test(self, exercise: str, source: str, names: dict[str, Remote]) -> Verdict:
        try:
            test = parse_test_cell(source)
            module = self.modules.get(test.module)
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


def _start_failure(exc: Exception, limits: Limits) -> str:
    if isinstance(exc, TimedOut):
        return (
            f"running the answer cell did not finish within {limits.time:g} s and did not answer when "
            "stopped, so its process was ended. Is there a loop or a very large computation at the top level?"
        )
    return f"running the answer cell ended the process it ran in: {exc}."


def _definition_problem(exercise: manifest.Exercise, ready, limits: Limits) -> str | None:
    """Why the answer cell could not even be run on its own, if it could not."""
    if ready.forbidden:
        return guard.fail_message(exercise.name, ready.forbidden, "calls")
    if ready.timed_out:
        limit = f"{limits.time:g} s"
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
