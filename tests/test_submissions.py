"""How submissions come in (course_lib/workflow/submissions.py): known by content, received when nbgrader's
timestamp or the file says, late against a deadline; and through nbgrader's own exchange, where a student's second
`nbgrader submit` is a resubmission like a changed file in a folder. The whole path with grading is in
tests/test_term.py."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from course_lib.workflow.class_command.steps import collect_exchange
from course_lib.workflow.course import run_nbgrader
from course_lib.workflow.submissions import fingerprint, late_by, parse_deadline, received_at
from tests.nbtools import ROOT, read, release_path, solved

LESSON = "00_welcome"


def test_a_notebook_is_known_by_its_cells_text(tmp_path):
    nb = read(release_path(LESSON))
    nbformat.write(nb, tmp_path / "a.ipynb")
    ran = read(release_path(LESSON))
    ran.cells[3].outputs = (
        [nbformat.v4.new_output("stream", text="printed")] if ran.cells[3].cell_type == "code" else []
    )
    ran.metadata["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
    nbformat.write(ran, tmp_path / "b.ipynb")
    (tmp_path / "c.ipynb").write_text(nbformat.writes(nb).replace("\n", "\r\n"), encoding="utf-8")
    assert fingerprint(tmp_path / "a.ipynb") == fingerprint(tmp_path / "b.ipynb") == fingerprint(tmp_path / "c.ipynb")
    nbformat.write(solved(LESSON), tmp_path / "d.ipynb")
    assert fingerprint(tmp_path / "d.ipynb") != fingerprint(tmp_path / "a.ipynb")
    (tmp_path / "e.ipynb").write_text("{ broken", encoding="utf-8")
    (tmp_path / "f.ipynb").write_text("{ broken too", encoding="utf-8")
    assert fingerprint(tmp_path / "e.ipynb") != fingerprint(tmp_path / "f.ipynb")


def test_received_from_nbgraders_timestamp_else_the_files_time(tmp_path):
    path = tmp_path / "x.ipynb"
    path.write_text("{}", encoding="utf-8")
    when = datetime(2026, 11, 30, 8, 15, tzinfo=UTC)
    os.utime(path, (when.timestamp(), when.timestamp()))
    assert received_at(path) == when
    (tmp_path / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC", encoding="utf-8")
    assert received_at(path) == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    (tmp_path / "timestamp.txt").write_text("2026-12-01 11:00:00+01:00", encoding="utf-8")
    assert received_at(path) == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def test_deadline_and_lateness_read_as_a_person_writes_them():
    assert parse_deadline("2026-12-01T23:59+01:00") == datetime(2026, 12, 1, 22, 59, tzinfo=UTC)
    local = parse_deadline("2026-12-01T23:59")  # this machine's time zone
    assert local == datetime(2026, 12, 1, 23, 59).astimezone().astimezone(UTC)
    with pytest.raises(ValueError, match="--deadline: expected a date and time such as 2026-12-01T23:59"):
        parse_deadline("next friday")
    assert late_by(timedelta(hours=2, minutes=5).total_seconds()) == "2 h 5 min"
    assert late_by(30) == "1 min" and late_by(timedelta(days=1, minutes=1).total_seconds()) == "1 d 1 min"


@pytest.mark.slow
def test_a_second_submit_to_the_exchange_is_a_resubmission(tmp_path):
    """`make class EXCHANGE=1`: nbgrader's exchange in a folder of its own; the student submits, the instructor
    collects; the student submits a changed notebook; the next collection finds a resubmission, keeps the first in
    the history, and gives the new one nbgrader's timestamp."""
    course, exchange, student = tmp_path / "course", tmp_path / "exchange", tmp_path / "student"
    course.mkdir()
    exchange.mkdir(mode=0o777)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    with (course / "nbgrader_config.py").open("a", encoding="utf-8") as f:
        f.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    shutil.copytree(ROOT / "release" / LESSON, course / "release" / LESSON)
    released = run_nbgrader(["release_assignment", LESSON], course)
    assert released.returncode == 0, released.stderr
    (student / LESSON).mkdir(parents=True)
    exchange_option = f"--Exchange.root={exchange}"

    def submit(nb) -> None:
        nbformat.write(nb, student / LESSON / f"{LESSON}.ipynb")
        done = run_nbgrader(
            ["submit", LESSON, "--course", "transformers-from-scratch", "--student", "ann", exchange_option], student
        )
        assert done.returncode == 0, done.stderr

    submit(read(release_path(LESSON)))
    first = collect_exchange(course, LESSON)
    assert first.new == ["ann"], first.notes
    stamp = (course / "submitted" / "ann" / LESSON / "timestamp.txt").read_text(encoding="utf-8")
    submit(solved(LESSON))
    second = collect_exchange(course, LESSON)
    assert list(second.resubmitted) == ["ann"], second.notes
    earlier = second.resubmitted["ann"].folder
    assert (earlier / "submitted" / "timestamp.txt").read_text(encoding="utf-8") == stamp
    assert fingerprint(course / "submitted" / "ann" / LESSON / f"{LESSON}.ipynb") != fingerprint(
        earlier / "submitted" / f"{LESSON}.ipynb"
    )
    assert collect_exchange(course, LESSON).unchanged == ["ann"]  # nothing new: nothing to grade
    assert Path(course / "submitted" / "ann" / LESSON / "timestamp.txt").read_text(encoding="utf-8") > stamp
