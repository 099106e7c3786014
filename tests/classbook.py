"""A small gradebook built with nbgrader's own API in a second: the class files (grades, report, history) are
tested on it without running nbgrader's autograde. The real runs are in tests/test_class_command.py and
tests/test_term.py."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from course_lib import manifest
from tests.nbtools import solved

LESSON = "00_welcome"


def exercises(lesson: str = LESSON) -> list[str]:
    return [e.name for e in manifest.lesson(lesson).exercises]


def build(course: Path, scores: dict[str, dict[str, float]], lesson: str = LESSON) -> Path:
    """A gradebook in `course` with `lesson` (two points visible, one hidden per exercise) and a graded submission
    per student: `scores[student][exercise]` points of 3, the visible cell's first. Each student's submitted and
    graded notebook is the solved lesson (what the report reads for remarks and messages)."""
    course.mkdir(parents=True, exist_ok=True)
    # a new gradebook is stamped by nbgrader running `alembic`, found on PATH beside this interpreter
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's add_submission warns of objects "not in session"
        gb.update_or_create_assignment(lesson)
        gb.add_notebook(lesson, lesson)
        for name in exercises(lesson):
            gb.add_grade_cell(f"test_{name}", lesson, lesson, max_score=2, cell_type="code")
            gb.add_grade_cell(f"test_{name}_hidden", lesson, lesson, max_score=1, cell_type="code")
        for student, got in scores.items():
            gb.update_or_create_student(student)
            submission = gb.add_submission(lesson, student)
            for grade in submission.notebooks[0].grades:
                exercise = grade.name.removeprefix("test_").removesuffix("_hidden")
                points = got.get(exercise, 3)
                grade.auto_score = min(points, 1) if grade.name.endswith("_hidden") else max(points - 1, 0)
            gb.db.commit()
            for step in ("submitted", "autograded"):
                folder = course / step / student / lesson
                folder.mkdir(parents=True, exist_ok=True)
                nbformat.write(solved(lesson), folder / f"{lesson}.ipynb")
    return course
