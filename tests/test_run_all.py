"""A learner's "Run All Cells" on a fresh student version: every cell runs, each unfinished exercise shows its
feedback, and nbgrader still scores those exercises 0 (course_lib.grading.kit.notebook).

The lessons run with their smallest settings here (COURSE_SMALL_RUN=1: sizes only, the learner's kernel otherwise):
what is checked is that cells run past unfinished exercises; the full-size run of every lesson, with its claims, is
tests/test_notebooks_execute.py."""

from __future__ import annotations

import nbformat
import pytest

from course_lib import manifest
from course_lib.grading.kit.notebook import NOTE
from course_lib.workflow.course import grade_id
from course_lib.workflow.selfgrade import grade_notebook
from tests.nbtools import LESSONS, execute, release_path

pytestmark = pytest.mark.slow


def _run_all(lesson: str, env: dict[str, str | None]):
    nb = nbformat.read(release_path(lesson), as_version=4)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        path = release_path(lesson).parent
        execute(nb, timeout=600, folder=path)
    return nb


def _errors(cell) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error"]


@pytest.mark.parametrize("lesson", [pytest.param(x, marks=pytest.mark.xdist_group(f"run-all-{x}")) for x in LESSONS])
def test_run_all_goes_past_unfinished_exercises_and_shows_their_feedback(lesson, tmp_path):
    learner = {"COURSE_SELF_GRADE": "off", "NBGRADER_EXECUTION": None, "COURSE_SMALL_RUN": "1"}
    nb = _run_all(lesson, learner)  # nbclient raises CellExecutionError on a cell whose reply is an error
    exercises = [e.name for e in manifest.lesson(lesson).exercises]
    for item in manifest.lesson(lesson).exercises:
        (check,) = [c for c in nb.cells if grade_id(c) == f"test_{item.name}"]
        errors = _errors(check)
        assert len(errors) == 1 and "not written yet" in errors[0], (item.name, errors)
        # The message names the exercise, or the function of it that is not written (split_merge_heads: split_heads).
        assert any(f"[{name}]" in errors[0] for name in (item.name, *item.names)), (item.name, errors)
        assert NOTE in "".join(check.outputs[0].traceback)
    checks = {f"test_{name}" for name in exercises}
    others = [(grade_id(c), _errors(c)) for c in nb.cells if grade_id(c) not in checks and _errors(c)]
    assert others == []  # only the visible checks show errors; the lesson's own cells all ran
    # The last cell ran too (it says self-grading is off here).
    assert "Self-grading is switched off" in str(nb.cells[-1].outputs)

    # That notebook, saved as a learner would and graded by nbgrader: every unfinished exercise scores 0. One lesson
    # is enough here (an autograde costs ~40 s); the round trips grade every lesson's untouched student version.
    if lesson != "00_welcome":
        return
    saved = tmp_path / f"{lesson}.ipynb"
    nbformat.write(nb, saved)
    report = grade_notebook(saved, lesson)
    assert [(e.name, e.score) for e in report.exercises] == [(name, 0) for name in exercises]
    assert all("not written yet" in " ".join(e.messages) for e in report.exercises), str(report)


def test_under_nbgrader_a_failing_check_still_fails_its_cell():
    """With NBGRADER_EXECUTION set (as nbgrader sets it), the first unfinished exercise's check raises."""
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError, match="not written yet"):
        _run_all("00_welcome", {"COURSE_SELF_GRADE": "off", "NBGRADER_EXECUTION": "autograde"})
