"""Every lesson's instructor source executes top to bottom, headless, with no error (nbclient), and its outputs
show what its text says they show (tests/claims/)."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.claims import check_claims
from tests.nbtools import LESSONS, source_path

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("lesson", LESSONS)
def test_instructor_source_executes(lesson, monkeypatch):
    # The kernel inherits this environment: no self-grading run inside the test, and no autograder settings.
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    path = source_path(lesson)
    nb = nbformat.read(path, as_version=4)
    # 180 s a cell (the slowest takes ~15 s). Generous, and it bounds a stall seen once in a CI-like run: the kernel
    # sat idle while nbclient waited ~10 minutes for a reply, then the lesson passed (it looks like nbclient#312).
    client = NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the cell on the first error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    setup = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup")
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in setup.outputs)
    assert "ready" in shown, f"the set-up cell reported a problem: {shown}"
    assert os.environ["COURSE_SELF_GRADE"] == "off"
    # The lesson's claims about computed results ("far closer to village than to city") against these outputs.
    check_claims(lesson, nb)
