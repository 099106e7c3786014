"""Helpers the lesson notebooks call: the set-up cell's `start_lesson` and the last cell's self-grading.

Lesson 00 explains both. Nothing here changes global state beyond what a notebook's first cell should do:
seeding torch's default generator so the lesson's printed numbers are reproducible, choosing altair's
offline renderer, and (in a Jupyter kernel, outside nbgrader) letting a failing visible check show its message
without stopping "Run All Cells" (`course_lib.grading.kit.notebook`).
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LessonEnvironment", "autograding", "grade_this_notebook", "start_lesson", "your_answers", "your_code"]


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

    @property
    def ok(self) -> bool:
        return not self.problems

    def _repr_markdown_(self) -> str:
        rows = [
            f"**Lesson {self.lesson}** — Python {self.python}, torch {self.torch}, device `{self.device}`",
            "",
            "| data file | status |",
            "|---|---|",
        ]
        rows += [f"| `{name}` | {status} |" for name, status in self.data.items()]
        if self.problems:
            rows += ["", "**Problems:**"] + [f"- {p}" for p in self.problems]
        return "\n".join(rows)

    def __repr__(self) -> str:
        state = "ready" if self.ok else f"{len(self.problems)} problem(s): " + " | ".join(self.problems)
        return f"LessonEnvironment({self.lesson}: torch {self.torch} on {self.device}; {state})"


def start_lesson(lesson: str, data: list[str] | tuple[str, ...] = (), seed: int = 0) -> LessonEnvironment:
    """Check the environment, make sure the lesson's data files are present, and seed torch."""
    import torch

    from course_lib import data as course_data

    torch.manual_seed(seed)
    _use_offline_charts()
    if not _under_nbgrader():  # a learner's kernel: a failing visible check shows its message, Run All goes on
        from course_lib.grading.kit.notebook import show_check_failures

        show_check_failures()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = LessonEnvironment(lesson, platform.python_version(), torch.__version__, device)
    for name in data:
        try:
            env.data[name] = f"ok (`{course_data.data_path(name)}`)"
        except Exception as exc:  # shown to the learner, with the fix the data module suggests
            env.data[name] = "missing"
            env.problems.append(str(exc))
    return env


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


def grade_this_notebook(lesson: str, path: str | Path | None = None, timeout: int | None = None):
    """Grade the notebook you are working in (save it first!) and show the score of each exercise.

    Does nothing while nbgrader itself is grading the notebook (that would grade it twice), or when the
    environment variable COURSE_SELF_GRADE is "off" (the test suite sets it when it executes lessons).
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

    if path is None:
        path = _colab_notebook(lesson) if "google.colab" in sys.modules else _current_notebook_path(lesson)
    return grade_notebook(path, lesson, timeout=timeout)


def your_code(*lessons: str):
    """Your answers of earlier lessons where they pass their visible checks, the course's references elsewhere.

    `yours = your_code("05_multi_head_attention", "06_transformer_blocks")`, then `yours.TransformerBlock` is the
    class you wrote in lesson 06 (built on your lesson 05 `MultiHeadAttention`) or the reference, and
    `yours.banner()` says which and why. Your saved notebooks are read from work/ (see
    `course_lib.workflow.your_code`); while nbgrader grades, every name is the reference.
    """
    from course_lib.workflow.your_code import load_your_code

    return load_your_code(*lessons)


def your_answers(lesson: str, **answers: Any):
    """Answers of the lesson you are working in where they pass their visible checks, the references elsewhere.

    `yours = your_answers("10_gpt2", load_gpt2_weights=load_gpt2_weights)`, then `yours.load_gpt2_weights` is your
    function when its visible check passes it, the course's reference otherwise, and `yours.banner()` says which
    and why in one line (a `course_lib.workflow.your_code.YourCode`, as `your_code` returns for earlier lessons).
    While nbgrader grades, every name is the reference. The check runs here, in your kernel, as the visible test
    cell runs it; its printed verdict is kept out of the output.
    """
    import contextlib
    import importlib
    import io

    from course_lib import manifest
    from course_lib.grading import GradingError
    from course_lib.grading.kit.exercise import resolve
    from course_lib.workflow.your_code import Choice, YourCode

    entry = manifest.lesson(lesson)
    grader = importlib.import_module(entry.grader)
    result = YourCode()
    for name, answer in answers.items():
        exercise = next((e for e in entry.exercises if e.names == (name,)), None)
        if exercise is None:
            raise ValueError(f"lesson {lesson} has no exercise {name!r} that defines one name")
        reason = "graded runs use the course's references" if _under_nbgrader() else ""
        if not reason:
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    getattr(grader, f"check_{exercise.name}")(answer)
            except GradingError as exc:
                said = exc.message
                reason = "not written yet" if "not written yet" in said else f"its visible check says: {said}"
        result.objects[name] = resolve(exercise.paths[name]) if reason else answer
        result.choices[name] = Choice(name, lesson, not reason, reason)
    return result
