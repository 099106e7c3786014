"""Grade one notebook with nbgrader as an instructor's grading does, and report each exercise's score and messages.

`grade_notebook(path)` is what `make grade NB=...`, `python -m course_lib grade ...` and the last cell of every
lesson (`course_lib.lesson.grade_this_notebook`) run. It copies the lesson's instructor source (hidden tests
included) into a temporary nbgrader course, or in a students' hand-out, which has none, a source made from the
student version (visible checks only, and the report says so); reads the notebook as an instructor's class run reads
it (any saved form; an answer cell pasted twice, split or stripped of its marks repaired and named in the report,
in a copy: the learner's file is never changed); autogrades the notebook there as student
"learner" (the course's trusted grading: each answer cell on its own, in its own process); reads the scores from
the gradebook and the grader's messages from the graded notebook, and deletes the temporary course.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from course_lib.workflow.course import (
    LEARNER,
    VISIBLE_ONLY,
    CourseError,
    course_root,
    generated_course,
    grade_id,
    has_instructor_source,
    lesson_notebook,
    run_nbgrader,
)
from course_lib.workflow.course import lesson_ids as _lesson_ids
from course_lib.workflow.nbgrader_plugins import FLAG_MARKER
from course_lib.workflow.submissions import LessonCells, Repaired, Unreadable, read_submission

__all__ = ["READ_AS", "ExerciseResult", "GradeReport", "grade_notebook", "identify_lesson"]

# How a report begins the note on a notebook that was read with repairs (as an instructor's class run reads it).
READ_AS = "before grading, your notebook was read as your instructor's grading reads it: "


@dataclass
class ExerciseResult:
    name: str
    score: float
    max_score: float
    messages: list[str] = field(default_factory=list)


@dataclass
class GradeReport:
    lesson: str
    exercises: list[ExerciseResult]
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    def by_name(self) -> dict[str, ExerciseResult]:
        return {e.name: e for e in self.exercises}

    def __str__(self) -> str:
        width = max([len(e.name) for e in self.exercises] + [8])
        lines = [f"Lesson {self.lesson}: {self.score:g} / {self.max_score:g} points", ""]
        for e in self.exercises:
            mark = "ok " if e.score == e.max_score else "-- "
            lines.append(f"  {mark}{e.name:<{width}}  {e.score:g} / {e.max_score:g}")
            lines.extend(f"       {m}" for m in e.messages)
        for flag in self.flags:
            lines.append(f"\n  Note: {flag}")
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        rows = ["| exercise | score | what the grader says |", "|---|---|---|"]
        for e in self.exercises:
            said = "<br>".join(m.replace("|", "\\|") for m in e.messages) or ("✓" if e.score == e.max_score else "")
            rows.append(f"| `{e.name}` | {e.score:g} / {e.max_score:g} | {said} |")
        text = f"**Lesson {self.lesson}: {self.score:g} / {self.max_score:g} points**\n\n" + "\n".join(rows)
        if self.flags:
            text += "\n\n" + "\n".join(f"> **Note:** {f}" for f in self.flags)
        return text


def _read_submission(path: Path, cells: LessonCells | None = None) -> Repaired:
    """The notebook at `path` as the class command reads it (`submissions.read_submission`): any saved form (a
    byte-order mark, Windows line endings, older nbformat, Colab's or VS Code's) read as if clean; with the lesson's
    `cells`, clear damage to its answer cells repaired and named (a pasted copy, a split cell, stripped marks)."""
    if not path.is_file():
        raise CourseError(f"no notebook at {path}. Save your notebook first, or check the path.")
    try:
        return read_submission(path.read_bytes(), cells or LessonCells(frozenset()))
    except Unreadable as exc:
        raise CourseError(
            f"{path} is not a readable notebook ({exc}). Save it again from Jupyter, or re-download the lesson."
        ) from None


def _exercise_names(nb) -> list[str]:
    return [grade_id(c) for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution") and grade_id(c)]


def identify_lesson(nb, path: Path, lesson: str | None, root: Path) -> str:
    """Which lesson a submission belongs to; a clear error when it belongs to none (or to another one)."""
    known = _lesson_ids(root)
    ids = {grade_id(c) for c in nb.cells} - {None}
    matches = {}
    for candidate in known:
        source = nbformat.read(lesson_notebook(candidate, root), as_version=4)
        source_ids = {grade_id(c) for c in source.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")}
        source_ids |= set(_exercise_names(source))
        matches[candidate] = len(ids & source_ids)
    if lesson is None:
        stem = path.stem
        lesson = stem if stem in known else max(matches, key=matches.get, default=None)
    if lesson not in known:
        raise CourseError(f"unknown lesson {lesson!r}; the course has {', '.join(known)}.")
    if matches.get(lesson, 0) == 0:
        best = max(matches, key=matches.get, default=None)
        hint = f" It looks like lesson {best}." if best and matches[best] else ""
        raise CourseError(
            f"{path.name} has none of lesson {lesson}'s exercise or test cells, so it cannot be graded as "
            f"{lesson}.{hint} Did you pick the right file?"
        )
    return lesson


def _messages(cell) -> list[str]:
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            name, value = output.get("ename", "Error"), output.get("evalue", "")
            if name == "GradingError":
                out.append(re.sub(r"^\[\w+\] ", "", value))  # the row already names the exercise
            else:
                out.append(f"{name}: {value}")
    return out


def grade_notebook(
    path: str | Path, lesson: str | None = None, *, timeout: int | None = None, root: Path | None = None
) -> GradeReport:
    """Autograde the notebook at `path` (see module docstring). `timeout` overrides the per-cell limit."""
    started = time.perf_counter()
    root = root or course_root()
    path = Path(path)
    lesson = identify_lesson(_read_submission(path).nb, path, lesson, root)
    with generated_course(lesson, root) as tmp:
        released = nbformat.read(tmp / "release" / lesson / f"{lesson}.ipynb", as_version=4)
        repaired = _read_submission(path, LessonCells.from_notebook(lesson, released))
        target = tmp / "submitted" / LEARNER / lesson
        target.mkdir(parents=True)
        nbformat.write(repaired.nb, target / f"{lesson}.ipynb")  # a copy: the learner's file is never changed
        args = ["autograde", lesson, "--student", LEARNER, "--force"]
        if timeout is not None:
            args.append(f"--Execute.timeout={int(timeout)}")
        result = run_nbgrader(args, tmp)
        graded_path = tmp / "autograded" / LEARNER / lesson / f"{lesson}.ipynb"
        if not graded_path.is_file():
            raise CourseError(f"nbgrader could not grade {path.name}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        graded = nbformat.read(graded_path, as_version=4)
        report = _report(lesson, graded, tmp, time.perf_counter() - started)
    if repaired.repairs:
        report.flags.append(READ_AS + "; ".join(line.rstrip(".") for line in repaired.repairs) + ".")
    if not has_instructor_source(lesson, root):  # a students' hand-out: graded on the visible checks only
        report.flags.insert(0, VISIBLE_ONLY)
    return report


def _report(lesson: str, graded, tmp: Path, seconds: float) -> GradeReport:
    names = _exercise_names(graded)
    by_cell = {grade_id(c): c for c in graded.cells if grade_id(c)}
    results = {name: ExerciseResult(name, 0.0, 0.0) for name in names}
    with Gradebook(f"sqlite:///{tmp / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(lesson, lesson, LEARNER)
        flagged = submission.flagged
        for grade in sorted(submission.grades, key=lambda g: g.name):
            if not grade.name.startswith("test_"):
                continue
            rest = grade.name.removeprefix("test_")
            owner = (
                max((n for n in names if rest == n or rest.startswith(n + "_")), key=len, default=None)
                or results.setdefault(rest, ExerciseResult(rest, 0.0, 0.0)).name
            )
            result = results[owner]
            result.score += grade.score or 0.0
            result.max_score += grade.max_score or 0.0
            for message in _messages(by_cell.get(grade.name, {})):
                if message not in result.messages:
                    result.messages.append(message)
    flags = []
    if flagged:
        warning = next((c.source for c in graded.cells if FLAG_MARKER in c.get("source", "")), "")
        lines = [line[2:] for line in warning.splitlines() if line.startswith("- ")]
        flags.append("your instructor's grading would flag this notebook: " + "; ".join(lines))
    return GradeReport(lesson, [r for r in results.values() if r.max_score > 0], flags, seconds)
