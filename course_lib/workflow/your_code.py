"""Your answers from earlier lessons, carried into a later one: the thread of the learner's own classes.

Lesson 09 builds a GPT from the `MultiHeadAttention` you wrote in lesson 05 and the `FeedForward` and
`TransformerBlock` you wrote in lesson 06; lesson 10 loads GPT-2's weights into the `GPT` you wrote in lesson 09.
`load_your_code("05_multi_head_attention", "06_transformer_blocks")` reads your saved notebooks of those lessons,
runs each answer cell in a namespace of its own, and keeps an answer only when it passes its visible checks (the
same checks as the notebook's visible test cell); `add_answers` does the same for answers written in the running
notebook (lesson 09 trains the `GPT` you write there). Anything else — a lesson not found, an answer not written, a
check that fails — gets the course's reference instead, and `YourCode.banner` says which and why.

Answers run in lesson order, each with the lesson's usual imports, `ref`, and every name chosen before it: your
lesson 06 `TransformerBlock` is built on your lesson 05 `MultiHeadAttention` when that one passed, on the
reference when it did not. While nbgrader grades a notebook nothing is read: every name is the reference, as
the graded answers themselves are bound to the references.

What is built on what is a fact of the lesson (`builds_on` in `course_lib.manifest`: a `TransformerBlock` holds a
`MultiHeadAttention` and a `FeedForward`). A banner names only the classes whose code runs: where the course's
`TransformerBlock` stands in, it holds the course's attention and feed-forward, so the banner says that your
`MultiHeadAttention` and `FeedForward` do not run; and your block is said to run your attention only when its code
refers to it.

Where your notebook of a lesson, say 05_multi_head_attention, is looked for: in each of these folders, in this
order, `05_multi_head_attention/05_multi_head_attention.ipynb` (the layout `make lab` gives `work/`) and, directly
in the folder, `05_multi_head_attention.ipynb` or a copy of it under Colab's names (`Copy of
05_multi_head_attention.ipynb`, `Copy of 05_multi_head_attention (1).ipynb`, ...):

1. `$COURSE_WORK_DIR`, a folder you name;
2. `$COURSE_DRIVE_DIR`: on Colab, the folder of your Google Drive that the set-up cell mounted (by default
   `MyDrive/Colab Notebooks`, where Colab's "File > Save a copy in Drive" writes `Copy of <lesson>.ipynb`);
3. the running notebook's folder, and the folder above it (`work/` when the lesson runs in `work/<lesson>/`);
4. `work/` of the course.

The first folder holding any of them wins; when it holds several (you saved a lesson twice), the most recently
modified one is read, and the banner names it.
"""

from __future__ import annotations

import contextlib
import dis
import importlib
import io
import os
import re
import sys
import types
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from course_lib import manifest
from course_lib.grading.kit.core import time_limit
from course_lib.grading.kit.errors import GradingError
from course_lib.grading.kit.guard import remember_cell

__all__ = ["Choice", "Found", "YourCode", "add_answers", "find_notebook", "load_your_code", "notebook_of"]

WORK_ENV = "COURSE_WORK_DIR"
DRIVE_ENV = "COURSE_DRIVE_DIR"  # set by `course_lib.lesson.start_lesson` once it has mounted Google Drive on Colab
_REPO_WORK = Path(__file__).resolve().parents[2] / "work"
ANSWER_SECONDS = 20.0  # one answer cell, or one visible check, running longer than this is given up on
NOT_FOUND = "no saved notebook found"


@dataclass(frozen=True)
class Choice:
    """Which object a name stands for, and why; and which names its code is built on."""

    name: str
    lesson: str
    yours: bool
    reason: str  # why the reference stands in; empty when it is yours
    built_on: tuple[str, ...] = ()  # the exercises the lesson builds this one from (manifest `builds_on`)
    uses: tuple[str, ...] = ()  # those of `built_on` your answer's code refers to (empty for the course's)


@dataclass(frozen=True)
class Found:
    """Your notebook of a lesson: the file read, and how many copies of it its folder holds."""

    path: Path
    copies: int = 1  # more than one: the most recently modified was read


