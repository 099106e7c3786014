"""Helpers the notebook and nbgrader tests share: find lessons, build submissions, read hidden test text."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.workflow.course import course_root, grade_id, lesson_ids
from course_lib.workflow.kernels import WatchfulKernelManager

ROOT = course_root()
LESSONS = lesson_ids()
_SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def source_path(lesson: str) -> Path:
    return ROOT / "source" / lesson / f"{lesson}.ipynb"


def release_path(lesson: str) -> Path:
    return ROOT / "release" / lesson / f"{lesson}.ipynb"


def read(path: Path):
    return nbformat.read(path, as_version=4)


def course_copy(folder: Path, lesson: str) -> Path:
    """`lesson`'s source and committed release in `folder`/notebooks with the course's nbgrader_config.py, laid out
    as in the repository (the diagrams its source refers to are in `folder`/images). Returns the course root."""
    course = folder / "notebooks"
    course.mkdir()
    (folder / "images").symlink_to(ROOT.parent / "images")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    for part in ("source", "release"):
        shutil.copytree(ROOT / part / lesson, course / part / lesson)
    return course


def answer_names(nb) -> list[str]:
    return [grade_id(c) for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]


def solved(lesson: str):
    """The student version with the instructor's reference answers pasted into the answer cells."""
    source = {grade_id(c): c.source for c in read(source_path(lesson)).cells if grade_id(c)}
    nb = copy.deepcopy(read(release_path(lesson)))
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell.source = _SOLUTION_MARKERS.sub("", source[grade_id(cell)])
    return nb


def with_hidden_tests(nb, lesson: str):
    """A copy of `nb` (a notebook of `lesson`) whose test cells hold the instructor source's text, hidden tests
    included, as nbgrader's autograde puts them back before the verdicts."""
    tests = {grade_id(c): c.source for c in read(source_path(lesson)).cells if (grade_id(c) or "").startswith("test_")}
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if grade_id(cell) in tests:
            cell.source = tests[grade_id(cell)]
    return nb


def with_answer(nb, name: str, code: str):
    nb = copy.deepcopy(nb)
    cells = [c for c in nb.cells if grade_id(c) == name]
    assert cells, f"no answer cell {name}"
    cells[0].source = code
    return nb


def execute(nb, timeout: int, folder: Path | None = None, kernel_name: str = "python3", **options) -> None:
    """Run `nb` top to bottom in a `kernel_name` kernel (in `folder`), as nbclient does, raising CellExecutionError
    on the first error; with a watchful kernel client (course_lib/workflow/kernels.py), so a reply whose wake-up zmq
    missed costs a second, not the whole per-cell `timeout`."""
    resources = {"metadata": {"path": str(folder)}} if folder is not None else {}
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        kernel_manager_class=WatchfulKernelManager,
        resources=resources,
        **options,
    ).execute()


def hidden_lines(lesson: str) -> list[str]:
    """Lines of hidden test text that appear nowhere else in the lesson (so finding one elsewhere is a leak)."""
    source = read(source_path(lesson))
    visible = "\n".join(_HIDDEN.sub("", c.source) for c in source.cells)
    lines = []
    for cell in source.cells:
        for block in _HIDDEN.findall(cell.source):
            for line in block.splitlines():
                line = line.strip()
                if len(line) > 12 and line not in visible:
                    lines.append(line)
    return lines


def stop_process_group(proc, grace: float = 20.0) -> None:
    """Stop a server started with `start_new_session=True`, and everything it started (kernels included).

    SIGTERM first, so Jupyter can shut its kernels down; on a loaded 2-core machine that can take longer than
    `grace` seconds, and then the group gets SIGKILL. A slow shutdown is not what these tests check.
    """

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # the server has exited; leftover children in its group (a kernel mid-shutdown) go too
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


# Lesson 06's answer cell once imported the course's attention itself; a learner's block is built on theirs.
_REFERENCE_IMPORT = "from course_lib.multihead import MultiHeadAttention\n"


def solved_earlier(lesson: str):
    """`solved(lesson)` as a learner would have written it: no answer cell imports the course's attention."""
    nb = solved(lesson)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell.source = cell.source.replace(_REFERENCE_IMPORT, "")
    return nb


def save_lessons(work: Path, saved: dict) -> None:
    """Each notebook of `saved` ({lesson id: notebook}) written where a learner's work folder keeps it."""
    for lesson, nb in saved.items():
        (work / lesson).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, work / lesson / f"{lesson}.ipynb")


def run_beside(tmp_path: Path, monkeypatch, lesson: str, earlier: dict, nb=None, small: bool = True, **options):
    """`nb` (default: `lesson` solved) executed as a learner runs it, in tmp_path/work/<lesson>, with the notebooks
    of `earlier` saved beside it (the work folder is COURSE_WORK_DIR); self-grading off; at the smallest sizes
    unless `small` is False. `options` go to `execute` (`allow_errors`). Returns the notebook, outputs filled in."""
    work = tmp_path / "work"
    save_lessons(work, earlier)
    monkeypatch.setenv("COURSE_WORK_DIR", str(work))
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    if small:
        monkeypatch.setenv("COURSE_SMALL_RUN", "1")
    else:
        monkeypatch.delenv("COURSE_SMALL_RUN", raising=False)
    nb = solved(lesson) if nb is None else nb
    (work / lesson).mkdir(parents=True)
    execute(nb, timeout=300, folder=work / lesson, **options)
    return nb


def printed(nb, marker: str) -> str:
    """What the one code cell containing `marker` printed (it must have raised no error)."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


_READ_FROM = re.compile(r"Lesson \d\d read from ")


def banner(nb, marker: str) -> str:
    """`printed(nb, marker)` without the lines that say from which of several saved copies a lesson was read (they
    name where the learner keeps them)."""
    lines = printed(nb, marker).splitlines(keepends=True)
    return "".join(line for line in lines if not _READ_FROM.match(line))
