"""A stand-in for a Colab machine, shared by the tests that run lessons there (test_colab_setup.py,
test_notebooks_execute.py).

Colab itself cannot be reached from here. The stand-in is a fresh virtual environment, without pip or packages of
its own, that sees this project's `.venv` packages as pre-installed ones (torch 2.13.0 included), but not
`course_lib`. `content` builds a stand-in `/content` (a temporary folder) holding the course in `course/` (this
checkout's files, what the set-up cell's clone holds) and a Jupyter kernel of that interpreter (`KERNEL`, found
through JUPYTER_PATH while `colab_environment` is on). `google.colab` is faked in a kernel's first cell
(`fake_colab_cell`): its `drive.mount` links a folder playing the learner's Google Drive into the mount point, as
Colab's dialog does once the learner allows it, or raises as Colab does when the learner refuses. The Drive holds
the learner's saved lessons under Colab's own names ("Copy of 05_multi_head_attention.ipynb"), or nothing.
What the stand-in cannot show: Colab's own dialog, its Drive file system, and its packages at the time of a run.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import nbformat
import pytest

from course_lib.workflow.course import SETUP_ID
from tests.nbtools import ROOT, grade_id

REPO = ROOT.parent
KERNEL = "colab-standin"
MOUNT = "drive"  # Colab mounts Google Drive at /content/drive
FOLDER = "Colab Notebooks"  # where Colab's "Save a copy in Drive" writes

_FAKE_COLAB = """\
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


def standin_python(env_dir: Path) -> Path:
    """A Python with this project's dependencies pre-installed (torch 2.13.0 among them) but not course_lib."""
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    # A plain path line: the packages are importable, but .pth files there (our editable course_lib) are not run.
    Path(site, "preinstalled.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def make_content(root: Path) -> Path:
    """A stand-in /content in `root`: the course in course/ (this checkout's files, committed or not, that git
    does not ignore) and the kernel `KERNEL` of a stand-in interpreter (in root/jupyter). Returns the /content."""
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
    python = standin_python(root / "colab-env")
    spec = root / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Colab stand-in", "language": "python"})
    )
    return root / "content"


def drive_folder(content: Path) -> Path:
    """Where the lessons look for the learner's copies once the Drive is mounted."""
    return content / MOUNT / "MyDrive" / FOLDER


def new_session(content: Path, drive: Path, saved: dict, refuse: bool = False):
    """A new Colab session: the Drive unmounted, `drive` (the learner's Google Drive) holding `saved` ({file name:
    notebook}, saved in that order) in its Colab Notebooks folder. Returns the cell to run first in the kernel: the
    fake `google.colab`, whose mount links `drive` in (or raises when the learner refuses)."""
    (drive / FOLDER).mkdir(parents=True)
    for i, (name, nb) in enumerate(saved.items()):
        path = drive / FOLDER / name
        nbformat.write(nb, path)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    shutil.rmtree(content / MOUNT, ignore_errors=True)
    return nbformat.v4.new_code_cell(_FAKE_COLAB.format(refuse=refuse, drive=str(drive)))


def on_colab(cell, content: Path):
    """A lesson's set-up cell as it runs in the stand-in (a copy): its /content is the stand-in's."""
    assert grade_id(cell) == SETUP_ID and "/content/course" in cell.source
    cell = copy.deepcopy(cell)
    cell.source = cell.source.replace("/content", str(content))
    return cell


def colab_environment(monkeypatch: pytest.MonkeyPatch, content: Path) -> None:
    """The environment a stand-in kernel inherits: nothing of this machine's course settings, self-grading off, and
    the stand-in's kernel on JUPYTER_PATH."""
    for name in ("COURSE_WORK_DIR", "COURSE_DRIVE_DIR", "NBGRADER_EXECUTION", "COURSE_SMALL_RUN", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    monkeypatch.setenv("JUPYTER_PATH", str(content.parent / "jupyter"))