@dataclass(frozen=True)
class Place:
    """Where this kernel looks for your notebooks, to say what to do when one is missing."""

    colab: bool
    drive: Path | None  # the Drive folder the set-up cell mounted (Colab), else None
    work: Path  # where `make lab` keeps your lessons, or $COURSE_WORK_DIR


@dataclass
class YourCode:
    """The names of the lessons asked for, each bound to your answer or to the course's reference."""

    objects: dict[str, Any] = field(default_factory=dict)
    choices: dict[str, Choice] = field(default_factory=dict)
    found: dict[str, Found | None] = field(default_factory=dict)  # lesson id -> your notebook read, if any
    place: Place | None = None

    def __getattr__(self, name: str) -> Any:
        objects = self.__dict__.get("objects", {})
        if name in objects:
            return objects[name]
        raise AttributeError(f"no exercise named {name!r} here; these are: {', '.join(objects)}")

    def __getitem__(self, name: str) -> Any:
        return self.objects[name]

    def yours(self, name: str) -> bool:
        """True when `name` is your own answer (it passed its visible checks)."""
        return self.choices[name].yours

    def banner(self, names: Sequence[str] | None = None) -> str:
        """Which of `names` (default: all) run, yours or the course's and why, in a first line; then which of yours
        do not run, because a class of the course's stands in for the class built on them or because your class
        does not use them; which copy of a lesson was read when there were several; and what to do when a lesson
        was not found.

        "Running the course's `TransformerBlock` (lesson 06: not written yet); your `GPT` (lesson 09).", then "Not
        running your `MultiHeadAttention` (lesson 05), `FeedForward` (lesson 06): the course's `TransformerBlock`
        is built from the course's classes." Names with the same owner, lesson and reason are listed together.
        """
        names = list(names or self.choices)
        running, left_out = _what_runs(names, self.choices)
        lines = ["Running " + "; ".join(_groups([self.choices[n] for n in running])) + "."]
        for cause, missed in left_out.items():
            listed = ", ".join(_by_lesson([self.choices[n] for n in missed]))
            if self.choices[cause].yours:
                lines.append(
                    f"Not running your {listed}: your `{cause}` does not use {'it' if len(missed) == 1 else 'them'}."
                )
            else:
                lines.append(f"Not running your {listed}: the course's `{cause}` is built from the course's classes.")
        lessons = list(dict.fromkeys(self.choices[n].lesson for n in names))
        for lesson_id in lessons:
            found = self.found.get(lesson_id)
            if found is not None and found.copies > 1:
                lines.append(
                    f"Lesson {lesson_id[:2]} read from {found.path.name}, the most recently saved of {found.copies} "
                    f"copies in {found.path.parent}."
                )
        # Every lesson asked for and not found, listed or not: a class of it may be what the listed ones are built on.
        missing = [lesson_id for lesson_id, found in self.found.items() if found is None and self._not_found(lesson_id)]
        if missing and self.place is not None:
            lines.append(_what_to_do(missing, self.place))
        return "\n".join(lines)

    def _not_found(self, lesson_id: str) -> bool:
        return any(c.reason == NOT_FOUND for c in self.choices.values() if c.lesson == lesson_id)

    def _repr_markdown_(self) -> str:
        first, *rest = self.banner().splitlines()
        return "  \n".join([f"**{first}**", *rest])

    def __repr__(self) -> str:
        return self.banner()


def _what_runs(names: list[str], choices: dict[str, Choice]) -> tuple[list[str], dict[str, list[str]]]:
    """The names whose code runs (in the order of `names`), and {cause: your names that do not run because of it}.

    The names built into no other listed name are where the running code starts. Your class runs the listed names
    its code uses; the course's class runs the course's, so every one of yours below it is left out.
    """
    listed = set(names)
    inside = {part for n in names for part in choices[n].built_on if part in listed}
    running: set[str] = set()
    left_out: dict[str, list[str]] = {}

    def visit(name: str, course_above: str | None) -> None:
        choice = choices[name]
        if course_above is not None and choice.yours:
            left_out.setdefault(course_above, []).append(name)
        else:
            running.add(name)
        if course_above is None and choice.yours:
            below, course_above = choice.uses, None
        else:
            below, course_above = choice.built_on, course_above or name
        for part in below:
            if part in listed:
                visit(part, course_above)

    for name in names:
        if name not in inside:
            visit(name, None)
    for name in names:  # yours, inside a class of yours whose code does not use it
        parents = [n for n in names if name in choices[n].built_on and n in running and choices[n].yours]
        if choices[name].yours and name not in running and parents and not any(name in v for v in left_out.values()):
            left_out.setdefault(parents[0], []).append(name)
    for cause in left_out:
        left_out[cause] = [n for n in names if n in left_out[cause] and n not in running]
    return [n for n in names if n in running], {c: v for c, v in left_out.items() if v}


