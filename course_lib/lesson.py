"""Helpers the lesson notebooks call: the set-up cell's `start_lesson` and the last cell's self-grading.

Lesson 00 explains both. Nothing here changes global state beyond what a notebook's first cell should do:
seeding torch's default generator so the lesson's printed numbers are reproducible, choosing altair's
offline renderer, and (in a Jupyter kernel, outside nbgrader) letting a failing visible check show its message
without stopping "Run All Cells" (`course_lib.grading.kit.notebook`) and remembering what the kernel last ran in
each cell, so that self-grading can tell a notebook that was not saved since (`grade_this_notebook`). On Colab, a
lesson that runs your classes of earlier lessons mounts Google Drive when its set-up cell names a Drive folder, and
tells `your_code` to look for your copies there (`course_lib.workflow.your_code`).
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LessonEnvironment",
    "NotSaved",
    "autograding",
    "grade_this_notebook",
    "start_lesson",
    "with_your_answers",
    "your_answers",
    "your_code",
]


def autograding() -> bool:
    """True while nbgrader executes the notebook: lessons then use their smallest training settings.

    Also true when a check of the course asks for those settings with COURSE_SMALL_RUN=1 (the test suite's Run-All
    check, which is about cells running past unfinished exercises, not about sizes); only the sizes change then.
    """
    return _under_nbgrader() or os.environ.get("COURSE_SMALL_RUN") == "1"


def _under_nbgrader() -> bool:
    return bool(os.environ.get("NBGRADER_EXECUTION"))


@dataclass
class LessonEnvironment:
    """What `start_lesson` found; shown as a small table in the notebook."""

    lesson: str
    python: str
    torch: str
    device: str
    data: dict[str, str] = field(default_factory=dict)  # file name -> path, or the error text
    problems: list[str] = field(default_factory=list)
    drive: str = ""  # on Colab, where your saved lessons are read from, or why Google Drive is not mounted

    @property
    def ok(self) -> bool:
        return not self.problems

    def _repr_markdown_(self) -> str:
        rows = [f"**Lesson {self.lesson}** — Python {self.python}, torch {self.torch}, device `{self.device}`"]
        if self.drive:
            rows += ["", f"**Google Drive:** {self.drive}"]
        if self.data:  # a lesson without data files shows no empty table
            rows += ["", "| data file | status |", "|---|---|"]
            rows += [f"| `{name}` | {status} |" for name, status in self.data.items()]
        if self.problems:
            rows += ["", "**Problems:**"] + [f"- {p}" for p in self.problems]
        return "\n".join(rows)

    def __repr__(self) -> str:
        state = "ready" if self.ok else f"{len(self.problems)} problem(s): " + " | ".join(self.problems)
        return f"LessonEnvironment({self.lesson}: torch {self.torch} on {self.device}; {state})"


def start_lesson(
    lesson: str, data: list[str] | tuple[str, ...] = (), seed: int = 0, drive_folder: str | None = None
) -> LessonEnvironment:
    """Check the environment, make sure the lesson's data files are present, and seed torch.

    `drive_folder` (only on Colab): a folder of your Google Drive, such as "/content/drive/MyDrive/Colab Notebooks",
    where your copies of earlier lessons are; the Drive is mounted (Colab asks for your permission) and `your_code`
    looks there. If you decline or the mount fails, the lesson goes on with the course's classes and says so.
    """
    from course_lib.workflow.slow_imports import skip_slow_imports

    skip_slow_imports()  # before altair (below) imports jsonschema: 1.3 s of a lesson's start on a 2-core machine
    import torch

    from course_lib import data as course_data

    torch.manual_seed(seed)
    _use_offline_charts()
    if not _under_nbgrader():  # a learner's kernel: a failing visible check shows its message, Run All goes on
        from course_lib.grading.kit.notebook import show_check_failures

        show_check_failures()
        _remember_runs()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = LessonEnvironment(lesson, platform.python_version(), torch.__version__, device)
    if "google.colab" in sys.modules and not _under_nbgrader() and _runs_earlier_lessons(lesson):
        env.drive = _use_drive(drive_folder) if drive_folder else "not used (DRIVE_FOLDER is None in the set-up cell)"
    for name in data:
        try:
            env.data[name] = f"ok (`{course_data.data_path(name)}`)"
        except Exception as exc:  # shown to the learner, with the fix the data module suggests
            env.data[name] = "missing"
            env.problems.append(str(exc))
    return env


def _runs_earlier_lessons(lesson: str) -> bool:
    from course_lib import manifest

    try:
        return bool(manifest.lesson(lesson).your_lessons)
    except KeyError:
        return False


def _use_drive(folder: str) -> str:
    """Mount Google Drive for `folder` (a folder under .../MyDrive) and point `your_code` at it; what happened."""
    from course_lib.workflow.your_code import DRIVE_ENV

    os.environ.pop(DRIVE_ENV, None)
    path = Path(folder)
    mountpoint = next((p.parent for p in (path, *path.parents) if p.name == "MyDrive"), None)
    if mountpoint is None:
        return f"not mounted: `{folder}` is not a folder of your Drive (it should start with /content/drive/MyDrive/)"
    if not (mountpoint / "MyDrive").is_dir():  # not mounted yet in this runtime: one dialog, the learner's choice
        from google.colab import drive  # type: ignore[import-not-found]

        try:
            drive.mount(str(mountpoint))
        except Exception as exc:  # declined, closed or timed out: the course's classes stand in, nothing stops
            return (
                f"not mounted ({type(exc).__name__}: {exc}); the course's classes stand in for yours. Run the set-up "
                "cell again to retry."
            )
    if not path.is_dir():
        return f"mounted, but `{folder}` is not a folder of it: name the folder that holds your copies of the lessons"
    os.environ[DRIVE_ENV] = str(path)
    return f"mounted; your copies of earlier lessons are read from `{folder}`"


def _use_offline_charts() -> None:
    """Let JupyterLab draw altair charts itself (its built-in vega-lite 5 renderer): no CDN, works offline.

    Colab keeps altair's default renderer, which Colab displays (it is online anyway).
    """
    import altair as alt

    if "google.colab" not in sys.modules:
        alt.renderers.enable("mimetype")


def _current_notebook_path(lesson: str) -> Path:
    """Where the running notebook is saved: JupyterLab tells the kernel (JPY_SESSION_NAME); else guess."""
    session = os.environ.get("JPY_SESSION_NAME")
    if session and Path(session).suffix == ".ipynb" and Path(session).is_file():
        return Path(session)
    return Path.cwd() / f"{lesson}.ipynb"


def _colab_notebook(lesson: str) -> Path:
    """On Colab the notebook lives in the browser: fetch its current contents into a file."""
    import json

    from google.colab import _message  # type: ignore[import-not-found]

    content = _message.blocking_request("get_ipynb", timeout_sec=60)["ipynb"]
    path = Path("/tmp") / f"{lesson}.ipynb"
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------------
# What the kernel ran, against what is saved


_RUNS: dict[str, str] = {}  # a cell's id -> the source this kernel last ran in it (from the set-up cell on)


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _remember(info) -> None:
    cell_id = getattr(info, "cell_id", None)  # JupyterLab and nbclient send it with each cell they run
    if cell_id:
        _RUNS[cell_id] = info.raw_cell


def _remember_runs() -> None:
    """From now on, remember what this kernel runs in each cell (IPython's `pre_run_cell` event), once per kernel."""
    shell = _ipython()
    if shell is not None and _remember not in shell.events.callbacks.get("pre_run_cell", []):
        shell.events.register("pre_run_cell", _remember)


def _same_code(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


def _defines(source: str, names: set[str]) -> bool:
    """Whether `source` defines one of `names` at its top level (a def, a class or an assignment)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name in names:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id in names for t in targets):
            return True
    return False


def _last_run(cell, names: set[str], history: list[str]) -> str | None:
    """What this kernel last ran in the answer cell `cell`: by the cell's id, else the last input of IPython's history
    that defines one of the exercise's names; None when it ran neither (a new kernel: nothing to compare)."""
    if cell.get("id") in _RUNS:
        return _RUNS[cell["id"]]
    return next((source for source in reversed(history) if _defines(source, names)), None)


def unsaved_exercises(path: Path, lesson: str) -> list[str]:
    """The exercises whose answer cell, as saved at `path`, differs from what this kernel last ran in it."""
    import nbformat

    from course_lib import manifest

    shell = _ipython()
    if shell is None or not path.is_file():
        return []
    try:
        nb = nbformat.read(path, as_version=4)
        exercises = {e.name: set(e.names) for e in manifest.lesson(lesson).exercises}
    except Exception:  # a broken file or an unknown lesson: grading says what is wrong with it
        return []
    history = [s for s in shell.history_manager.input_hist_raw if s]
    found = []
    for cell in nb.cells:
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or name not in exercises:
            continue
        ran = _last_run(cell, exercises[name] | {name}, history)
        if ran is not None and not _same_code(ran, cell.source):
            found.append(name)
    return found


@dataclass
class NotSaved:
    """What the self-grade cell shows instead of a score when the saved notebook is not what the kernel ran."""

    path: Path
    exercises: list[str]

    def _text(self, code: str) -> str:
        names = ", ".join(code.format(name) for name in self.exercises)
        return (
            f"your saved notebook differs from what you ran in {names}: save with Ctrl+S (File > Save Notebook), "
            "then run this cell again. Grading reads the notebook saved on disk, and what you ran is not in it "
            "yet (if you changed a cell since you ran it, run it first)."
        )

    def _repr_markdown_(self) -> str:
        return f"**Not graded yet:** {self._text('`{}`')}"

    def __repr__(self) -> str:
        return f"Not graded yet: {self._text('{}')}"


def grade_this_notebook(lesson: str, path: str | Path | None = None, timeout: int | None = None):
    """Grade the notebook you are working in (saved on disk) and show the score of each exercise.

    When an answer cell saved on disk differs from what this kernel last ran in it (you ran a new answer but did
    not save), it says so and grades nothing. Does nothing while nbgrader itself is grading the notebook (that
    would grade it twice), or when the environment variable COURSE_SELF_GRADE is "off" (the test suite sets it
    when it executes lessons).
    """
    if _under_nbgrader():
        return None
    if os.environ.get("COURSE_SELF_GRADE", "").lower() == "off":
        return "Self-grading is switched off here (COURSE_SELF_GRADE=off)."
    try:
        from course_lib.workflow.selfgrade import grade_notebook
    except ImportError:
        return (
            "Self-grading needs nbgrader, which is not installed here. Install it with "
            "`pip install nbgrader` (on Colab: `!pip install -q nbgrader`) and run this cell again."
        )

    if path is None and "google.colab" in sys.modules:  # the notebook as the browser holds it: nothing to save
        path = _colab_notebook(lesson)
    elif path is None:
        path = _current_notebook_path(lesson)
        unsaved = unsaved_exercises(path, lesson)
        if unsaved:
            return NotSaved(path, unsaved)
    return grade_notebook(path, lesson, timeout=timeout)


def your_code(*lessons: str):
    """Your answers of earlier lessons where they pass their visible checks, the course's references elsewhere.

    `yours = your_code("05_multi_head_attention", "06_transformer_blocks")`, then `yours.TransformerBlock` is the
    class you wrote in lesson 06 (built on your lesson 05 `MultiHeadAttention`) or the reference, and
    `yours.banner([...])` names the classes whose code runs and why. Your saved notebooks are read from work/, and
    on Colab from the Google Drive folder the set-up cell mounted (`course_lib.workflow.your_code` lists where it
    looks); while nbgrader grades, every name is the reference.
    """
    from course_lib.workflow.your_code import load_your_code

    return load_your_code(*lessons)


def your_answers(lesson: str, **answers: Any):
    """Answers of the lesson you are working in where they pass their visible checks, the references elsewhere.

    `yours = your_answers("10_gpt2", load_gpt2_weights=load_gpt2_weights)`, then `yours.load_gpt2_weights` is your
    function when its visible check passes it, the course's reference otherwise, and `yours.banner()` says which
    and why in one line (a `course_lib.workflow.your_code.YourCode`, as `your_code` returns for earlier lessons).
    While nbgrader grades, every name is the reference. The check runs here, in your kernel, as the visible test
    cell runs it; its printed verdict is kept out of the output. (`with_your_answers` does the same on top of what
    `your_code` returned.)
    """
    from course_lib import manifest
    from course_lib.workflow.your_code import YourCode, add_answers

    names = {name for exercise in manifest.lesson(lesson).exercises for name in exercise.names}
    for name in answers:
        if name not in names:
            raise ValueError(f"lesson {lesson} has no exercise that defines {name!r}")
    return add_answers(YourCode(), lesson, answers)


def with_your_answers(yours, lesson: str, built_on: tuple[str, ...] = (), **answers):
    """`yours` (from `your_code`) with answers written in this notebook added, each kept where it passes its
    visible checks, the course's reference otherwise: `with_your_answers(yours, "09_char_gpt", GPT=GPT).banner([...])`
    says which GPT runs, built on which classes. An answer is built on what its exercise's `builds_on` lists in the
    manifest, and on the names in `built_on` besides; where it falls back, the banner says that those of yours do
    not run (the reference is built on the course's classes)."""
    from course_lib.workflow.your_code import add_answers

    return add_answers(yours, lesson, answers, built_on)
