"""Your answers from earlier lessons, carried into a later one: the thread of the learner's own classes.

Lesson 09 builds a GPT from the `MultiHeadAttention` you wrote in lesson 05 and the `FeedForward` and
`TransformerBlock` you wrote in lesson 06; lesson 10 loads GPT-2's weights into the `GPT` you wrote in lesson 09.
`load_your_code("05_multi_head_attention", "06_transformer_blocks")` reads your saved notebooks of those lessons,
runs each answer cell in a namespace of its own, and keeps an answer only when it passes its visible checks (the
same checks as the notebook's visible test cell); `add_answers` does the same for answers written in the running
notebook (lesson 09 trains the `GPT` you write there). Anything else — a lesson not found, an answer not written, a
check that fails — gets the course's reference instead, and `YourCode` says which and why in one line.

Answers run in lesson order, each with the lesson's usual imports, `ref`, and every name chosen before it: your
lesson 06 `TransformerBlock` is built on your lesson 05 `MultiHeadAttention` when that one passed, on the
reference when it did not. While nbgrader grades a notebook nothing is read: every name is the reference, as
the graded answers themselves are bound to the references.

Where your notebooks are looked for, first found first: `$COURSE_WORK_DIR/<id>/<id>.ipynb`, then the folder
next to the running notebook's (`../<id>/<id>.ipynb`, the layout `make lab` gives `work/`), then `work/` of the
course.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from course_lib import manifest
from course_lib.grading.kit.core import time_limit
from course_lib.grading.kit.errors import GradingError
from course_lib.grading.kit.guard import remember_cell

__all__ = ["Choice", "YourCode", "add_answers", "load_your_code", "notebook_of"]

WORK_ENV = "COURSE_WORK_DIR"
_REPO_WORK = Path(__file__).resolve().parents[2] / "work"
ANSWER_SECONDS = 20.0  # one answer cell, or one visible check, running longer than this is given up on


@dataclass(frozen=True)
class Choice:
    """Which object a name stands for, and why."""

    name: str
    lesson: str
    yours: bool
    reason: str  # why the reference stands in; empty when it is yours


@dataclass
class YourCode:
    """The names of the lessons asked for, each bound to your answer or to the course's reference."""

    objects: dict[str, Any] = field(default_factory=dict)
    choices: dict[str, Choice] = field(default_factory=dict)

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

    def banner(self, names: tuple[str, ...] | list[str] | None = None) -> str:
        """One line: which of `names` (default: all) are yours and which are the reference, and why.

        "Running your `MultiHeadAttention` (lesson 05); the course's `FeedForward`, `TransformerBlock` (lesson 06:
        not written yet)." Names with the same owner, lesson and reason are listed together.
        """
        groups: dict[tuple[bool, str, str], list[str]] = {}
        for choice in (self.choices[n] for n in (names or self.choices)):
            groups.setdefault((choice.yours, choice.lesson, choice.reason), []).append(f"`{choice.name}`")
        parts = []
        for (yours, lesson, reason), listed in groups.items():
            where = f"lesson {lesson[:2]}" + ("" if yours else f": {reason}")
            owner = "your" if yours else "the course's"
            parts.append(f"{owner} {', '.join(listed)} ({where})")
        return "Running " + "; ".join(parts) + "."

    def _repr_markdown_(self) -> str:
        return "**" + self.banner() + "**"

    def __repr__(self) -> str:
        return self.banner()


def notebook_of(lesson_id: str, here: Path | None = None) -> Path | None:
    """Where your saved notebook of `lesson_id` is, or None (see the module docstring for the search order).

    `here`: the folder of the running notebook (default: the working directory, which is that folder in Jupyter).
    """
    name = Path(lesson_id) / f"{lesson_id}.ipynb"
    folders = []
    if os.environ.get(WORK_ENV):
        folders.append(Path(os.environ[WORK_ENV]).expanduser())
    folders.append((here or Path.cwd()).resolve().parent)
    folders.append(_REPO_WORK)
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    return None


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


def load_your_code(*lesson_ids: str, here: Path | None = None, graded: bool | None = None) -> YourCode:
    """Your answers of `lesson_ids` (in that order) where they pass their visible checks, the references elsewhere.

    `here`: the running notebook's folder (its parent is where the other lessons' folders are looked for);
    `graded`: True while nbgrader grades (then everything is the reference); default: read from the environment.
    """
    if graded is None:
        graded = bool(os.environ.get("NBGRADER_EXECUTION"))
    result = YourCode()
    for lesson_id in lesson_ids:
        lesson = manifest.lesson(lesson_id)
        path = None if graded else notebook_of(lesson_id, here)
        cells: dict[str, str] = {}
        missing = "graded runs use the course's references" if graded else f"no saved notebook {lesson_id}.ipynb found"
        if path is not None:
            try:
                cells = _answer_cells(path)
                missing = ""
            except Exception as exc:  # noqa: BLE001 - an unreadable file is reported, never fatal
                missing = f"{path.name} could not be read ({type(exc).__name__})"
        for exercise in lesson.exercises:
            reason = missing or _try_answer(lesson, exercise, cells, result.objects)
            for name in exercise.names:
                if reason:  # the exercise's own reference (lesson 09's GPT lives in course_lib.gpt, not its unit)
                    result.objects[name] = _reference_of(lesson_id, name)
                result.choices[name] = Choice(name, lesson_id, not reason, reason)
    return result


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

    `built_on`: the names of `yours` an answer is built from (`TransformerBlock` for lesson 09's GPT). Where an
    answer falls back, they are listed as the course's too, with the reason: the reference that then runs is
    built from the course's classes, not from yours. While nbgrader grades, every answer is the reference.
    """
    if graded is None:
        graded = bool(os.environ.get("NBGRADER_EXECUTION"))
    lesson = manifest.lesson(lesson_id)
    result = YourCode(dict(yours.objects), dict(yours.choices))
    for exercise in lesson.exercises:
        if not all(name in answers for name in exercise.names):
            continue
        objects = [answers[name] for name in exercise.names]
        problem = "graded runs use the course's references" if graded else _visible_check(lesson, exercise, objects)
        if problem and "not written yet" in problem:
            problem = "not written yet"
        for name, obj, path in zip(exercise.names, objects, exercise.references, strict=True):
            module, _, attribute = path.rpartition(".")
            result.objects[name] = getattr(importlib.import_module(module), attribute) if problem else obj
            result.choices[name] = Choice(name, lesson_id, not problem, problem)
        if problem:
            for name in built_on:
                if name in result.choices:
                    below = result.choices[name]
                    reason = f"the course's `{exercise.name}` is built on the course's classes"
                    result.choices[name] = Choice(name, below.lesson, False, reason)
                    result.objects[name] = _reference_of(below.lesson, name)
    return result


def _reference_of(lesson_id: str, name: str) -> Any:
    """The course's reference of `name`, an exercise name of `lesson_id`."""
    lesson = manifest.lesson(lesson_id)
    for exercise in lesson.exercises:
        if name in exercise.paths:
            module, _, attribute = exercise.paths[name].rpartition(".")
            return getattr(importlib.import_module(module), attribute)
    raise KeyError(f"{lesson_id} has no exercise that defines {name!r}")
