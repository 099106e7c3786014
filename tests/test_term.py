"""A term of one lesson, end to end through real nbgrader runs (lesson 00, three students, two workers):

release → alice, bob and carol submit (alice with one known mistake, bob after the deadline, carol the instructor's
own source notebook unchanged) → `make class` → alice fixes her answer and submits again → `make class` again:
hers is graded again, the earlier one and its grade are kept in the history, the console says so, the others are
not graded again → `make nbgrader ARGS="export"` leaves the class grades alone → `make feedback` puts each student's
feedback in a folder of their own, the regraded one for alice. Takes about 2-3 minutes on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.__main__ import main
from course_lib.workflow import instructor
from course_lib.workflow.class_command import GRADES_FILE, REPORT_FILE, ClassSettings, grade_class
from tests.nbtools import (
    course_copy,
    grade_id,
    hidden_lines,
    read,
    release_path,
    solved,
    source_path,
    with_answer,
)
from tests.test_nbgrader_roundtrip import ONE_WRONG

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("term")]
LESSON = "00_welcome"
FULL = 15  # five exercises, 2 + 1 points each
DEADLINE = datetime(2026, 12, 1, 23, 59, tzinfo=UTC)
CELL_TIMEOUT = 300  # generous, so a loaded machine never turns an honest cell into a time-out


def _grades(course: Path, name: str = GRADES_FILE) -> dict[str, dict[str, str]]:
    with (course / name).open(encoding="utf-8") as f:
        key = "student" if name == GRADES_FILE else "student_id"
        return {row[key]: row for row in csv.DictReader(f)}


def _submit(inbox: Path, student: str, nb, received: datetime) -> None:
    path = inbox / f"{student}.ipynb"
    nbformat.write(nb, path)
    os.utime(path, (received.timestamp(), received.timestamp()))  # when it came in: the file's time


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    base = tmp_path_factory.mktemp("term")
    course = course_copy(base, LESSON)
    inbox = base / "inbox"
    inbox.mkdir()
    # release: what the students start from is the student version
    student_version = read(course / "release" / LESSON / f"{LESSON}.ipynb")
    assert nbformat.writes(student_version) == nbformat.writes(read(release_path(LESSON)))
    name, code, words = ONE_WRONG[LESSON]
    _submit(inbox, "alice", with_answer(solved(LESSON), name, code), DEADLINE - timedelta(days=1))
    _submit(inbox, "bob", solved(LESSON), DEADLINE + timedelta(hours=2, minutes=5))
    _submit(inbox, "carol", read(source_path(LESSON)), DEADLINE - timedelta(hours=1))

    console = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(console):
        patch.setenv("COURSE_CALL_TIMEOUT", "120")
        first = grade_class(ClassSettings((LESSON,), course, inbox, cell_timeout=CELL_TIMEOUT, deadline=DEADLINE))
        after_first = {
            "grades": _grades(course),
            "report": (course / REPORT_FILE).read_text(encoding="utf-8"),
            "graded": {p: p.stat().st_mtime_ns for p in (course / "autograded").rglob("*.ipynb")},
        }
        # alice fixes her answer and sends the notebook again, before the deadline
        _submit(inbox, "alice", solved(LESSON), DEADLINE - timedelta(hours=3))
        said = len(console.getvalue())
        second = grade_class(ClassSettings((LESSON,), course, inbox, cell_timeout=CELL_TIMEOUT))
    after_first["console"] = console.getvalue()[said:]
    return course, inbox, first, second, after_first


def test_first_round_grades_marks_late_and_trusts_the_instructors_source(term):
    course, _, (first,), _, after = term
    assert sorted(first.graded) == ["alice", "bob", "carol"] and not first.failed
    grades = after["grades"]
    name, _, _ = ONE_WRONG[LESSON]
    assert grades["alice"][LESSON] == f"{FULL - 3}" and grades["alice"][f"{LESSON}/{name}"] == "0"
    assert grades["bob"][LESSON] == f"{FULL}" and grades["bob"][f"{LESSON} late"] == "2 h 5 min"
    assert grades["alice"][f"{LESSON} late"] == "" and grades["carol"][f"{LESSON} late"] == ""
    # the instructor's source, unchanged: full marks, not taken for tampering; its answers are the solutions
    assert grades["carol"][LESSON] == f"{FULL}" and grades["carol"][f"{LESSON} flagged"] == ""
    assert "normalize_rows (100%)" in grades["carol"][f"{LESSON} looks copied"]
    assert "normalize_rows (100%)" in grades["bob"][f"{LESSON} looks copied"]  # the solutions pasted in, as
    # a copier would: flagged for a person to look at, and still full marks (a flag never changes a score)
    report = after["report"]
    assert "- **bob**: graded; late by 2 h 5 min" in report
    carol = next(line for line in report.splitlines() if line.startswith("- **carol**: graded; look at: "))
    assert "no points were taken" in carol and "`normalize_rows` 100% like the instructor's solution" in carol
    assert "flagged" not in carol
    assert f"| `{name}` | 1 of 3 |" in report


def test_a_resubmission_is_regraded_and_the_earlier_one_kept(term):
    course, _, _, (second,), after = term
    assert f"{LESSON}: collected 0 new, 1 resubmitted (alice), 2 unchanged\n" in after["console"]
    said = f"{LESSON}: grading 1 (1 resubmitted); 2 graded before and unchanged, left as they are\n"
    assert said in after["console"]
    assert f"alice: resubmitted, regraded {FULL - 3}/{FULL} → {FULL}/{FULL}" in after["console"]
    assert second.graded == ["alice"]  # bob's and carol's unchanged files are not graded again
    assert second.collected.unchanged == ["bob", "carol"] and list(second.collected.resubmitted) == ["alice"]
    assert second.resubmitted == [f"alice: resubmitted, regraded {FULL - 3}/{FULL} → {FULL}/{FULL}"]
    for path, stamp in after["graded"].items():
        if "alice" not in path.parts:
            assert path.stat().st_mtime_ns == stamp  # not touched
    grades = _grades(course)
    assert grades["alice"][LESSON] == f"{FULL}" and grades["bob"][LESSON] == f"{FULL}"
    earlier = second.collected.resubmitted["alice"]
    kept = earlier.folder
    assert kept.parent == course / "history" / "alice" / LESSON
    name, code, _ = ONE_WRONG[LESSON]
    answer = next(c.source for c in read(kept / "submitted" / f"{LESSON}.ipynb").cells if grade_id(c) == name)
    assert answer == code  # her first file, with the mistake
    assert (kept / "autograded" / f"{LESSON}.ipynb").is_file() and (kept / "feedback" / f"{LESSON}.html").is_file()
    record = json.loads((kept / "grade.json").read_text(encoding="utf-8"))
    assert record["score"] == FULL - 3 and record["max_score"] == FULL
    with (course / "history" / "history.csv").open(encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert row["student"] == "alice" and row["earlier score"] == f"{FULL - 3}/{FULL}"
    assert row["new score"] == f"{FULL}/{FULL}"
    # the gradebook holds one submission of alice's, the new one, received when her new file was
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission(LESSON, "alice")
        assert submission.score == FULL
        assert submission.timestamp == (DEADLINE - timedelta(hours=3)).replace(tzinfo=None)
        assert len([s for s in gb.find_assignment(LESSON).submissions if s.student.id == "alice"]) == 1
    report = (course / REPORT_FILE).read_text(encoding="utf-8")
    assert "Resubmitted and graded again now" in report
    assert f"| `{name}` | 0 of 3 |" in report  # every graded student is counted, not only the one graded now


def test_export_leaves_the_class_grades_alone_and_feedback_reaches_each_student(term, tmp_path):
    course, _, _, _, _ = term
    before = (course / GRADES_FILE).read_bytes()
    assert instructor.main(["--course", str(course), "export"]) == 0  # what `make nbgrader ARGS="export"` runs
    assert (course / GRADES_FILE).read_bytes() == before
    exported = _grades(course, "grades.csv")
    assert {s: float(r["score"]) for s, r in exported.items()} == {"alice": FULL, "bob": FULL, "carol": FULL}

    out = tmp_path / "to-students"
    assert main(["feedback", LESSON, "--to", str(out), "--course", str(course)]) == 0  # `make feedback`
    assert sorted(p.name for p in out.iterdir()) == ["alice", "bob", "carol"]
    hidden = hidden_lines(LESSON)
    for student in ("alice", "bob", "carol"):
        (page,) = list((out / student).iterdir())
        assert page.name == f"{LESSON}.html"
        text = html.unescape(page.read_text(encoding="utf-8"))
        assert "BEGIN HIDDEN TESTS" not in text and not any(line in text for line in hidden)
    _, _, words = ONE_WRONG[LESSON]
    assert f"your {words}" not in html.unescape((out / "alice" / f"{LESSON}.html").read_text())  # regraded
