"""The instructor's and the learner's commands are safe and say what they do: `make nbgrader` never replaces a richer
grades file or the committed student versions, `make grade` points at the learner's own copy, `make release` says
what it is doing, a CPU-only machine can ask for torch's CPU wheels, and the instructor's own solutions are not
taken for tampering."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.workflow import instructor
from course_lib.workflow.class_command.report import GRADES_FILE, write_grades
from course_lib.workflow.course import CourseError, release, run_nbgrader, visible_only_source
from course_lib.workflow.nbgrader_plugins import RestoreAndFlag, common, strip_hidden_tests
from tests import classbook
from tests.nbtools import ROOT, grade_id, read, release_path, source_path

REPO = ROOT.parent
LESSON = "00_welcome"


def _make(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_make_grade_without_a_file_points_at_the_learners_copy():
    result = _make("grade")
    assert result.returncode != 0
    assert "make grade NB=work/00_welcome/00_welcome.ipynb" in result.stderr
    assert "notebooks/release" not in result.stderr  # the student version, which `make lab` never opens


def test_torch_index_picks_the_cpu_wheels(tmp_path):
    """`make lab TORCH_INDEX=cpu` installs torch from PyTorch's CPU index (pip's default on Linux is the CUDA build,
    gigabytes); without it, pip's default index, and on Linux without an NVIDIA GPU the Makefile says so."""
    venv = tmp_path / "venv"
    cpu = _make("-n", "-B", f"{venv}/.installed", f"VENV={venv}", "TORCH_INDEX=cpu")
    assert cpu.returncode == 0, cpu.stderr
    line = next(line for line in cpu.stdout.splitlines() if '"torch==' in line)
    assert "--index-url https://download.pytorch.org/whl/cpu" in line
    plain = _make("-n", "-B", f"{venv}/.installed", f"VENV={venv}")
    line = next(line for line in plain.stdout.splitlines() if '"torch==' in line)
    assert "--index-url" not in line
    other = _make("-n", "-B", f"{venv}/.installed", f"VENV={venv}", "TORCH_INDEX=cu126")
    assert "--index-url https://download.pytorch.org/whl/cu126" in other.stdout
    if sys.platform == "linux" and shutil.which("nvidia-smi") is None:
        assert "TORCH_INDEX=cpu" in plain.stdout  # the note that a CPU-only machine should use it


def _class_grades(tmp_path: Path) -> Path:
    course = classbook.build(tmp_path / "course", {"ann": {"normalize_rows": 1}, "bob": {}})
    shutil.copy(ROOT / "nbgrader_config.py", course)
    write_grades(course, course / GRADES_FILE)
    return course


def test_nbgrader_export_leaves_the_class_grades_alone(tmp_path):
    """`make nbgrader ARGS="export"` writes nbgrader's own `grades.csv`; the class command's richer file (a column
    per exercise, flags, "not graded") has a name of its own and is never replaced by it."""
    course = _class_grades(tmp_path)
    before = (course / GRADES_FILE).read_bytes()
    result = instructor.main(["--course", str(course), "export"])
    assert result == 0
    assert (course / GRADES_FILE).read_bytes() == before
    with (course / "grades.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["student_id"] for r in rows} == {"ann", "bob"}
    assert GRADES_FILE != "grades.csv"
    dry = _make("-n", "nbgrader", "ARGS=export")
    assert "-m course_lib nbgrader export" in dry.stdout  # the Makefile goes through the course's guard


def test_an_older_class_grades_file_is_not_overwritten_by_export(tmp_path, capsys):
    """A `grades.csv` written by an earlier version of the class command (its flag columns show it) is kept:
    export refuses and says where to write instead."""
    course = _class_grades(tmp_path)
    shutil.copy(course / GRADES_FILE, course / "grades.csv")
    before = (course / "grades.csv").read_bytes()
    assert instructor.main(["--course", str(course), "export"]) == 2
    assert (course / "grades.csv").read_bytes() == before
    said = capsys.readouterr().err
    assert "holds the class command's grades" in said and "--to nbgrader_grades.csv" in said
    assert instructor.main(["--course", str(course), "export", "--to", "nbgrader_grades.csv"]) == 0
    assert (course / "nbgrader_grades.csv").is_file()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["generate_assignment", LESSON], "make class"),
        (["generate_assignment", LESSON, "--force"], "make class"),
        (["release_feedback", LESSON], "make feedback"),
    ],
)
def test_commands_that_would_write_over_tracked_files_or_need_an_exchange_are_explained(args, words, tmp_path, capsys):
    course = tmp_path / "course"
    (course / "release" / LESSON).mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    released = course / "release" / LESSON / f"{LESSON}.ipynb"
    shutil.copy(release_path(LESSON), released)
    before = released.read_bytes()
    assert instructor.main(["--course", str(course), *args]) == 2
    assert released.read_bytes() == before
    assert words in capsys.readouterr().err


def test_release_says_what_it_is_doing(tmp_path):
    root = tmp_path / "notebooks"
    shutil.copy(ROOT / "nbgrader_config.py", root.mkdir() or root)
    shutil.copytree(ROOT / "source" / LESSON, root / "source" / LESSON)
    shutil.copytree(ROOT / "release" / LESSON, root / "release" / LESSON)
    (tmp_path / "images").symlink_to(REPO / "images")
    said: list[str] = []
    assert release([LESSON], root=root, progress=said.append) == []  # up to date: nothing written
    assert len(said) == 1 and said[0].startswith(f"[1/1] {LESSON}: up to date (")
    released = root / "release" / LESSON / f"{LESSON}.ipynb"
    released.write_text(released.read_text(encoding="utf-8").replace("Lesson 00", "Lesson 0"), encoding="utf-8")
    assert release([LESSON], root=root, progress=said.append) == [released]
    assert said[1].startswith(f"[1/1] {LESSON}: wrote release/{LESSON}/{LESSON}.ipynb (")
    dry = _make("-n", "release")
    assert "-m course_lib release" in dry.stdout  # `make release` runs the command that prints the progress


