"""Damaged notebooks through the real class command, `python -m course_lib class 04_attention 01_tokenization`, in
one run with two workers.

Each lesson's class holds, for every kind of damage in tests/damaged.py, one solved notebook damaged that way (on
an exercise whose answer is a class with methods in lesson 04 and a function in lesson 01), three undamaged ones,
and one that makes nbgrader itself fail (not the answer code): its answer cell carries nbgrader metadata of a newer
schema than nbgrader reads, on which stock nbgrader stops the whole run. It sorts first, so the first worker grades
it before any other. Checked: every damaged submission is graded, as if clean or repaired and said; every exercise
the damage did not touch earns full points, as do the undamaged notebooks, whichever worker grades them; the
confusing one costs only itself, and the students graded after it by the same worker process get full points; the
student's file in `submitted/` is kept as sent.
"""

from __future__ import annotations

import csv
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.workflow.nbgrader_runs.records import read_outcome
from course_lib.workflow.submissions import RECORDS
from tests.damaged import DAMAGES, clean
from tests.nbtools import ROOT, answer_names, grade_id, read, solved, source_path

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("class-damaged")]

DAMAGED = {"04_attention": "CausalSelfAttention", "01_tokenization": "merge_pair"}
CONFUSED = "a_confused"  # sorts first: the first submission of the first worker
CLEAN = ["z_clean_1", "z_clean_2", "z_clean_3"]


