"""`python -m course_lib class`, end to end through real nbgrader runs, on a class of lesson 00 in a temporary course.

The class comes in as a folder of files named by student, as an instructor would get them by e-mail or from an
LMS, with broken and hostile ones among them. Two workers grade it into one gradebook. Checked: the committed
release is never touched, a submission collected earlier and then replaced is kept in the history, every submission
gets one clear outcome (graded, or "could not be graded" with the reason in one line), a kernel that dies costs only
the exercise that killed it, class_grades.csv and the "what the class got wrong" report say what the gradebook
holds.
Hostile submissions: a memory bomb in an answer cell and one in a function the checks call (the per-process limit
ends each, in the trusted grader's sandbox), a cell printing 100 MB, and cells a student added that attack the
gradebook and other students' folders. By default no cell runs in a kernel (nbgrader_config.py, `run_cells`): the
answer cells run only in the grader's sandboxes, and the added cells never run. A second class, graded with every
cell run in a kernel whose writes are not contained (as where Landlock is missing), shows what is detected there.
Each is one line of the class report, or none where nothing happened.
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

from course_lib.workflow.class_command import GRADES_FILE, ClassSettings, grade_class
from course_lib.workflow.class_command.steps import add_to_gradebook
from course_lib.workflow.course import run_nbgrader
from course_lib.workflow.nbgrader_plugins import WRAP_CSS
from tests.nbtools import (
    ROOT,
    answer_names,
    course_copy,
    grade_id,
    hidden_lines,
    read,
    release_path,
    solved,
    with_answer,
)
from tests.test_nbgrader_roundtrip import ONE_WRONG

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("class-command")]  # one class, built once

LESSON = "00_welcome"
OTHER = "01_tokenization"
KILLERS = {  # answers that end the kernel's process, or try to: only their exercise may lose points
    "os_exit": "import os\nos._exit(3)\n",
    "sys_exit": "import sys\nsys.exit(3)\n",  # IPython turns SystemExit into an error in the cell
    "segfault": "import ctypes\nctypes.string_at(0)\n",
}
MEMORY = "1G"  # per process for this class (the course's default is 4G): a bomb reaches it in a second
# No submission here is meant to run out of time, so the time limits are generous: a loaded machine cannot turn a
# memory bomb (or a slow honest cell) into a time-out. Per cell in the kernels, and per sandbox of the trusted grader.
CELL_TIMEOUT = 300
SANDBOX_SECONDS = "120"
MEMORY_BOMB = "hoard = []\nwhile True:\n    hoard.append(b'x' * 2**26)  # 64 MiB more, every page written\n"
CALL_BOMB = "def next_token_pairs(ids):\n    hoard = []\n    while True:\n        hoard.append([0] * 2**24)\n"
PRINTED = 100_000_000  # characters one answer cell prints
# Cells a student added (no nbgrader metadata): nothing runs them by default, and the grader never reads them.
GRADEBOOK_ATTACK = [
    "import sqlite3\n\n# the kernel runs in autograded/<student>/<lesson>/\n"
    "gradebook = sqlite3.connect('../../../gradebook.db')\n"
    "gradebook.execute('UPDATE grade SET manual_score = 0')  # every grade of the class to 0\ngradebook.commit()\n",
    "open('../../../gradebook.db', 'wb').close()  # or empty the gradebook\n",
]
NEIGHBOURS = [
    "submitted/full/00_welcome/00_welcome.ipynb",
    "autograded/full/00_welcome/00_welcome.ipynb",
    "feedback/full/00_welcome/00_welcome.html",
    "submitted/ghost/00_welcome/00_welcome.ipynb",
]
NEIGHBOUR_ATTACK = (
    "import pathlib\n\ncourse = pathlib.Path.cwd().parents[2]\nrefused = []\n"
    f"for target in {NEIGHBOURS!r}:\n"
    "    try:\n        (course / target).parent.mkdir(parents=True, exist_ok=True)\n"
    "        (course / target).write_text('{}')\n"
    "    except OSError as exc:\n        refused.append(f'{target}: {exc.strerror}')\n"
    "if refused:\n    raise PermissionError('refused: ' + '; '.join(refused))\n"
)


def _with_cells(nb, sources: list[str]):
    """`nb` with code cells added after its set-up cell, as a student may add them."""
    nb = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    at = next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup")
    nb.cells[at + 1 : at + 1] = [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def _answer(nb, name: str) -> str:
    return next(c.source for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == name)


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = course_copy(tmp_path_factory.mktemp("class-course"), LESSON)
    inbox = tmp_path_factory.mktemp("inbox")
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
    second = answer_names(full)[1]
    nbformat.write(with_answer(full, first, MEMORY_BOMB), inbox / "memory_bomb.ipynb")
    nbformat.write(with_answer(full, second, CALL_BOMB), inbox / "call_bomb.ipynb")
    printer = with_answer(full, first, f"print('x' * {PRINTED:_})\n\n" + _answer(full, first))
    nbformat.write(printer, inbox / "printer.ipynb")
    nbformat.write(_with_cells(full, GRADEBOOK_ATTACK), inbox / "x_gradebook.ipynb")  # graded late (names sort)
    nbformat.write(_with_cells(full, [NEIGHBOUR_ATTACK]), inbox / "x_neighbour.ipynb")
    # Collected earlier: a different file in the inbox is a resubmission; the earlier one goes to the history.
    kept = course / "submitted" / "kept" / LESSON / f"{LESSON}.ipynb"
    kept.parent.mkdir(parents=True)
    nbformat.write(full, kept)
    kept_bytes = kept.read_bytes()
    nbformat.write(read(release_path(LESSON)), inbox / "kept.ipynb")

    with pytest.MonkeyPatch.context() as patch:  # the nbgrader processes read it when they start
        patch.setenv("COURSE_CALL_TIMEOUT", SANDBOX_SECONDS)
        # Its submissions carry the instructor's solutions, pasted in: every one would be flagged as a copy (that is
        # tested in tests/test_term.py and tests/test_similarity.py); here the report's other lines are.
        settings = ClassSettings(
            (LESSON,), course, inbox, cell_timeout=CELL_TIMEOUT, memory=MEMORY, copy_threshold=None
        )
        results = grade_class(settings)
    return course, results, release_before, kept_bytes


def _grades(course: Path) -> dict[str, dict[str, str]]:
    with (course / GRADES_FILE).open(encoding="utf-8") as f:
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
    # The committed release is what `make release` writes: no note says otherwise (nbgrader's bare output, which
    # keeps the diagrams as file links, always differed from it).
    assert "- note: release/" not in (course / "class_report.md").read_text(encoding="utf-8")


def test_a_stale_release_is_noted_and_left_alone(tmp_path):
    course = course_copy(tmp_path, LESSON)
    released = course / "release" / LESSON / f"{LESSON}.ipynb"
    nb = read(released)
    nb.cells[1].source += "\nAn edit made by hand."
    nbformat.write(nb, released)
    before = released.read_bytes()
    assert add_to_gradebook(course, LESSON) == [
        "release/ differs from the source (run `make release`); grading follows the source"
    ]
    assert released.read_bytes() == before


def test_a_replaced_submission_is_kept_in_the_history(graded):
    """`kept` had a submission collected before (never graded); a different file of theirs in the inbox is a
    resubmission: it is graded, and the earlier file is kept in history/ (nothing is overwritten or lost)."""
    course, (result,), _, kept_bytes = graded
    (earlier,) = (course / "history" / "kept" / LESSON).glob(f"*/submitted/{LESSON}.ipynb")
    assert earlier.read_bytes() == kept_bytes
    assert list(result.collected.resubmitted) == ["kept"] and result.collected.resubmitted["kept"].score is None
    submitted = course / "submitted" / "kept" / LESSON / f"{LESSON}.ipynb"
    assert nbformat.writes(read(submitted)) == nbformat.writes(read(release_path(LESSON)))
    assert _grades(course)["kept"][LESSON] == "0"  # the new file: the student version, untouched
    assert result.resubmitted == ["kept: resubmitted, graded 0/15 (the earlier file had not been graded)"]


def test_every_submission_gets_one_outcome(graded):
    course, results, _, _ = graded
    (result,) = results
    assert set(result.failed) == {"malformed", "empty", "wrong_lesson"}, result.failed
    assert result.failed["malformed"].startswith("the file is not a notebook: it is not valid JSON")
    assert result.failed["empty"] == "the file is empty"
    assert "another lesson" in result.failed["wrong_lesson"]
    for why in result.failed.values():
        assert "\n" not in why and why
    # Every cell's metadata stripped: each answer is the one cell that defines its exercise's names, and the test
    # cells, deleted as far as nbgrader can tell, are restored and flagged (tests/test_repair.py for each kind).
    assert len(result.outcomes["no_metadata"].repairs) == len(_maxima())
    graded_now = {"full", "one_wrong", "renamed", "blank", "kept", "old_format", "no_metadata", *KILLERS}
    graded_now |= {"memory_bomb", "call_bomb", "printer", "x_gradebook", "x_neighbour"}
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
    first, second = answer_names(solved(LESSON))[:2]
    for exercise, most in maxima.items():
        column = f"{LESSON}/{exercise}"
        assert float(grades["full"][column]) == most
        assert float(grades["old_format"][column]) == most  # nbformat 3: read as version 4, graded as usual
        assert float(grades["blank"][column]) == 0
        for student in ("one_wrong", "renamed"):
            assert float(grades[student][column]) == (0 if exercise == name else most), (student, exercise)
        for student in [*KILLERS, "memory_bomb"]:  # the first answer cell ended its kernel or ran out of memory
            assert float(grades[student][column]) == (0 if exercise == first else most), (student, exercise)
        assert float(grades["call_bomb"][column]) == (0 if exercise == second else most)
        for student in ("printer", "x_gradebook", "x_neighbour", "no_metadata"):
            assert float(grades[student][column]) == most, (student, exercise)
    assert grades["full"][LESSON] == f"{sum(maxima.values()):g}" and grades["full"][f"{LESSON} flagged"] == ""


def test_report_names_what_the_class_got_wrong(graded):
    course, _, _, _ = graded
    name, _, words = ONE_WRONG[LESSON]
    report = (course / "class_report.md").read_text(encoding="utf-8")
    row = next(line for line in report.splitlines() if line.startswith(f"| `{name}` |"))
    assert words in row
    lost, graded_count = (int(n) for n in row.split("|")[2].split(" of "))
    assert lost == 4  # one_wrong, renamed, blank, kept (the killers lost another exercise; the failed not counted)
    assert graded_count == 15  # the 18 submissions less the 3 that could not be graded


def test_feedback_wraps_and_hides_hidden_tests(graded):
    course, results, _, _ = graded
    files = list((course / "feedback").rglob("*.html"))
    assert {p.parent.parent.name for p in files} == set(results[0].graded)
    lines = hidden_lines(LESSON)
    for path in files:
        text = html.unescape(path.read_text(encoding="utf-8"))
        assert WRAP_CSS.strip() in text
        assert "BEGIN HIDDEN TESTS" not in text and not any(line in text for line in lines)


def test_feedback_in_two_processes_is_what_one_nbgrader_process_writes(graded, tmp_path):
    """The class command wrote the feedback in two processes, each with the course's exporter (it remembers the
    lesson's HTML from one student to the next); one nbgrader process with the exporter it builds on (formulas
    as MathML, no memory) writes the same pages, byte for byte, the hostile submissions' included."""
    course, results, _, _ = graded
    one = tmp_path / "feedback"
    args = ["generate_feedback", LESSON, "--force", f"--CourseDirectory.feedback_directory={one}"]
    exporter = "--GenerateFeedback.exporter_class=course_lib.workflow.nbgrader_plugins.OfflineMathExporter"
    done = run_nbgrader([*args, exporter], course)
    assert done.returncode == 0, done.stderr[-3000:]
    ours = _digest(course / "feedback")
    assert len([page for page in ours if page.endswith(".html")]) == len(results[0].graded) >= 10
    assert ours == _digest(one)


