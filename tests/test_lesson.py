"""The notebook helpers: start_lesson's environment report, offline charts, self-grading switches."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import pytest

from course_lib import lesson
from tests.nbtools import grade_id, read, release_path, solved


def test_start_lesson_reports_data_and_seeds(monkeypatch):
    env = lesson.start_lesson("01_tokenization", data=["the-verdict.txt"], seed=3)
    import torch

    first = torch.rand(1)
    lesson.start_lesson("01_tokenization", data=[], seed=3)
    assert torch.equal(first, torch.rand(1))
    assert env.ok and "the-verdict.txt" in env._repr_markdown_() and "ready" in repr(env)


def test_start_lesson_names_a_missing_file_without_raising():
    env = lesson.start_lesson("00_welcome", data=["no-such-file.txt"])
    assert not env.ok and "no-such-file.txt" in " ".join(env.problems) and "missing" in env._repr_markdown_()


def test_charts_render_offline_in_jupyterlab():
    lesson.start_lesson("00_welcome")
    bundle = alt.Chart(pd.DataFrame({"a": [1, 2]})).mark_point().encode(x="a")._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.vegalite.v5+json" in data and "text/html" not in data  # no CDN script
    # JupyterLab's own bundle carries the renderer for exactly that MIME type.
    import jupyterlab

    static = Path(jupyterlab.__file__).parent / "static"
    if not static.exists():
        import sys

        static = Path(sys.prefix) / "share" / "jupyter" / "lab" / "static"
    assert any("vnd.vegalite.v5+json" in p.read_text(errors="ignore") for p in static.glob("jlab_core*.js"))


def test_self_grading_is_off_under_nbgrader_and_on_request(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert lesson.grade_this_notebook("00_welcome") is None
    monkeypatch.delenv("NBGRADER_EXECUTION")
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    assert "switched off" in lesson.grade_this_notebook("00_welcome")


def test_a_small_run_changes_sizes_only(monkeypatch):
    """COURSE_SMALL_RUN=1 (the Run-All test) gives the lessons' smallest settings but is not nbgrader: self-grading
    still answers, and a failing visible check would still show its message instead of stopping Run All."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert not lesson.autograding()
    monkeypatch.setenv("COURSE_SMALL_RUN", "1")
    assert lesson.autograding() and not lesson._under_nbgrader()
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    assert "switched off" in lesson.grade_this_notebook("00_welcome")


def test_the_last_cell_grades_the_saved_notebook(monkeypatch, tmp_path):
    # JupyterLab tells the kernel where its notebook is saved (JPY_SESSION_NAME); the last cell grades that file.
    import nbformat

    from tests.nbtools import solved

    path = tmp_path / "my copy of lesson 00.ipynb"
    nbformat.write(solved("00_welcome"), path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("COURSE_SELF_GRADE", raising=False)
    report = lesson.grade_this_notebook("00_welcome")
    assert report.lesson == "00_welcome" and report.score == report.max_score == 15
    assert "**Lesson 00_welcome: 15 / 15 points**" in report._repr_markdown_()


def test_the_environment_table_appears_only_with_data_files():
    bare = lesson.start_lesson("06_transformer_blocks", data=[])._repr_markdown_()
    assert "| data file | status |" not in bare and "**Lesson 06_transformer_blocks**" in bare
    with_data = lesson.start_lesson("01_tokenization", data=["the-verdict.txt"])._repr_markdown_()
    assert "| data file | status |" in with_data and "`the-verdict.txt`" in with_data


@pytest.fixture
def shell(monkeypatch, tmp_path):
    """An IPython shell as a learner's kernel has one, with lesson 00 saved as released (no answer written) where
    JupyterLab would tell the kernel it is."""
    from IPython.core.interactiveshell import InteractiveShell

    path = tmp_path / "00_welcome.ipynb"
    nbformat.write(read(release_path("00_welcome")), path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("COURSE_SELF_GRADE", raising=False)
    made = InteractiveShell.instance()
    lesson._RUNS.clear()
    try:
        yield made, path
    finally:
        lesson._RUNS.clear()
        InteractiveShell.clear_instance()


def _answer_cell(path, name):
    return next(c for c in read(path).cells if grade_id(c) == name)


@pytest.mark.slow  # runs nbgrader
def test_the_last_cell_asks_to_save_when_the_saved_answer_is_not_what_ran(shell):
    """A correct answer run but not saved: the self-grade cell says so instead of grading the stale file (0 points
    and "not written yet"), and once the notebook is saved it grades the answer."""
    made, path = shell
    made.run_cell('from course_lib.lesson import start_lesson\nstart_lesson("00_welcome")', cell_id="00-002")
    cell = _answer_cell(path, "count_characters")
    answer = solved("00_welcome").cells[[grade_id(c) for c in solved("00_welcome").cells].index("count_characters")]
    assert made.run_cell(answer.source, store_history=True, cell_id=cell.id).success
    said = lesson.grade_this_notebook("00_welcome")
    assert isinstance(said, lesson.NotSaved) and said.exercises == ["count_characters"]
    text = said._repr_markdown_()
    assert "your saved notebook differs from what you ran in `count_characters`" in text and "Ctrl+S" in text
    saved = read(path)  # Ctrl+S
    next(c for c in saved.cells if grade_id(c) == "count_characters").source = answer.source
    nbformat.write(saved, path)
    report = lesson.grade_this_notebook("00_welcome")
    rows = report.by_name()
    assert rows["count_characters"].score == rows["count_characters"].max_score > 0
    assert rows["normalize_rows"].score == 0  # never written: graded as saved, without a word about saving


def test_without_cell_ids_the_kernels_history_tells_what_ran(shell):
    """A front end that sends no cell id (or a kernel where the set-up cell did not run): the last input that defines
    the exercise's name is what ran."""
    made, path = shell
    made.run_cell("def next_token_pairs(ids):\n    return list(zip(ids, ids[1:]))\n", store_history=True)
    assert lesson.unsaved_exercises(path, "00_welcome") == ["next_token_pairs"]
    made.run_cell(_answer_cell(path, "next_token_pairs").source, store_history=True)  # the stub, as saved
    assert lesson.unsaved_exercises(path, "00_welcome") == []