def test_the_instructors_own_source_is_not_taken_for_tampering(tmp_path, monkeypatch):
    """The instructor's source notebook, submitted unchanged, has its hidden tests in its test cells: that is the
    cell as the instructor wrote it, not an edit. A real edit of a locked cell is still found, in either version."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source" / LESSON, course / "source" / LESSON)
    made = run_nbgrader(["generate_assignment", LESSON, "--force"], course)
    assert made.returncode == 0, made.stderr
    monkeypatch.setattr(common, "trusted_module", lambda: type("NoFork", (), {"available": staticmethod(bool)}))
    db = f"sqlite:///{course / 'gradebook.db'}"

    def flagged(student: str, nb) -> tuple[bool, str]:
        with Gradebook(db) as gb:
            gb.update_or_create_student(student)
            gb.add_submission(LESSON, student)
        info = {"db_url": db, "notebook": LESSON, "assignment": LESSON, "student": student}
        out, _ = RestoreAndFlag().preprocess(nb, {"nbgrader": info})
        with Gradebook(db) as gb:
            return gb.find_submission_notebook(LESSON, LESSON, student).flagged, out.cells[0].source

    assert flagged("source", read(source_path(LESSON)))[0] is False
    edited = read(source_path(LESSON))
    hidden = next(c for c in edited.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_hidden"))
    hidden.source = hidden.source.replace("cases=[", "cases=[[], ")
    is_flagged, note = flagged("edited_source", edited)
    assert is_flagged and f"`{hidden.metadata['nbgrader']['grade_id']}` was edited" in note
    student = read(release_path(LESSON))
    visible = next(c for c in student.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_normalize_rows")
    visible.source = "pass"
    assert flagged("edited_release", student)[0] is True
    assert flagged("released", read(release_path(LESSON)))[0] is False


def test_the_learners_copy_opens_unmodified(tmp_path):
    """JupyterLab writes the running kernel's `kernelspec` and `language_info` into a notebook's metadata when it
    opens it, and a notebook whose metadata then differs opens marked as modified. The learner's copy in work/ is
    written with the metadata of the kernel `make lab` starts, so it opens unmodified (tested in a real JupyterLab
    in tests/test_lab_clean.py)."""
    from course_lib.workflow.workspace import copy_new_lessons, kernel_metadata

    work = tmp_path / "work"
    copy_new_lessons(ROOT / "release", work)
    copied = read(work / LESSON / f"{LESSON}.ipynb")
    expected = kernel_metadata()
    assert copied.metadata["kernelspec"] == expected["kernelspec"]
    assert copied.metadata["language_info"] == expected["language_info"]
    assert expected["language_info"]["version"] == ".".join(map(str, sys.version_info[:3]))
    released = read(release_path(LESSON))
    assert [c.source for c in copied.cells] == [c.source for c in released.cells]
    assert nbformat.writes(copied) != nbformat.writes(released)
    assert os.environ.get("PATH")  # (the kernel metadata is read without starting a kernel)


def test_feedback_goes_into_a_folder_per_student(tmp_path):
    course, dest = tmp_path / "course", tmp_path / "out"
    for student in ("ann", "bob"):
        page = course / "feedback" / student / LESSON / f"{LESSON}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<html>{student}'s feedback</html>", encoding="utf-8")
    (course / "feedback" / "cy" / "01_tokenization").mkdir(parents=True)  # another lesson: not this one's
    copied = instructor.distribute_feedback(course, LESSON, dest)
    assert copied == {s: dest / s / f"{LESSON}.html" for s in ("ann", "bob")}
    assert (dest / "ann" / f"{LESSON}.html").read_text(encoding="utf-8") == "<html>ann's feedback</html>"
    assert sorted(p.name for p in dest.iterdir()) == ["ann", "bob"]
    with pytest.raises(CourseError, match="no feedback for 02_embeddings"):
        instructor.distribute_feedback(course, "02_embeddings", dest)
    assert "-m course_lib feedback 00_welcome --to" in _make("-n", "feedback", f"LESSON={LESSON}", "DEST=x").stdout
    assert "-m course_lib handout" in _make("-n", "handout", "DEST=x").stdout


def test_a_visible_only_source_scores_the_visible_checks_and_releases_the_same_student_version():
    """Without the instructor source (a hand-out), self-grading's nbgrader course is made from the student version:
    each hidden test cell repeats the visible checks for no points, inside a hidden region, so the student version
    it releases is the one shipped and the hidden cells as submitted are not taken for edited ones."""
    released = read(release_path(LESSON))
    source = visible_only_source(released)
    assert [c.source for c in released.cells if not _hidden(c)] == [c.source for c in source.cells if not _hidden(c)]
    for cell in filter(_hidden, source.cells):
        assert cell.metadata["nbgrader"]["points"] == 0
        visible = next(c for c in source.cells if grade_id(c) == grade_id(cell).removesuffix("_hidden")).source
        assert strip_hidden_tests(cell.source).strip() == next(
            c.source for c in released.cells if grade_id(c) == grade_id(cell)
        )
        assert visible.splitlines()[-1] in cell.source  # the visible check's call
    assert all("checksum" not in c.metadata.get("nbgrader", {}) for c in source.cells)


def _hidden(cell) -> bool:
    return (grade_id(cell) or "").endswith("_hidden")