def _line(course: Path, student: str) -> str:
    """The class report's one line about `student`."""
    report = (course / "class_report.md").read_text(encoding="utf-8")
    found = [line for line in report.splitlines() if line.startswith(f"- **{student}**: ")]
    assert len(found) == 1, report
    return found[0]


def test_memory_bombs_cost_their_exercise_only_and_are_reported(graded):
    course, _, _, _ = graded
    first, second = answer_names(solved(LESSON))[:2]
    assert _line(course, "memory_bomb") == (
        f"- **memory_bomb**: graded; ran out of memory (the limit per process) in `{first}`"
    )
    assert (
        _line(course, "call_bomb")
        == f"- **call_bomb**: graded; ran out of memory (the limit per process) in `{second}`"
    )
    feedback = html.unescape((course / "feedback" / "call_bomb" / LESSON / f"{LESSON}.html").read_text())
    assert "ran out of memory (MemoryError): it allocated more than a graded answer may" in feedback
    report = (course / "class_report.md").read_text(encoding="utf-8")
    note = next(line for line in report.splitlines() if line.startswith("- note: Grading kernels: "))
    assert "no cell runs in a kernel" in note and f"(memory limit {MEMORY} per process;" in note


def _no_line(course: Path, student: str) -> None:
    report = (course / "class_report.md").read_text(encoding="utf-8")
    assert not any(line.startswith(f"- **{student}**: ") for line in report.splitlines()), report


