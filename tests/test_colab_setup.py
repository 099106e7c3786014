"""The Colab branch of every lesson's set-up cell, run for real on a stand-in for a Colab machine; and the lessons
that run a learner's earlier answers, executed there with the learner's copies in a stand-in Google Drive.

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

The lessons that run the learner's classes of earlier lessons (06, 07, 09, 10, 11, 12 and 13) are run here in a kernel
of such an interpreter, working in a stand-in `/content` with the learner's Google Drive faked (tests/colab.py): of
each lesson only the cells that choose the classes run (the set-up cell, the import cell and the cell that calls
`your_code`), the lessons one after the other in one kernel, as one Colab session would, with the Drive holding
several copies of a lesson, or nothing, or refused. Each of those lessons is also executed whole on the stand-in,
its earlier lessons solved in the Drive (tests/test_notebooks_execute.py).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib import manifest
from course_lib.workflow.course import SETUP_ID, repo_url
from tests.colab import (
    KERNEL,
    REPO,
    YOURS,
    colab_environment,
    drive_folder,
    make_content,
    new_session,
    on_colab,
    standin_python,
)
from tests.nbtools import execute, grade_id, read, release_path, solved

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
    return standin_python(tmp_path / "colab-env")


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


# ------------------------------------------------------------------------------------------------------------
# The learner's earlier lessons, found in their Google Drive

RUNS_EARLIER = [entry.id for entry in manifest.LESSONS if entry.your_lessons]
SAVED = sorted({earlier for entry in manifest.LESSONS for earlier in entry.your_lessons})


@pytest.fixture(scope="module")
def content(tmp_path_factory) -> Path:
    """A stand-in /content: the course in course/ (this checkout's files, what the set-up cell's clone holds), and a
    kernel of a stand-in Colab interpreter (`colab-standin`, on JUPYTER_PATH while a test runs)."""
    return make_content(tmp_path_factory.mktemp("colab"))


def _choosing_cells(lesson: str, content: Path) -> list:
    """The cells of `lesson` that choose the learner's classes: set-up (its /content moved to the stand-in), imports,
    and the cell that calls your_code."""
    cells = read(release_path(lesson)).cells
    at = next(i for i, c in enumerate(cells) if grade_id(c) == SETUP_ID)
    setup = on_colab(cells[at], content)
    chosen = next(c for c in cells if c.cell_type == "code" and "your_code(" in c.source)
    imports = cells[at + 1]
    return [setup, imports] + ([] if chosen is imports else [chosen])


def _run_on_colab(
    tmp_path, monkeypatch, content: Path, saved: dict, refuse: bool = False, lessons=tuple(RUNS_EARLIER)
) -> dict[str, list[str]]:
    """Execute the choosing cells of `lessons` (default: every lesson that runs earlier answers), in one stand-in
    Colab kernel, with `saved` ({file name: notebook}) in the learner's Drive folder; {lesson: [what each of its
    cells printed]}."""
    fake = new_session(content, tmp_path / "drive", saved, refuse)  # the learner's Google Drive, not yet mounted
    lessons = {lesson: _choosing_cells(lesson, content) for lesson in lessons}
    nb = nbformat.v4.new_notebook(cells=[fake, *(c for cells in lessons.values() for c in cells)])
    colab_environment(monkeypatch, content)
    # Colab's working folder; a backstop of 600 s for a hung cell, never reached by a slow one
    execute(nb, timeout=600, folder=content, kernel_name=KERNEL)
    printed = {}
    for lesson, cells in lessons.items():
        printed[lesson] = []
        for cell in cells:
            assert not [o for o in cell.outputs if o.output_type == "error"], (lesson, cell.outputs)
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            shown = "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)
            printed[lesson].append(text + shown)
    return printed


def test_on_colab_the_lessons_run_the_learners_classes_from_their_copies_in_drive(tmp_path, monkeypatch, content):
    assert sorted(YOURS) == RUNS_EARLIER
    lesson_05 = "05_multi_head_attention"
    saved = {f"Copy of {lesson_05}.ipynb": read(release_path(lesson_05))}  # a first copy, nothing written in it
    saved |= {f"Copy of {lesson}.ipynb": solved(lesson) for lesson in SAVED if lesson != lesson_05}
    saved[f"Copy of {lesson_05} (1).ipynb"] = solved(lesson_05)  # saved again later, answers written: the one read
    printed = _run_on_colab(tmp_path, monkeypatch, content, saved)
    folder = drive_folder(content)
    read_from = f"Lesson 05 read from Copy of {lesson_05} (1).ipynb, the most recently saved of 2 copies in {folder}."
    for lesson, (setup, *rest) in printed.items():
        assert f"**Google Drive:** mounted; your copies of earlier lessons are read from `{folder}`" in setup, setup
        lines = rest[-1].strip().splitlines()
        assert lines[0] == YOURS[lesson], (lesson, lines)
        assert lines[1] == read_from, (lesson, lines)
        assert not [line for line in lines if line.startswith(("Not running", "To run yours"))], (lesson, lines)
    mounts = [text.count("[stand-in] drive.mount(") for cells in printed.values() for text in cells]
    assert sum(mounts) == 1, "the first lesson mounts the Drive; the others find it mounted in the same session"
    assert "the blocks of a GPT built here: your_06_transformer_blocks" in printed["10_gpt2"][-1]


def test_on_colab_with_nothing_in_drive_each_banner_says_what_to_do(tmp_path, monkeypatch, content):
    printed = _run_on_colab(tmp_path, monkeypatch, content, {})
    for lesson, (*_, banner) in printed.items():
        lines = banner.strip().splitlines()
        assert lines[0].startswith("Running the course's `"), (lesson, banner)
        assert "your `" not in lines[0], (lesson, banner)
        numbers = [earlier[:2] for earlier in manifest.lesson(lesson).your_lessons]
        advice = [line for line in lines if line.startswith("To run yours:")]
        assert len(advice) == 1, (lesson, banner)
        assert "File > Save a copy in Drive" in advice[0], advice
        assert f"(copies are looked for in {drive_folder(content)})" in advice[0], advice
        assert all(number in advice[0] for number in numbers), (lesson, advice)


def test_on_colab_a_learner_who_refuses_drive_gets_the_courses_classes_and_is_told_how_to_use_theirs(
    tmp_path, monkeypatch, content
):
    saved = {f"Copy of {lesson}.ipynb": solved(lesson) for lesson in SAVED}
    two = RUNS_EARLIER[:2]  # the way a refusal is handled is the same in every lesson
    printed = _run_on_colab(tmp_path, monkeypatch, content, saved, refuse=True, lessons=two)
    mounts = [text.count("[stand-in] drive.mount(") for cells in printed.values() for text in cells]
    assert sum(mounts) == 2, "each lesson asks again: the Drive was not mounted"
    for lesson, (setup, *_, banner) in printed.items():
        assert "Google Drive:** not mounted (MessageError: Error: credential propagation was unsuccessful)" in setup
        assert banner.startswith("Running the course's `"), (lesson, banner)
        advice = [line for line in banner.splitlines() if line.startswith("To run yours:")]
        assert advice and advice[0].startswith("To run yours: let the set-up cell mount your Google Drive"), banner


def test_start_lesson_mounts_drive_once_only_on_colab_and_for_a_lesson_that_runs_earlier_answers(tmp_path, monkeypatch):
    """The set-up cell's one call, in-process: what start_lesson does with DRIVE_FOLDER in each case."""
    import types

    from course_lib.lesson import start_lesson
    from course_lib.workflow.your_code import DRIVE_ENV

    mounted, store = [], tmp_path / "store"
    (store / "Colab Notebooks").mkdir(parents=True)

    def mount(mountpoint, **_):
        mounted.append(mountpoint)
        if refuse:
            raise RuntimeError("credential propagation was unsuccessful")
        Path(mountpoint).mkdir(parents=True, exist_ok=True)
        (Path(mountpoint) / "MyDrive").symlink_to(store)

    monkeypatch.delenv(DRIVE_ENV, raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    folder = str(tmp_path / "content" / "drive" / "MyDrive" / "Colab Notebooks")
    assert start_lesson("09_char_gpt", drive_folder=folder).drive == ""  # not on Colab: nothing happens
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    assert start_lesson("04_attention").drive == ""  # a lesson that runs no earlier answers asks nothing
    assert "None in the set-up cell" in start_lesson("09_char_gpt", drive_folder=None).drive and not mounted

    refuse = True
    env = start_lesson("09_char_gpt", drive_folder=folder)
    assert env.drive.startswith("not mounted (RuntimeError: credential propagation was unsuccessful)")
    assert mounted == [str(tmp_path / "content" / "drive")] and DRIVE_ENV not in os.environ
    refuse = False
    assert start_lesson("09_char_gpt", drive_folder=folder).drive == (
        f"mounted; your copies of earlier lessons are read from `{folder}`"
    )
    assert os.environ[DRIVE_ENV] == folder and len(mounted) == 2
    assert start_lesson("10_gpt2", drive_folder=folder).drive.startswith("mounted;") and len(mounted) == 2  # once
    assert "is not a folder of it" in start_lesson("10_gpt2", drive_folder=folder + "/elsewhere").drive
    assert "is not a folder of your Drive" in start_lesson("10_gpt2", drive_folder="/content/lessons").drive
    assert DRIVE_ENV not in os.environ  # a folder that is not there is not looked in
