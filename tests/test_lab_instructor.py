"""The instructor's JupyterLab (`make lab-instructor`: nbgrader's extensions, started in the course root), in
headless Chromium: formgrader's buttons change no committed file.

formgrader's *Generate* ("generate student version") runs nbgrader's generate_assignment inside the server, which
deletes the lesson's student-version folder and writes it anew; into the committed `release/` it wrote nbgrader's
bare output (lesson 07: 176 KB → 46 KB, its diagram a broken link to a file beside it). The course's
nbgrader_config.py sends the server's student versions to the git-ignored `formgrader_release/` and inlines the
diagrams in every generated student version.

Needs Debian's `chromium` (`apt-get install chromium`); skipped with that reason otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.workflow.nbgrader_plugins import FORMGRADER_RELEASE
from tests.nbtools import ROOT, course_copy
from tests.test_lab_rendering import CHROMIUM, _browser, jupyter_lab

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]

LESSON = "07_encoder_decoder"  # a lesson with a diagram, which nbgrader's bare output turns into a broken link


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def course(tmp_path):
    """The course root as in the repository (nbgrader_config.py, the lesson's source and committed release, the
    repository's images/ beside it), in a temporary folder."""
    return course_copy(tmp_path, LESSON)


def test_formgraders_generate_button_changes_no_committed_file(course):
    committed = {part: _files(course / part) for part in ("source", "release")}
    committed["nbgrader_config.py"] = (course / "nbgrader_config.py").read_bytes()
    # As `make lab-instructor` starts it (the next test): the environment's programs first on the PATH.
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    with jupyter_lab(course, env) as url, _browser() as page:
        page.goto(f"{url}/formgrader")
        row = page.locator("tr", has=page.locator("td", has_text=LESSON)).first
        row.wait_for(timeout=90_000)
        row.locator("td.assign a").click()  # the "generate student version" button
        done = page.get_by_text(f"Successfully created the student version of '{LESSON}'")
        try:
            done.wait_for(timeout=120_000)
        except Exception:
            page.screenshot(path="/tmp/formgrader_generate.png", full_page=True)
            raise
    now = {part: _files(course / part) for part in ("source", "release")}
    now["nbgrader_config.py"] = (course / "nbgrader_config.py").read_bytes()
    assert now == committed
    # The button's student version is the course's, diagrams inlined: what `make release` committed.
    generated = (course / FORMGRADER_RELEASE / LESSON / f"{LESSON}.ipynb").read_bytes()
    assert b"data:image/png;base64," in generated
    assert generated == committed["release"][f"{LESSON}/{LESSON}.ipynb"]


def test_make_lab_instructor_puts_the_environments_programs_first():
    """formgrader makes a new gradebook with nbgrader's `alembic` program: without the environment's bin/ on the
    PATH, its pages stay empty on a course that has no gradebook yet."""
    # --no-print-directory: under `make test` this make is nested and would end with "make[1]: Leaving directory"
    command = ["make", "--no-print-directory", "-n", "lab-instructor"]
    shown = subprocess.run(command, cwd=ROOT.parent, capture_output=True, text=True).stdout
    assert f'PATH="{ROOT.parent / ".venv" / "bin"}:$PATH"' in shown.splitlines()[-1]