def test_a_cell_printing_100_mb_is_graded_and_prints_nothing_anywhere(graded):
    """The answer cell runs only in the grader's sandbox, whose output goes nowhere: graded, and nothing to cut."""
    course, (result,), _, _ = graded
    first = answer_names(solved(LESSON))[0]
    notebook = course / "autograded" / "printer" / LESSON / f"{LESSON}.ipynb"
    feedback = course / "feedback" / "printer" / LESSON / f"{LESSON}.html"
    assert notebook.stat().st_size < 1_000_000 and feedback.stat().st_size < 1_000_000
    assert [o for c in read(notebook).cells if grade_id(c) == first for o in c.outputs] == []
    _no_line(course, "printer")
    # The nbgrader workers' peak memory is reported (measured figures: docs/MEASUREMENTS.md).
    assert result.peak_mib > 0
    assert f"- note: the nbgrader processes peaked at {result.peak_mib} MiB" in (course / "class_report.md").read_text()


def test_cells_a_student_added_never_run(graded):
    """The gradebook and neighbour attacks are cells without nbgrader metadata: no kernel runs them, so nothing is
    written, nobody's grade changes, and there is nothing to report."""
    course, _, _, _ = graded
    submitted = read(course / "submitted" / "full" / LESSON / f"{LESSON}.ipynb")
    assert nbformat.writes(submitted) == nbformat.writes(solved(LESSON))  # not "{}"
    assert not (course / "submitted" / "ghost").exists()
    assert len(read(course / "autograded" / "full" / LESSON / f"{LESSON}.ipynb").cells) > 5
    assert "<html" in (course / "feedback" / "full" / LESSON / f"{LESSON}.html").read_text()[:2000].lower()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # nobody's grades were set to 0
        scores = [
            g.manual_score for nb in gb.find_assignment(LESSON).submissions for n in nb.notebooks for g in n.grades
        ]
    assert scores and all(score is None for score in scores)
    for student in ("x_gradebook", "x_neighbour"):
        graded_nb = read(course / "autograded" / student / LESSON / f"{LESSON}.ipynb")
        added = [c for c in graded_nb.cells if c.cell_type == "code" and not grade_id(c)]
        assert added and all(c.outputs == [] and c.get("execution_count") is None for c in added)
        _no_line(course, student)


