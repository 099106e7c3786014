"""The notebook helpers: start_lesson's environment report, offline charts, self-grading switches."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from course_lib import lesson


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
