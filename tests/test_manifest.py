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
    importlib.import_module(entry.references)  # what the lesson binds as `ref` is a module
    for exercise in entry.exercises:
        assert callable(getattr(grader, f"check_{exercise.name}")), exercise.name
        for name, path in exercise.paths.items():
            module, _, attribute = path.rpartition(".")
            assert getattr(importlib.import_module(module), attribute).__name__ == name, path


def test_an_exercise_names_its_reference_or_gets_its_lessons():
    lesson = manifest.Lesson(
        "98_x",
        "x",
        modules=(),
        references="course_lib.attention",
        grader="course_lib.grading.attention",
        exercises=(
            manifest.Exercise("causal_mask"),
            manifest.Exercise("pair", defines=("split_heads", "merge_heads")),
            manifest.Exercise("top_p_filter", references=("course_lib.generate.top_p_filter",)),
        ),
    )
    assert [e.paths for e in lesson.exercises] == [
        {"causal_mask": "course_lib.attention.causal_mask"},
        {"split_heads": "course_lib.attention.split_heads", "merge_heads": "course_lib.attention.merge_heads"},
        {"top_p_filter": "course_lib.generate.top_p_filter"},
    ]
    with pytest.raises(ValueError, match="one reference per name"):
        manifest.Exercise("pair", defines=("a", "b"), references=("course_lib.x.a",))


def test_lesson_10_points_each_exercise_at_where_its_reference_is_defined():
    paths = {n: p for e in manifest.lesson("10_gpt2").exercises for n, p in e.paths.items()}
    assert paths == {
        "gpt2_parameter_count": "course_lib.gpt2.gpt2_parameter_count",
        "load_gpt2_weights": "course_lib.gpt2_weights.load_gpt2_weights",
        "cosine_lr": "course_lib.train.cosine_lr",
        "top_p_filter": "course_lib.generate.top_p_filter",
        "attend_with_cache": "course_lib.multihead.attend_with_cache",
        "forward_with_cache": "course_lib.gpt.forward_with_cache",
    }
    assert manifest.lesson("10_gpt2").references == "course_lib.gpt2"
    # load_gpt2_weights loads into lesson 09's GPT: a graded answer's sandbox has the course's.
    assert "from course_lib.gpt import GPT\n" in manifest.lesson("10_gpt2").sandbox_preamble


@pytest.mark.parametrize("entry", manifest.LESSONS, ids=lambda e: e.id)
def test_the_readme_table_row_agrees(entry):
    row = re.search(rf"^\| `{entry.id}` \| (.*?) \| (.*?) \|", README, re.M)
    assert row, f"README has no row for {entry.id}"
    assert row.group(1) == entry.title
    assert re.findall(r"`(\w+)`", row.group(2)) == list(entry.modules)


def test_an_unknown_lesson_is_named():
    with pytest.raises(KeyError, match="unknown lesson '99_x'"):
        manifest.lesson("99_x")


def test_an_exercise_builds_on_exercises_of_its_lesson_or_of_earlier_ones():
    seen: set[str] = set()
    found = 0
    for lesson in manifest.LESSONS:
        for exercise in lesson.exercises:
            unknown = [name for name in exercise.builds_on if name not in seen]
            assert not unknown, f"{lesson.id} {exercise.name} builds on {unknown}, no earlier exercise's names"
            found += len(exercise.builds_on)
            seen.update(exercise.names)
    assert found >= 4  # the block, the encoder layer and the GPT say what they are built from


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_earlier_lessons_a_lesson_runs_are_the_ones_its_your_code_calls_name(lesson):
    """`your_lessons` decides whether the set-up cell offers Google Drive on Colab: it must be what the lesson reads."""
    calls = [
        re.findall(r'"(\d\d_\w+)"', call)
        for cell in read(source_path(lesson)).cells
        if cell.cell_type == "code"
        for call in re.findall(r"your_code\(([^)]*)\)", cell.source)
    ]
    read_lessons = tuple(dict.fromkeys(lesson_id for call in calls for lesson_id in call))
    assert read_lessons == manifest.lesson(lesson).your_lessons