@pytest.fixture(scope="module")
def uncontained(tmp_path_factory):
    """A second class graded with every cell run in a kernel (`run_cells = "always"`) and write containment off (as
    where Landlock is missing): what is detected instead."""
    course = tmp_path_factory.mktemp("uncontained-course")
    inbox = tmp_path_factory.mktemp("uncontained-inbox")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source" / LESSON, course / "source" / LESSON)
    full = solved(LESSON)
    nbformat.write(full, inbox / "full.ipynb")
    attack = (
        "import pathlib\n\nvictim = pathlib.Path.cwd().parents[2] / 'submitted/full/00_welcome/00_welcome.ipynb'\n"
        "victim.write_text(victim.read_text().replace('return counts', 'return {}'))\n"
    )
    nbformat.write(_with_cells(full, [attack]), inbox / "y_attacker.ipynb")
    with (course / "nbgrader_config.py").open("a", encoding="utf-8") as config:  # every cell runs in a kernel
        config.write('\nc.KeepGradingWhenKernelDies.run_cells = "always"\n')
    settings = ClassSettings(
        (LESSON,), course, inbox, workers=1, cell_timeout=CELL_TIMEOUT, contain_writes=False, copy_threshold=None
    )
    (result,) = grade_class(settings)
    return course, result


def test_without_containment_damage_is_detected_flagged_and_said(uncontained):
    course, result = uncontained
    assert set(result.graded) == {"full", "y_attacker"}  # full was graded first (one worker, names sorted)
    assert _grades(course)["full"][LESSON] == f"{sum(_maxima().values()):g}"
    assert _grades(course)["y_attacker"][f"{LESSON} flagged"] == "yes"
    assert "return {}" in (course / "submitted" / "full" / LESSON / f"{LESSON}.ipynb").read_text()  # not undone
    assert _line(course, "y_attacker") == (
        "- **y_attacker**: graded; flagged: while this submission ran, `submitted/full/00_welcome/00_welcome.ipynb` "
        "was changed (writes were not contained)"
    )
    report = (course / "class_report.md").read_text(encoding="utf-8")
    assert "writes NOT contained (turned off (GradingLimits.contain_writes))" in report