def _reason(text: str) -> str:
    """A reason on one line, without a closing full stop (it goes inside parentheses)."""
    return " ".join(text.split()).removesuffix(".")


def _groups(choices: list[Choice]) -> list[str]:
    groups: dict[tuple[bool, str, str], list[str]] = {}
    for choice in choices:
        groups.setdefault((choice.yours, choice.lesson, choice.reason), []).append(f"`{choice.name}`")
    parts = []
    for (yours, lesson, reason), listed in groups.items():
        where = f"lesson {lesson[:2]}" + ("" if yours else f": {_reason(reason)}")
        owner = "your" if yours else "the course's"
        parts.append(f"{owner} {', '.join(listed)} ({where})")
    return parts


def _by_lesson(choices: list[Choice]) -> list[str]:
    groups: dict[str, list[str]] = {}
    for choice in choices:
        groups.setdefault(choice.lesson, []).append(f"`{choice.name}`")
    return [f"{', '.join(listed)} (lesson {lesson[:2]})" for lesson, listed in groups.items()]


def _what_to_do(missing: list[str], place: Place) -> str:
    """One line: how to make the missing lessons found, here."""
    numbers = " and ".join(", ".join(m[:2] for m in missing).rsplit(", ", 1))
    lessons = f"lesson{'s' if len(missing) > 1 else ''} {numbers}"
    if place.colab and place.drive is not None:
        return (
            f"To run yours: open {lessons} in Colab, save your copy with File > Save a copy in Drive, write your "
            f"answers there, and run this cell again (copies are looked for in {place.drive})."
        )
    if place.colab:
        return (
            f"To run yours: let the set-up cell mount your Google Drive (its DRIVE_FOLDER names where your copies of "
            f"{lessons} are; File > Save a copy in Drive puts them in Colab Notebooks), then run this cell again."
        )
    where = ", ".join(f"{place.work / m / m}.ipynb" for m in missing)
    return f"To run yours: save your notebook of {lessons} as {where} (`make lab` keeps your lessons there)."


def _place(here: Path | None) -> Place:
    work = Path(os.environ[WORK_ENV]).expanduser() if os.environ.get(WORK_ENV) else (here or Path.cwd()).parent
    drive = Path(os.environ[DRIVE_ENV]) if os.environ.get(DRIVE_ENV) else None
    return Place("google.colab" in sys.modules, drive, work)


# ------------------------------------------------------------------------------------------------------------
# Finding your notebooks


def _folders(here: Path | None) -> list[Path]:
    folders = [Path(os.environ[v]).expanduser() for v in (WORK_ENV, DRIVE_ENV) if os.environ.get(v)]
    running = (here or Path.cwd()).resolve()
    return [*folders, running, running.parent, _REPO_WORK]


def _copies(folder: Path, lesson_id: str) -> list[Path]:
    """Your notebooks of `lesson_id` in `folder`: `<id>/<id>.ipynb`, and `<id>.ipynb` with Colab's names for it."""
    found = []
    nested = folder / lesson_id / f"{lesson_id}.ipynb"
    if nested.is_file():
        found.append(nested)
    colab_name = re.compile(rf"(Copy of )*{re.escape(lesson_id)}( \(\d+\))?\.ipynb")
    with contextlib.suppress(OSError):  # a folder that is missing or cannot be listed holds nothing
        found += [p for p in folder.iterdir() if colab_name.fullmatch(p.name) and p.is_file()]
    return found


def find_notebook(lesson_id: str, here: Path | None = None) -> Found | None:
    """Your saved notebook of `lesson_id`, or None (see the module docstring for where it is looked for).

    `here`: the folder of the running notebook (default: the working directory, which is that folder in Jupyter).
    """
    for folder in _folders(here):
        copies = _copies(folder, lesson_id)
        if copies:
            newest = max(copies, key=lambda p: (p.stat().st_mtime, p.name))
            return Found(newest, len(copies))
    return None


