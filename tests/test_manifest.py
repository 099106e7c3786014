"""The lesson manifest is the one place the course's facts are written; the rest must agree with it."""

from __future__ import annotations

import importlib
import re

import pytest

from course_lib import manifest
from tests.nbtools import LESSONS, ROOT, grade_id, read, source_path

README = (ROOT.parent / "README.md").read_text(encoding="utf-8")


def test_every_lesson_notebook_has_a_manifest_entry_and_back():
    assert sorted(entry.id for entry in manifest.LESSONS) == sorted(LESSONS)


@pytest.mark.parametrize("lesson", LESSONS)
def test_exercises_match_the_answer_cells_and_the_graders(lesson):
    entry = manifest.lesson(lesson)
    nb = read(source_path(lesson))
    answers = [grade_id(c) for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert [e.name for e in entry.exercises] == answers
    grader = importlib.import_module(entry.grader)
    references = importlib.import_module(entry.references)
    for exercise in entry.exercises:
        assert callable(getattr(grader, f"check_{exercise.name}")), exercise.name
        for name in exercise.names:
            assert getattr(references, name).__name__ == name


@pytest.mark.parametrize("entry", manifest.LESSONS, ids=lambda e: e.id)
def test_the_readme_table_row_agrees(entry):
    row = re.search(rf"^\| `{entry.id}` \| (.*?) \| (.*?) \|", README, re.M)
    assert row, f"README has no row for {entry.id}"
    assert row.group(1) == entry.title
    assert re.findall(r"`(\w+)`", row.group(2)) == list(entry.modules)


def test_an_unknown_lesson_is_named():
    with pytest.raises(KeyError, match="unknown lesson '99_x'"):
        manifest.lesson("99_x")