def test_a_later_run_grades_only_the_new_submission(graded, tmp_path):
    """Runs last (it adds to the class): earlier submissions are neither graded again nor touched, their feedback is
    not written again, files that could not be graded are not tried again while unchanged (and the report still
    names them, with why), and the report's table still counts every graded student of the lesson."""
    course, (first,), _, _ = graded
    before = {p: p.stat().st_mtime_ns for p in (course / "autograded").rglob("*.ipynb")}
    pages = {p: p.stat().st_mtime_ns for p in (course / "feedback").rglob("*.html")}
    inbox = tmp_path / "late"
    inbox.mkdir()
    nbformat.write(solved(LESSON), inbox / "late.ipynb")
    (result,) = grade_class(ClassSettings((LESSON,), course, inbox, cell_timeout=CELL_TIMEOUT, copy_threshold=None))
    assert result.graded == ["late"] and result.failed == {}
    assert result.not_retried == first.failed  # unchanged, and failing for what the file is: not tried again
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert {p: p.stat().st_mtime_ns for p in pages} == pages  # only the new student's page is written
    assert (course / "feedback" / "late" / LESSON / f"{LESSON}.html").is_file()
    assert _grades(course)["late"][LESSON] == f"{sum(_maxima().values()):g}"
    report = (course / "class_report.md").read_text(encoding="utf-8")
    for student, why in first.failed.items():
        assert f"- **{student}**: could not be graded: {why} (in an earlier run; not tried again until" in report
    name, _, _ = ONE_WRONG[LESSON]
    assert f"| `{name}` | 4 of 16 |" in report  # the 15 graded before and the one graded now
