"""`python -m course_lib class`, end to end through real nbgrader runs, on a class of lesson 00 in a temporary course.

The class comes in as a folder of files named by student, as an instructor would get them by e-mail or from an
LMS, with broken and hostile ones among them. Two workers grade it into one gradebook. Checked: the committed
release is never touched, a submission already collected is never overwritten, every submission gets one clear
outcome (graded, or "could not be graded" with the reason in one line), a kernel that dies costs only the
exercise that killed it, grades.csv and the "what the class got wrong" report say what the gradebook holds.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.workflow.classroom import grade_class
from course_lib.workflow.nbgrader_ext import WRAP_CSS
from tests.nbtools import ROOT, answer_names, hidden_lines, read, release_path, solved, with_answer
from tests.test_nbgrader_roundtrip import ONE_WRONG

pytestmark = pytest.mark.slow

LESSON = "00_welcome"
OTHER = "01_tokenization"
KILLERS = {  # answers that end the kernel's process: only their exercise may lose points
    "os_exit": "import os\nos._exit(3)\n",
    "segfault": "import ctypes\nctypes.string_at(0)\n",
}


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("class-course")
    inbox = tmp_path_factory.mktemp("inbox")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    for part in ("source", "release"):
        shutil.copytree(ROOT / part / LESSON, course / part / LESSON)
    release_before = _digest(course / "release")

    full = solved(LESSON)
    name, code, _ = ONE_WRONG[LESSON]
    first = answer_names(full)[0]
    nbformat.write(full, inbox / "full.ipynb")
    nbformat.write(with_answer(full, name, code), inbox / "one_wrong.ipynb")
    (inbox / "renamed").mkdir()
    nbformat.write(with_answer(full, name, code), inbox / "renamed" / "welcome (1).ipynb")
    nbformat.write(read(release_path(LESSON)), inbox / "blank.ipynb")
    nbformat.write(read(release_path(OTHER)), inbox / "wrong_lesson.ipynb")
    (inbox / "malformed.ipynb").write_text("{ this is not a notebook", encoding="utf-8")
    old = nbformat.convert(nbformat.reads(nbformat.writes(full), as_version=4), 3)
    (inbox / "old_format.ipynb").write_text(nbformat.writes(old, version=3), encoding="utf-8")
    bare = nbformat.from_dict(json.loads(nbformat.writes(full)))
    for cell in bare.cells:
        cell.metadata = {}
    nbformat.write(bare, inbox / "no_metadata.ipynb")
    (inbox / "empty.ipynb").write_text("", encoding="utf-8")
    for student, answer in KILLERS.items():
        nbformat.write(with_answer(full, first, answer), inbox / f"{student}.ipynb")
    # Already collected earlier: a different file in the inbox must not replace it.
    kept = course / "submitted" / "kept" / LESSON / f"{LESSON}.ipynb"
    kept.parent.mkdir(parents=True)
    nbformat.write(full, kept)
    kept_bytes = kept.read_bytes()
    nbformat.write(read(release_path(LESSON)), inbox / "kept.ipynb")

    results = grade_class([LESSON], course, inbox, workers=2, timeout=15)
    return course, results, release_before, kept_bytes


def _grades(course: Path) -> dict[str, dict[str, str]]:
    with (course / "grades.csv").open(encoding="utf-8") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def _maxima() -> dict[str, float]:
    nb = read(ROOT / "source" / LESSON / f"{LESSON}.ipynb")
    out: dict[str, float] = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            owner = max((n for n in answer_names(nb) if meta["grade_id"].startswith(f"test_{n}")), key=len)
            out[owner] = out.get(owner, 0) + meta["points"]
    return out


def test_release_is_untouched_and_the_lesson_is_in_the_gradebook(graded):
    course, _, release_before, kept_bytes = graded
    assert _digest(course / "release") == release_before
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_assignment(LESSON).name == LESSON
        students = {s.id: s for s in gb.students}
    assert students["full"].last_name == "full"  # formgrader lists a name, not "None, None"


def test_a_collected_submission_is_never_overwritten(graded):
    course, results, _, kept_bytes = graded
    assert (course / "submitted" / "kept" / LESSON / f"{LESSON}.ipynb").read_bytes() == kept_bytes
    assert any(note.startswith("kept: a different submission") for note in results[0].notes)
    assert _grades(course)["kept"][LESSON] == f"{sum(_maxima().values()):g}"


def test_every_submission_gets_one_outcome(graded):
    course, results, _, _ = graded
    (result,) = results
    assert set(result.failed) == {"malformed", "empty", "wrong_lesson", "no_metadata"}, result.failed
    assert "JSON" in result.failed["malformed"]
    assert "another lesson" in result.failed["wrong_lesson"]
    assert "re-created by copy and paste" in result.failed["no_metadata"]
    for why in result.failed.values():
        assert "\n" not in why and why
    graded_now = {"full", "one_wrong", "renamed", "blank", "kept", "os_exit", "segfault", "old_format"}
    assert set(result.graded) == graded_now
    report = (course / "class_report.md").read_text(encoding="utf-8")
    (course.parent / "class_report_seen.md").write_text(report)  # for a person reading a failure
    for student in result.failed:
        assert f"- **{student}**: could not be graded: " in report
    grades = _grades(course)
    assert grades["malformed"][f"{LESSON} flagged"] == "not graded"


def test_scores_in_grades_csv(graded):
    course, _, _, _ = graded
    grades, maxima = _grades(course), _maxima()
    name, _, _ = ONE_WRONG[LESSON]
    first = answer_names(solved(LESSON))[0]
    for exercise, most in maxima.items():
        column = f"{LESSON}/{exercise}"
        assert float(grades["full"][column]) == most
        assert float(grades["old_format"][column]) == most  # nbformat 3: read as version 4, graded as usual
        assert float(grades["blank"][column]) == 0
        for student in ("one_wrong", "renamed"):
            assert float(grades[student][column]) == (0 if exercise == name else most), (student, exercise)
        for student in KILLERS:  # the kernel died in the first answer cell: the rest is still graded
            assert float(grades[student][column]) == (0 if exercise == first else most), (student, exercise)
    assert grades["full"][LESSON] == f"{sum(maxima.values()):g}" and grades["full"][f"{LESSON} flagged"] == ""


def test_report_names_what_the_class_got_wrong(graded):
    course, _, _, _ = graded
    name, _, words = ONE_WRONG[LESSON]
    report = (course / "class_report.md").read_text(encoding="utf-8")
    row = next(line for line in report.splitlines() if line.startswith(f"| `{name}` |"))
    assert words in row
    lost = int(row.split("|")[2].split("/")[0])
    assert lost == 3  # one_wrong, renamed, blank (the killers lost another exercise; the failed are not counted)


def test_feedback_wraps_and_hides_hidden_tests(graded):
    course, results, _, _ = graded
    files = list((course / "feedback").rglob("*.html"))
    assert {p.parent.parent.name for p in files} == set(results[0].graded)
    lines = hidden_lines(LESSON)
    for path in files:
        text = html.unescape(path.read_text(encoding="utf-8"))
        assert WRAP_CSS.strip() in text
        assert "BEGIN HIDDEN TESTS" not in text and not any(line in text for line in lines)


def test_a_later_run_grades_only_the_new_submission(graded, tmp_path):
    """Runs last (it adds to the class): earlier submissions are neither graded again nor touched."""
    course, (first,), _, _ = graded
    before = {p: p.stat().st_mtime_ns for p in (course / "autograded").rglob("*.ipynb")}
    inbox = tmp_path / "late"
    inbox.mkdir()
    nbformat.write(solved(LESSON), inbox / "late.ipynb")
    (result,) = grade_class([LESSON], course, inbox, workers=2, timeout=15)
    assert result.graded == ["late"]
    assert set(result.failed) == set(first.failed)  # no graded notebook yet: tried again, and failing again
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert _grades(course)["late"][LESSON] == f"{sum(_maxima().values()):g}"
