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

The lessons that run the learner's classes of earlier lessons (06, 07, 09, 10, 11 and 12) are executed in a kernel of
such an interpreter, working in a stand-in `/content` (a temporary folder) that holds the course (this checkout's
files, as the set-up cell's clone would) and Google Drive's mount point. `google.colab` is faked in the kernel's
first cell: its `drive.mount` links a folder playing the learner's Drive into the mount point, as Colab's dialog
does once the learner allows it, or raises as Colab does when the learner refuses. The Drive holds the learner's
saved lessons under Colab's own names ("Copy of 05_multi_head_attention.ipynb", a second "Copy of ... (1)"), or
nothing. Of each lesson only the cells that choose the classes run: the set-up cell, the import cell and the cell
that calls `your_code`; the six lessons run one after the other in one kernel, as one Colab session would.
What the stand-in cannot show: Colab's own dialog, its Drive file system, and its packages at the time of a run.
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
from nbclient import NotebookClient

from course_lib import manifest
from course_lib.workflow.course import SETUP_ID, repo_url
from course_lib.workflow.kernels import WatchfulKernelManager
from tests.nbtools import ROOT, grade_id, read, release_path, solved

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
    return _standin_python(tmp_path / "colab-env")


def _standin_python(env_dir: Path) -> Path:
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


# ------------------------------------------------------------------------------------------------------------
# The learner's earlier lessons, found in their Google Drive

RUNS_EARLIER = [entry.id for entry in manifest.LESSONS if entry.your_lessons]
SAVED = sorted({earlier for entry in manifest.LESSONS for earlier in entry.your_lessons})
FAKE_COLAB = """\
import os, sys, types

class MessageError(RuntimeError):  # what google.colab raises when the learner refuses the dialog
    pass

def mount(mountpoint, force_remount=False, timeout_ms=120000, readonly=False):
    print(f"[stand-in] drive.mount({{mountpoint!r}})")
    if {refuse!r}:
        raise MessageError("Error: credential propagation was unsuccessful")
    os.makedirs(mountpoint, exist_ok=True)
    os.symlink({drive!r}, os.path.join(mountpoint, "MyDrive"))

colab = types.ModuleType("google.colab")
colab.drive = types.SimpleNamespace(mount=mount)
sys.modules["google.colab"] = colab
"""


@pytest.fixture(scope="module")
def content(tmp_path_factory) -> Path:
    """A stand-in /content: the course in course/ (this checkout's files, what the set-up cell's clone holds), and a
    kernel of a stand-in Colab interpreter (`colab-standin`, on JUPYTER_PATH while a test runs)."""
    root = tmp_path_factory.mktemp("colab")
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source, target = REPO / name, root / "content" / "course" / name
        if source.is_file():  # a file deleted in the checkout but still tracked is not there
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    python = _standin_python(root / "colab-env")
    spec = root / "jupyter" / "kernels" / "colab-standin"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Colab stand-in", "language": "python"})
    )
    return root / "content"


def _choosing_cells(lesson: str, content: Path) -> list:
    """The cells of `lesson` that choose the learner's classes: set-up (its /content moved to the stand-in), imports,
    and the cell that calls your_code."""
    cells = read(release_path(lesson)).cells
    at = next(i for i, c in enumerate(cells) if grade_id(c) == SETUP_ID)
    setup = nbformat.v4.new_code_cell(cells[at].source.replace("/content", str(content)))
    chosen = next(c for c in cells if c.cell_type == "code" and "your_code(" in c.source)
    imports = cells[at + 1]
    return [setup, imports] + ([] if chosen is imports else [chosen])


def _run_on_colab(
    tmp_path, monkeypatch, content: Path, saved: dict, refuse: bool = False, lessons=tuple(RUNS_EARLIER)
) -> dict[str, list[str]]:
    """Execute the choosing cells of `lessons` (default: every lesson that runs earlier answers), in one stand-in
    Colab kernel, with `saved` ({file name: notebook}) in the learner's Drive folder; {lesson: [what each of its
    cells printed]}."""
    drive = tmp_path / "drive"  # the learner's Google Drive
    (drive / "Colab Notebooks").mkdir(parents=True)
    for i, (name, nb) in enumerate(saved.items()):
        path = drive / "Colab Notebooks" / name
        nbformat.write(nb, path)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # saved in this order
    shutil.rmtree(content / "drive", ignore_errors=True)  # not mounted yet: a new Colab session
    fake = nbformat.v4.new_code_cell(FAKE_COLAB.format(refuse=refuse, drive=str(drive)))
    lessons = {lesson: _choosing_cells(lesson, content) for lesson in lessons}
    nb = nbformat.v4.new_notebook(cells=[fake, *(c for cells in lessons.values() for c in cells)])
    for name in ("COURSE_WORK_DIR", "COURSE_DRIVE_DIR", "NBGRADER_EXECUTION", "COURSE_SMALL_RUN", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    monkeypatch.setenv("JUPYTER_PATH", str(content.parent / "jupyter"))
    client = NotebookClient(
        nb,
        timeout=600,  # a backstop for a hung cell, never reached by a slow one
        kernel_name="colab-standin",
        kernel_manager_class=WatchfulKernelManager,
        resources={"metadata": {"path": str(content)}},  # Colab's working folder
    )
    client.execute()
    printed = {}
    for lesson, cells in lessons.items():
        printed[lesson] = []
        for cell in cells:
            assert not [o for o in cell.outputs if o.output_type == "error"], (lesson, cell.outputs)
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            shown = "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)
            printed[lesson].append(text + shown)
    return printed


# What each lesson's banner says when the learner's classes all passed their checks there.
YOURS = {
    "06_transformer_blocks": "Running your `MultiHeadAttention` (lesson 05).",
    "07_encoder_decoder": "Running your `PositionEncoding` (lesson 03); your `MultiHeadAttention` (lesson 05); your "
    "`EncoderLayer` (lesson 06).",
    "09_char_gpt": "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06).",
    "10_gpt2": "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06); "
    "your `GPT` (lesson 09).",
    "11_gpt2_training_gpu": "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` "
    "(lesson 06); your `GPT` (lesson 09).",
    "12_beyond_gpt2": "Running your `apply_rope` (lesson 03); your `MultiHeadAttention` (lesson 05); your "
    "`TransformerBlock` (lesson 06); your `GPT` (lesson 09).",
    "13_what_attention_learned": "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, "
    "`TransformerBlock` (lesson 06); your `GPT` (lesson 09); your `load_gpt2_weights` (lesson 10).",
}


def test_on_colab_the_lessons_run_the_learners_classes_from_their_copies_in_drive(tmp_path, monkeypatch, content):
    assert sorted(YOURS) == RUNS_EARLIER
    lesson_05 = "05_multi_head_attention"
    saved = {f"Copy of {lesson_05}.ipynb": read(release_path(lesson_05))}  # a first copy, nothing written in it
    saved |= {f"Copy of {lesson}.ipynb": solved(lesson) for lesson in SAVED if lesson != lesson_05}
    saved[f"Copy of {lesson_05} (1).ipynb"] = solved(lesson_05)  # saved again later, answers written: the one read
    printed = _run_on_colab(tmp_path, monkeypatch, content, saved)
    folder = content / "drive" / "MyDrive" / "Colab Notebooks"
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
        assert f"(copies are looked for in {content / 'drive' / 'MyDrive' / 'Colab Notebooks'})" in advice[0], advice
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
