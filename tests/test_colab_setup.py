"""The Colab branch of every lesson's set-up cell, run for real on a stand-in for a Colab machine.

Colab itself cannot be reached from here. What the branch does can: it clones the repository, installs
`course_lib` with pip into an interpreter that already has torch (and, on Colab, most of our other
dependencies), puts the clone on `sys.path`, and starts the lesson, which checks the lesson's data files
(committed in the clone).

The stand-in is a fresh virtual environment, without pip or packages of its own, that sees this project's
`.venv` packages as pre-installed ones (torch 2.13.0 included), but not `course_lib`. The cell's own text runs
unchanged except for two strings: the repository URL becomes this checkout (`file://`, so its committed
HEAD is cloned) and `/content/course` a temporary folder. pip runs with `PIP_NO_INDEX=1`, so any attempt to
download or reinstall torch — or anything else — fails the test, and with `PIP_REPORT` it writes what it
installed, which must be `course_lib` alone. The lesson's data files are committed in `data/`, so the clone
has them: downloads go to an unreachable proxy, and no mirror is given.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import nbformat
import pytest

from course_lib import manifest
from course_lib.workflow.course import SETUP_ID, repo_url
from tests.nbtools import ROOT, grade_id, release_path

REPO = ROOT.parent
LESSON = "02_embeddings"  # a lesson that needs three data files
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the repository"),
    pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs a git checkout of the course"),
]


def _colab_cell(lesson: str, clone: Path) -> str:
    """The lesson's set-up cell as a script for the stand-in, with the cell's last value printed as Jupyter would."""
    nb = nbformat.read(release_path(lesson), as_version=4)
    source = next(c.source for c in nb.cells if grade_id(c) == SETUP_ID)
    assert repo_url() in source and "/content/course" in source
    source = source.replace(repo_url(), REPO.as_uri()).replace("/content/course", str(clone))
    tree = ast.parse(source)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr), "the set-up cell should end with start_lesson(...), whose value is shown"
    tree.body[-1] = ast.Expr(
        ast.Call(ast.Name("print", ast.Load()), [ast.Call(ast.Name("repr", ast.Load()), [last.value], [])], [])
    )
    fake_colab = 'import sys, types\nsys.modules["google.colab"] = types.ModuleType("google.colab")\n'
    return fake_colab + ast.unparse(ast.fix_missing_locations(tree))


@pytest.fixture
def colab_python(tmp_path) -> Path:
    """A Python with this project's dependencies pre-installed (torch 2.13.0 among them) but not course_lib."""
    env_dir = tmp_path / "colab-env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    # A plain path line: the packages are importable, but .pth files there (our editable course_lib) are not run.
    Path(site, "preinstalled.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_colab_branch_installs_the_course_without_touching_torch_and_finds_the_data(colab_python, tmp_path):
    clone = tmp_path / "content" / "course"
    script = tmp_path / "setup_cell.py"
    script.write_text(_colab_cell(LESSON, clone))
    probe = "import course_lib, torch; print('course_lib at', course_lib.__file__); print('torch', torch.__version__)"
    # A PYTHONPATH of the caller's (a CI runner may point it at this checkout) is not part of a Colab machine.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE")}
    before = subprocess.run([colab_python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=clean)
    assert "No module named 'course_lib'" in before.stderr, "the stand-in must start without course_lib"

    report = tmp_path / "pip-report.json"
    env = dict(clean, PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_REPORT=str(report))
    # The clone's committed data/ must be enough: no mirror, no cache, and every download fails.
    empty = tmp_path / "no-mirror"
    empty.mkdir()
    env.update(COURSE_DATA_MIRROR=str(empty), http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    for name in ("COURSE_DATA_CACHE", "no_proxy", "NO_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
        env.pop(name, None)
    run = subprocess.run(
        [colab_python, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr

    installed = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installed == ["course_lib"], f"pip installed more than the course: {installed}"
    assert "ready" in run.stdout, run.stdout  # start_lesson's report: data present, seeds set
    assert all((clone / "data" / name).is_file() for name in manifest.lesson(LESSON).data)
    assert not (clone / "data" / "cache").exists(), "the committed data files should have been used as they are"

    after = subprocess.run([colab_python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=clean)
    assert after.returncode == 0, after.stderr
    assert f"course_lib at {clone / 'course_lib' / '__init__.py'}" in after.stdout  # a new kernel finds it too
    import torch

    assert f"torch {torch.__version__}" in after.stdout  # the pre-installed torch, untouched

    # Running the cell again (as a learner will, after a kernel restart) skips the install and still works.
    again = subprocess.run([colab_python, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "ready" in again.stdout, again.stdout + again.stderr
    assert "Cloning" not in again.stderr


def test_on_colab_the_last_cell_grades_the_notebook_the_browser_holds(monkeypatch, tmp_path):
    """On Colab the notebook is not a file the kernel can read: the last cell asks the browser for it."""
    import types

    from course_lib import lesson
    from tests.nbtools import solved

    asked = []

    def blocking_request(request, timeout_sec):  # what google.colab._message answers in a Colab runtime
        asked.append(request)
        return {"ipynb": json.loads(nbformat.writes(solved("00_welcome")))}

    colab = types.ModuleType("google.colab")
    colab._message = types.SimpleNamespace(blocking_request=blocking_request)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("COURSE_SELF_GRADE", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)  # no saved copy of the lesson here: the browser's copy is the one graded
    report = lesson.grade_this_notebook("00_welcome")
    assert asked == ["get_ipynb"]
    assert report.lesson == "00_welcome" and report.score == report.max_score == 15
