"""Every lesson's instructor source executes top to bottom, headless, with no error (nbclient), and its outputs
show what its text says they show (tests/claims/): each claim holds on the real outputs, and fails on them once
altered by each of its breaks. Each lesson executes once; its three tests share the result (one xdist group)."""

from __future__ import annotations

import nbformat
import pytest

from course_lib.workflow.course import grade_id
from tests.claims import check_breaks, check_claims
from tests.nbtools import LESSONS, execute, source_path

pytestmark = pytest.mark.slow


@pytest.fixture(
    scope="module",
    params=[pytest.param(lesson, marks=pytest.mark.xdist_group(f"execute-{lesson}")) for lesson in LESSONS],
)
def executed(request):
    """(lesson, its instructor source executed by nbclient)."""
    lesson = request.param
    path = source_path(lesson)
    nb = nbformat.read(path, as_version=4)
    with pytest.MonkeyPatch.context() as env:
        # The kernel inherits this environment: no self-grading run inside the test, and no autograder settings.
        env.setenv("COURSE_SELF_GRADE", "off")
        env.delenv("NBGRADER_EXECUTION", raising=False)
        # 600 s a cell: a backstop that a pass never depends on. The slowest cell, lesson 10's training of its small
        # GPT-2, is about 75 s of one core's work and several times that on a loaded machine; the limit stops a hung
        # cell, not a slow one. The watchful client stops the stall fresh clones hit now and then, where a finished
        # cell's reply was read only once this whole limit had run out.
        execute(nb, timeout=600, folder=path.parent)  # raises CellExecutionError naming the cell on the first error
    return lesson, nb


def _shown(nb, name: str) -> str:
    cells = [c for c in nb.cells if grade_id(c) == name]
    assert len(cells) == 1, f"expected one cell with grade_id {name!r}, found {len(cells)}"
    return "".join(o.get("data", {}).get("text/plain", "") for o in cells[0].outputs)


def test_instructor_source_executes(executed):
    lesson, nb = executed
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    shown = _shown(nb, "setup")
    assert "ready" in shown, f"the set-up cell reported a problem: {shown}"
    # The kernel did inherit COURSE_SELF_GRADE=off: the self-grading cell says so instead of grading the notebook.
    shown = _shown(nb, "self_grade")
    assert "Self-grading is switched off here" in shown, f"{lesson}: the self-grading cell shows {shown!r}"


def test_outputs_show_what_the_text_says(executed):
    # The lesson's claims about computed results ("far closer to village than to city") against these outputs.
    check_claims(*executed)


def test_each_claim_fails_when_its_output_is_altered(executed):
    # Each claim's breaks (a value changed in the output it reads) must make its check fail: a check that cannot
    # fail on these very outputs shows nothing.
    check_breaks(*executed)