def notebook_of(lesson_id: str, here: Path | None = None) -> Path | None:
    """The path of your saved notebook of `lesson_id` (`find_notebook`), or None."""
    found = find_notebook(lesson_id, here)
    return None if found is None else found.path


# ------------------------------------------------------------------------------------------------------------
# Running your answers


def _answer_cells(path: Path) -> dict[str, str]:
    """grade_id -> source of every answer cell of the notebook at `path`."""
    nb = nbformat.read(path, as_version=4)
    cells = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
            cells[meta["grade_id"]] = cell.source
    return cells


def _run_answer(lesson: manifest.Lesson, source: str, chosen: dict[str, Any]) -> dict[str, Any]:
    """Run an answer cell in a fresh namespace: the lesson's imports and `ref`, then every name chosen so far."""
    namespace: dict[str, Any] = {"__name__": f"your_{lesson.id}"}
    exec(compile(lesson.sandbox_preamble, "<lesson imports>", "exec"), namespace)
    namespace.update(chosen)
    # Your cell's prints belong to your lesson, not to this one.
    with contextlib.redirect_stdout(io.StringIO()), time_limit(ANSWER_SECONDS):
        # Kept where the visible checks read an answer's cell (`guard.answer_source`), as IPython keeps a cell it runs.
        cell = remember_cell(source, f"<your {lesson.id} answer {zlib.crc32(source.encode()):08x}>")
        exec(compile(source, cell, "exec"), namespace)
    return namespace


def _visible_check(lesson: manifest.Lesson, exercise: manifest.Exercise, objects: list[Any]) -> str:
    """Empty when `objects` pass the exercise's visible checks; else what the check said."""
    check = getattr(importlib.import_module(lesson.grader), f"check_{exercise.name}")
    try:
        with contextlib.redirect_stdout(io.StringIO()), time_limit(ANSWER_SECONDS):
            check(*objects)
    except GradingError as exc:
        return f"its visible check says: {exc.message}"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a learner's answer may raise anything, the alarm included
        return f"its visible check stopped with {type(exc).__name__}"
    return ""


def _functions(obj: Any) -> Iterable[types.FunctionType]:
    """The Python functions that run when `obj` is used: itself, or a class's own methods and properties."""
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, type):
        for value in vars(obj).values():
            value = value.fget if isinstance(value, property) else value
            value = value.__func__ if isinstance(value, staticmethod | classmethod) else value
            if isinstance(value, types.FunctionType):
                yield value


def _globals_in(code: types.CodeType) -> Iterable[str]:
    """The global names `code` reads (not attribute names: `ref.FeedForward` reads the global `ref` only)."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield instruction.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _globals_in(const)


def _uses(answer: Any, candidates: dict[str, Any]) -> tuple[str, ...]:
    """The names of `candidates` whose object `answer`'s code refers to: by a global name, a default argument, a
    closure or a class attribute."""
    refers: list[Any] = list(vars(answer).values()) if isinstance(answer, type) else []
    for function in _functions(answer):
        refers += [function.__globals__[n] for n in set(_globals_in(function.__code__)) if n in function.__globals__]
        refers += [*(function.__defaults__ or ()), *(function.__kwdefaults__ or {}).values()]
        for cell in function.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell
                refers.append(cell.cell_contents)
    return tuple(name for name, obj in candidates.items() if any(r is obj for r in refers))


def load_your_code(*lesson_ids: str, here: Path | None = None, graded: bool | None = None) -> YourCode:
    """Your answers of `lesson_ids` (in that order) where they pass their visible checks, the references elsewhere.

    `here`: the running notebook's folder (it and its parent are among the folders looked in);
    `graded`: True while nbgrader grades (then everything is the reference); default: read from the environment.
    """
    if graded is None:
        graded = bool(os.environ.get("NBGRADER_EXECUTION"))
    result = YourCode(place=_place(here))
    for lesson_id in lesson_ids:
        lesson = manifest.lesson(lesson_id)
        found = None if graded else find_notebook(lesson_id, here)
        result.found[lesson_id] = found
        cells: dict[str, str] = {}
        missing = "graded runs use the course's references" if graded else NOT_FOUND
        if found is not None:
            try:
                cells = _answer_cells(found.path)
                missing = ""
            except Exception as exc:  # noqa: BLE001 - an unreadable file is reported, never fatal
                missing = f"{found.path.name} could not be read ({type(exc).__name__})"
        for exercise in lesson.exercises:
            reason = missing or _try_answer(lesson, exercise, cells, result.objects)
            uses = () if reason else _uses_of(exercise, exercise.builds_on, result.objects)
            for name in exercise.names:
                if reason:  # the exercise's own reference (lesson 09's GPT lives in course_lib.gpt, not its unit)
                    result.objects[name] = _reference_of(lesson_id, name)
                result.choices[name] = Choice(name, lesson_id, not reason, reason, exercise.builds_on, uses)
    return result


def _uses_of(exercise: manifest.Exercise, built_on: Sequence[str], objects: dict[str, Any]) -> tuple[str, ...]:
    """Which of `built_on` the exercise's answer (now in `objects`) refers to."""
    candidates = {name: objects[name] for name in built_on if name in objects}
    return tuple(dict.fromkeys(u for name in exercise.names for u in _uses(objects[name], candidates)))