def _confusing(nb, name: str) -> bytes:
    """The answer cell's nbgrader metadata says schema version 4; nbgrader 0.9 reads 3 and stops on it."""
    data = json.loads(DAMAGES["list_sources"].build(nb, name))
    cell = next(c for c in data["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == name)
    cell["metadata"]["nbgrader"]["schema_version"] = 4
    return json.dumps(data, indent=1).encode()


def _maxima(lesson: str) -> dict[str, float]:
    out: dict[str, float] = {}
    nb = read(source_path(lesson))
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            owner = max((n for n in answer_names(nb) if meta["grade_id"].startswith(f"test_{n}")), key=len)
            out[owner] = out.get(owner, 0) + meta["points"]
    return out


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    base = tmp_path_factory.mktemp("damaged")
    course = base / "notebooks"
    course.mkdir()
    (base / "images").symlink_to(ROOT.parent / "images")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    inbox = base / "inbox"
    sent: dict[tuple[str, str], bytes] = {}
    for lesson, name in DAMAGED.items():
        for part in ("source", "release"):
            shutil.copytree(ROOT / part / lesson, course / part / lesson)
        full = solved(lesson)
        files = {f"d_{kind}": damage.build(full, name) for kind, damage in DAMAGES.items()}
        files |= {student: clean(full, name) for student in CLEAN}
        files[CONFUSED] = _confusing(full, name)
        for student, raw in files.items():  # as `nbgrader collect` lays them out: <student>/<lesson>/<lesson>.ipynb
            folder = inbox / student / lesson
            folder.mkdir(parents=True)
            (folder / f"{lesson}.ipynb").write_bytes(raw)
            sent[(student, lesson)] = raw
    env = dict(os.environ, COURSE_CALL_TIMEOUT="120")  # generous: a loaded machine never turns a check into a time-out
    command = [sys.executable, "-m", "course_lib", "class", *DAMAGED, "--from", str(inbox), "--course", str(course)]
    done = subprocess.run([*command, "--workers", "2"], env=env, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    return course, sent, done


def _grades(course: Path) -> dict[str, dict[str, str]]:
    with (course / "class_grades.csv").open(encoding="utf-8") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def _report_lines(course: Path, lesson: str) -> dict[str, str]:
    """The class report's line about each student, in `lesson`'s section."""
    report = (course / "class_report.md").read_text(encoding="utf-8")
    section = report.split(f"## {lesson}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("- **")]
    return {line[4 : line.index("**", 4)]: line for line in lines}


@pytest.mark.parametrize("lesson", DAMAGED)
def test_every_damaged_submission_is_graded_and_every_untouched_exercise_earns_full_points(damaged, lesson):
    course, _, _ = damaged
    name, grades, maxima = DAMAGED[lesson], _grades(course), _maxima(lesson)
    lines = _report_lines(course, lesson)
    for kind, damage in DAMAGES.items():
        student = f"d_{kind}"
        for exercise, most in maxima.items():
            expected = 0 if (exercise == name and damage.touches) else most
            assert float(grades[student][f"{lesson}/{exercise}"]) == expected, (student, exercise)
        # what the report says of it, less the answers that read like the course's solutions (they are its own)
        line = lines.get(student, f"- **{student}**: graded").split("; look at: ")[0]
        if not damage.words:  # a saved form: graded as if clean, nothing to say
            assert line == f"- **{student}**: graded", line
            continue
        assert line.startswith(f"- **{student}**: graded; ") and all(w in line for w in damage.words), line
        # honest damage is repaired or named, not taken for tampering; deleted checks are still flagged
        assert (grades[student][f"{lesson} flagged"] == "yes") == (kind == "checks_deleted"), (student, line)
    for student in CLEAN:
        assert grades[student][lesson] == f"{sum(maxima.values()):g}", student


@pytest.mark.parametrize("lesson", DAMAGED)
def test_a_repair_is_said_in_the_students_feedback(damaged, lesson):
    course, _, _ = damaged
    for kind in ("pasted_twice", "split_in_two", "split_by_jupyterlab", "metadata_stripped"):
        page = html.unescape((course / "feedback" / f"d_{kind}" / lesson / f"{lesson}.html").read_text())
        assert "before grading, your notebook was read as follows" in page
        assert all(word in page for word in DAMAGES[kind].words) and f"<code>{DAMAGED[lesson]}</code>" in page


@pytest.mark.parametrize("lesson", DAMAGED)
def test_a_submission_that_makes_nbgrader_fail_costs_only_itself(damaged, lesson):
    course, _, done = damaged
    records = course / RECORDS / lesson
    confused = read_outcome(records, CONFUSED)
    assert confused is not None and not confused.graded and not confused.retry
    assert confused.reason.startswith("its cells carry grading marks of a newer nbgrader than the one grading here")
    assert _report_lines(course, lesson)[CONFUSED] == f"- **{CONFUSED}**: could not be graded: {confused.reason}"
    assert _grades(course)[CONFUSED][f"{lesson} flagged"] == "not graded"
    # The same worker process went on to the next students, in the same run, and they earned full points.
    students = [p.stem for p in records.glob("*.json")]
    outcomes = [read_outcome(records, s) for s in students]
    after = [o for o in outcomes if o.pid == confused.pid and o.started > confused.started]
    assert len(after) >= 5, [(o.student, o.pid) for o in outcomes]
    full = sum(_maxima(lesson).values())
    untouched = [o for o in after if o.student.removeprefix("d_") not in DAMAGES or not DAMAGES[o.student[2:]].touches]
    assert untouched and all(o.graded and o.score == (full, full) for o in untouched)
    assert f"{lesson}: 18 graded now, 1 could not be graded" in done.stdout


def test_the_students_files_are_kept_as_sent(damaged):
    course, sent, _ = damaged
    for (student, lesson), raw in sent.items():
        assert (course / "submitted" / student / lesson / f"{lesson}.ipynb").read_bytes() == raw


def test_the_graded_notebook_has_one_answer_cell_per_exercise(damaged):
    course, _, _ = damaged
    for lesson, name in DAMAGED.items():
        for kind in ("pasted_twice", "split_in_two", "split_by_jupyterlab"):
            graded = read(course / "autograded" / f"d_{kind}" / lesson / f"{lesson}.ipynb")
            assert [grade_id(c) for c in graded.cells].count(name) == 1, (lesson, kind)