def _try_answer(lesson: manifest.Lesson, exercise: manifest.Exercise, cells: dict[str, str], chosen: dict) -> str:
    """Run and check one answer; store its objects in `chosen` and return "" if it passes, else why not."""
    source = cells.get(exercise.name)
    if source is None:
        return "its answer cell is missing"
    try:
        namespace = _run_answer(lesson, source, chosen)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - their cell, whatever it raises
        return f"its answer cell raised {type(exc).__name__}"
    absent = [n for n in exercise.names if n not in namespace]
    if absent:
        return f"its answer cell does not define {', '.join(absent)}"
    objects = [namespace[n] for n in exercise.names]
    problem = _visible_check(lesson, exercise, objects)
    if problem:
        return "not written yet" if "not written yet" in problem else problem
    chosen.update(zip(exercise.names, objects, strict=True))
    return ""


def add_answers(
    yours: YourCode,
    lesson_id: str,
    answers: dict[str, Any],
    built_on: Sequence[str] = (),
    graded: bool | None = None,
) -> YourCode:
    """`yours` with answers of the running notebook added (`{"GPT": GPT}`), each kept where it passes its exercise's
    visible checks and the course's reference otherwise, as for a saved lesson (a new YourCode; `yours` is kept).

    An answer is built on the names of `yours` that its exercise's `builds_on` lists (lesson 09's GPT on the
    `TransformerBlock`), and on those of `built_on` besides; the banner says which of them its code uses, and, where
    the course's reference stands in, that yours do not run. While nbgrader grades, every answer is the reference.
    """
    if graded is None:
        graded = bool(os.environ.get("NBGRADER_EXECUTION"))
    lesson = manifest.lesson(lesson_id)
    result = YourCode(dict(yours.objects), dict(yours.choices), dict(yours.found), yours.place or _place(None))
    for exercise in lesson.exercises:
        if not all(name in answers for name in exercise.names):
            continue
        objects = [answers[name] for name in exercise.names]
        problem = "graded runs use the course's references" if graded else _visible_check(lesson, exercise, objects)
        if problem and "not written yet" in problem:
            problem = "not written yet"
        below = tuple(dict.fromkeys([*exercise.builds_on, *built_on]))
        candidates = {name: result.objects[name] for name in below if name in result.objects}
        for name, obj, path in zip(exercise.names, objects, exercise.references, strict=True):
            module, _, attribute = path.rpartition(".")
            result.objects[name] = getattr(importlib.import_module(module), attribute) if problem else obj
            uses = () if problem else _uses(obj, candidates)
            result.choices[name] = Choice(name, lesson_id, not problem, problem, tuple(candidates), uses)
    return result


def _reference_of(lesson_id: str, name: str) -> Any:
    """The course's reference of `name`, an exercise name of `lesson_id`."""
    lesson = manifest.lesson(lesson_id)
    for exercise in lesson.exercises:
        if name in exercise.paths:
            module, _, attribute = exercise.paths[name].rpartition(".")
            return getattr(importlib.import_module(module), attribute)
    raise KeyError(f"{lesson_id} has no exercise that defines {name!r}")
