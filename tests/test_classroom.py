"""The pieces of class grading that need no nbgrader run: start-up savings, collection, the report's wording.

The whole path runs through real nbgrader in tests/test_class_command.py and tests/test_nbgrader_roundtrip.py.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.workflow.class_command import ClassSettings
from course_lib.workflow.class_command.report import first_sentence, remarks, write_report
from course_lib.workflow.class_command.steps import ClassResult, collect_folder, plan
from course_lib.workflow.course import CourseError
from course_lib.workflow.kernels import CUT_MARKER, ConfinedKernelManager
from course_lib.workflow.nbgrader_plugins import FLAG_MARKER, KeepGradingWhenKernelDies
from course_lib.workflow.nbgrader_runs import feedback
from course_lib.workflow.nbgrader_runs.pool import Pool, kernel_threads
from course_lib.workflow.nbgrader_runs.records import Outcome, exercise_of, write_record
from course_lib.workflow.nbgrader_runs.worker import plain_reason
from course_lib.workflow.startup import KERNEL_ARGUMENTS, SLOW_OPTIONAL_IMPORTS
from course_lib.workflow.submissions import RECORDS, Collected, fingerprint
from tests import classbook
from tests.nbtools import ROOT, execute, release_path
from tests.test_course import _Config


def _python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    return result.stdout.strip()


def test_skipped_imports_fail_fast_and_notebooks_still_validate():
    code = (
        "from course_lib.workflow.startup import skip_slow_imports; skip_slow_imports()\n"
        "import sys, jsonschema, nbformat\n"
        f"nbformat.validate(nbformat.read({str(release_path('00_welcome'))!r}, as_version=4))\n"
        f"print([sys.modules[n] for n in {SLOW_OPTIONAL_IMPORTS!r}], jsonschema.FormatChecker.checkers.get('iri'))"
    )
    assert _python(code) == "[None] None"


def test_without_the_skip_the_import_happens():  # so the test above could fail
    code = f"import sys, jsonschema\nprint(all(sys.modules.get(n) is not None for n in {SLOW_OPTIONAL_IMPORTS!r}))"
    assert _python(code) == "True"


def test_nbgrader_commands_that_never_grade_do_not_load_torch():
    assert _python("import sys, course_lib.workflow.nbgrader_plugins\nprint('torch' in sys.modules)") == "False"


def test_a_new_gradebook_gets_nbgraders_schema_version_without_starting_alembic(tmp_path):
    """nbgrader's own answer (an `alembic heads` process) is the version a gradebook made after
    `read_schema_version_here()` holds; that gradebook was made with no `alembic` on the PATH, so it never asked one."""
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    asked = subprocess.run(
        [sys.executable, "-c", "import nbgrader.api; print(nbgrader.api.get_alembic_version())"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env=env,
    ).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{12}", asked), asked
    db = tmp_path / "gradebook.db"
    code = (
        "from course_lib.workflow.startup import read_schema_version_here; read_schema_version_here()\n"
        "import sqlite3, nbgrader.api\n"
        f"nbgrader.api.Gradebook('sqlite:///{db}').close()\n"
        f"print(sqlite3.connect({str(db)!r}).execute('select version_num from alembic_version').fetchone()[0])"
    )
    no_alembic = dict(os.environ, PATH="/nonexistent")
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=no_alembic)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == asked


def test_without_read_schema_version_here_nbgrader_starts_alembic(tmp_path):  # so the test above could fail
    code = f"import nbgrader.api\nnbgrader.api.Gradebook('sqlite:///{tmp_path / 'gradebook.db'}').close()"
    made = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PATH="/nonexistent"),
    )
    assert made.returncode != 0 and "alembic" in made.stderr


def test_when_alembic_cannot_be_read_here_nbgraders_own_way_answers(monkeypatch):
    import nbgrader.api

    from course_lib.workflow import startup

    def two_heads():
        raise RuntimeError("multiple heads")

    monkeypatch.setattr(nbgrader.api, "get_alembic_version", lambda: "asked alembic")
    monkeypatch.setattr(startup, "schema_version", two_heads)
    startup.read_schema_version_here()
    assert nbgrader.api.get_alembic_version() == "asked alembic"


def test_the_kernel_skips_the_import_and_binds_no_name():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("print(__import__('sys').modules.get('rfc3987_syntax', 'absent'), 'sys' in dir())")
    ]
    execute(nb, timeout=600, extra_arguments=list(KERNEL_ARGUMENTS))
    assert nb.cells[0].outputs[0]["text"].strip() == "None False"


def test_a_lessons_set_up_skips_the_import_and_altair_still_validates_charts():
    code = (
        "import sys\nfrom course_lib.lesson import start_lesson\nstart_lesson('00_welcome')\n"
        "import altair as alt, pandas as pd\n"
        "chart = alt.Chart(pd.DataFrame({'x': [1, 2]})).mark_line().encode(x='x:Q', y='x:Q')\n"
        "print(sys.modules['rfc3987_syntax'], sorted(chart.to_dict()['encoding']))\n"
        "try:\n    alt.Chart(pd.DataFrame({'x': [1]})).mark_line().encode(x=alt.X('x:Q', bin='yes')).to_dict()\n"
        "except Exception as exc:\n    print(type(exc).__name__)"
    )
    assert _python(code).splitlines() == ["None ['x', 'y']", "SchemaValidationError"]


def test_config_keeps_grading_when_the_kernel_dies_and_wraps_feedback():
    config = runpy.run_path(str(ROOT / "nbgrader_config.py"), init_globals={"get_config": _Config})["c"]
    autograde = [p.__name__ for p in config["Autograde"]["autograde_preprocessors"]]
    assert autograde[:2] == ["KeepGradingWhenKernelDies", "TrustedVerdicts"] and "Execute" not in autograde
    assert "WrapLongLines" in [p.__name__ for p in config["GenerateFeedback"]["preprocessors"]]
    assert config["Execute"]["shutdown_kernel"] == "immediate"
    assert config["Execute"]["extra_arguments"] == KERNEL_ARGUMENTS
    assert config["GradingLimits"]["memory"] == "4G" and config["GradingLimits"]["contain_writes"] is True
    # nbgrader's Execute would start its own kernel manager; the course's starts confined kernels
    assert KeepGradingWhenKernelDies().kernel_manager_class is ConfinedKernelManager


def test_collect_accepts_named_folders_and_leaves_the_inbox_alone(tmp_path):
    course, inbox = tmp_path / "course", tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "bob").mkdir()
    (inbox / "bob" / "Copy of lesson.ipynb").write_text("bob's", encoding="utf-8")
    (inbox / "cy").mkdir()
    (inbox / "cy" / "a.ipynb").write_text("1", encoding="utf-8")
    (inbox / "cy" / "b.ipynb").write_text("2", encoding="utf-8")
    (inbox / "dee" / "L").mkdir(parents=True)  # as `nbgrader collect` lays them out, with its timestamp
    (inbox / "dee" / "L" / "L.ipynb").write_text("dee's", encoding="utf-8")
    (inbox / "dee" / "L" / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC", encoding="utf-8")
    (inbox / "bad name.ipynb").write_text("x", encoding="utf-8")
    (inbox / "notes.txt").write_text("not a notebook", encoding="utf-8")
    collected = collect_folder(course, "L", inbox)
    assert collected.new == ["bob", "dee"]
    assert (course / "submitted" / "bob" / "L" / "L.ipynb").read_text(encoding="utf-8") == "bob's"
    stamp = (course / "submitted" / "dee" / "L" / "timestamp.txt").read_text(encoding="utf-8")
    assert stamp.startswith("2026-11-30 10:00:00")  # nbgrader reads the time of receipt from here
    assert any(n.startswith("cy: 2 notebooks") for n in collected.notes)
    assert any("'bad name' is not a usable student id" in n for n in collected.notes)
    assert (inbox / "bob" / "Copy of lesson.ipynb").read_text(encoding="utf-8") == "bob's"  # nothing moved


def _notebook(answer: str, outputs: bool = False):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(answer)
    if outputs:
        cell.outputs = [nbformat.v4.new_output("stream", text="ran")]
        cell.execution_count = 3
    nb.cells = [nbformat.v4.new_markdown_cell("# L"), cell]
    return nb


def test_a_changed_submission_is_collected_and_the_earlier_one_kept_in_the_history(tmp_path):
    """A resubmission is known by its content: the earlier file, its graded notebook and feedback move to
    history/, the gradebook forgets its row (so a new grade starts clean), and the new file is collected."""
    course, inbox = tmp_path / "course", tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(_notebook("x = 1"), inbox / "ann.ipynb")
    assert collect_folder(course, "L", inbox).new == ["ann"]
    for step, name in (("autograded", "L.ipynb"), ("feedback", "L.html")):
        (course / step / "ann" / "L").mkdir(parents=True)
        (course / step / "ann" / "L" / name).write_text(f"{step} of the first", encoding="utf-8")

    nbformat.write(_notebook("x = 1", outputs=True), inbox / "ann.ipynb")  # run and saved again: the same
    again = collect_folder(course, "L", inbox)
    assert again.unchanged == ["ann"] and again.copied == []

    nbformat.write(_notebook("x = 2"), inbox / "ann.ipynb")  # a fixed answer
    fixed = collect_folder(course, "L", inbox)
    assert list(fixed.resubmitted) == ["ann"]
    earlier = fixed.resubmitted["ann"]
    assert earlier.folder.parent == course / "history" / "ann" / "L"
    assert "x = 1" in (earlier.folder / "submitted" / "L.ipynb").read_text(encoding="utf-8")
    assert (earlier.folder / "autograded" / "L.ipynb").read_text(encoding="utf-8") == "autograded of the first"
    assert (earlier.folder / "feedback" / "L.html").is_file()
    assert "x = 2" in (course / "submitted" / "ann" / "L" / "L.ipynb").read_text(encoding="utf-8")
    assert not (course / "autograded" / "ann" / "L").exists()  # so it is graded again
    assert not (course / "feedback" / "ann" / "L").exists()

    nbformat.write(_notebook("x = 1"), inbox / "ann.ipynb")  # an old copy turns up again: not collected
    old = collect_folder(course, "L", inbox)
    assert old.copied == [] and "an earlier one" in old.notes[0]
    assert "x = 2" in (course / "submitted" / "ann" / "L" / "L.ipynb").read_text(encoding="utf-8")
    nbformat.write(_notebook("x = 3"), inbox / "ann.ipynb")  # another file, but received before the collected one
    os.utime(inbox / "ann.ipynb", (1e9, 1e9))
    older = collect_folder(course, "L", inbox)
    assert older.copied == [] and "was received earlier" in older.notes[0]


def test_why_nbgrader_could_not_grade_is_said_in_words():
    """The exceptions nbgrader stops on, as the worker reports them: one line, and whether a later run with the same
    file could do better."""
    from nbgrader.nbgraderformat import SchemaTooNewError, SchemaTooOldError
    from sqlalchemy.exc import OperationalError

    assert plain_reason(SchemaTooNewError("schema 4", 4, 3)) == (
        "its cells carry grading marks of a newer nbgrader than the one grading here, which it cannot read",
        False,
    )
    assert plain_reason(SchemaTooOldError("x", 1, 3))[0].startswith("its cells carry grading marks in an old format")
    locked = plain_reason(OperationalError("UPDATE", {}, Exception("database is locked")))
    assert locked[1] and "the gradebook could not be written" in locked[0] and "database is locked" in locked[0]
    wrong = ValueError("this submission has none of the graded cells of 00_welcome/00_welcome: it is ...")
    assert plain_reason(wrong) == (str(wrong), False)
    other, retry = plain_reason(RuntimeError("Inconsistent checksums for cell test_x\nmore"))
    assert other == "nbgrader could not grade it (RuntimeError: Inconsistent checksums for cell test_x)" and not retry
    assert plain_reason(SystemExit(1))[0].startswith("nbgrader stopped while grading it")


def test_report_wording():
    assert exercise_of("test_merge_pair_hidden", ["merge", "merge_pair"]) == "merge_pair"
    assert exercise_of("test_other", ["merge"]) is None
    message = "[normalize_rows] your columns sum to 1, not your rows: sum over dim=1. Got 0.5 at [0, 1]."
    assert first_sentence(message) == "your columns sum to 1, not your rows: sum over dim=1."
    assert first_sentence("no full stop\nsecond line") == "no full stop"


def test_class_settings_are_checked_and_become_the_workers_options(tmp_path):
    settings = ClassSettings(("00_welcome",), tmp_path)
    assert settings.nbgrader_options() == [] and settings.workers == 2 and settings.course == tmp_path.resolve()
    limited = ClassSettings(("00_welcome",), tmp_path, memory="2G", contain_writes=False, cell_timeout=30)
    assert limited.nbgrader_options() == [
        "--GradingLimits.memory=2G",
        "--GradingLimits.contain_writes=False",
        "--Execute.timeout=30",
    ]
    with pytest.raises(CourseError, match="--memory: expected a size such as 4G"):
        ClassSettings(("00_welcome",), tmp_path, memory="a lot")
    with pytest.raises(CourseError, match="'99_nothing' is not a lesson of this course"):
        ClassSettings(("99_nothing",), tmp_path)
    with pytest.raises(CourseError, match="--copy-threshold: expected a number in"):
        ClassSettings(("00_welcome",), tmp_path, copy_threshold=1.5)
    with pytest.raises(CourseError, match="--workers: expected 1 or more"):
        ClassSettings(("00_welcome",), tmp_path, workers=0)
    with pytest.raises(AttributeError):
        settings.workers = 3  # frozen: one run's settings do not change under it


def _cell(grade_id: str | None, *outputs):
    cell = nbformat.v4.new_code_cell("...")
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id}
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def _error(name: str, value: str) -> dict:
    return {"output_type": "error", "ename": name, "evalue": value, "traceback": []}


def test_remarks_say_what_happened_in_one_phrase_each():
    note = nbformat.v4.new_markdown_cell(f"<!-- {FLAG_MARKER} -->\n**Note**\n\n- locked cell `setup` was deleted")
    cut = {"output_type": "display_data", "metadata": {}, "data": {"text/plain": f"{CUT_MARKER} 9 came, 5 dropped"}}
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        note,
        _cell(None, _error("PermissionError", "[Errno 13] Permission denied: '../../../gradebook.db'")),
        _cell("count_characters", _error("MemoryError", "")),
        _cell("test_count_characters", _error("GradingError", "[count_characters] f(...) ran out of memory")),
        _cell("next_token_pairs", {"output_type": "stream", "name": "stdout", "text": "x" * 5}, cut),
        _cell("normalize_rows", _error("DeadKernelError", "the kernel died before this cell ran")),
        _cell("test_normalize_rows", _error("DeadKernelError", "the kernel died before this cell ran")),
        _cell(None, _error("ValueError", "an ordinary mistake")),
    ]
    assert remarks(nb, ["count_characters", "next_token_pairs", "normalize_rows"]) == [
        "flagged: locked cell `setup` was deleted",
        "a write was refused in cell 2 (PermissionError: [Errno 13] Permission denied: '../../../gradebook.db')",
        "ran out of memory (the limit per process) in `count_characters`",
        "its kernel died at `normalize_rows`",
        "output cut in `next_token_pairs` (9 came, 5 dropped)",
    ]
    assert remarks(nbformat.v4.new_notebook(), []) == []


def test_workers_share_the_cores_among_their_kernels(monkeypatch):
    """Each worker's kernels get cores // workers threads (two kernels with a thread per core each fought over 2
    cores: lesson 04's class graded about as slowly with 2 workers as with 1)."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert [kernel_threads(w) for w in (1, 2, 3, 4, 8)] == [4, 2, 1, 1, 1]


def test_report_counts_students_who_lost_points_and_cuts_messages_at_a_word(tmp_path):
    """The exercise table says how many students lost points, out of how many (it read `1 / 3`, as if points),
    and a long message is shortened at a word with an ellipsis, never mid-word."""
    course = classbook.build(tmp_path / "course", {"ann": {"normalize_rows": 1}, "bob": {}, "cy": {}})
    write_report(course, [ClassResult(classbook.LESSON)], course / "class_report.md")
    report = (course / "class_report.md").read_text(encoding="utf-8")
    assert "| exercise | students who lost points | most frequent messages (students) |" in report
    assert "| `normalize_rows` | 1 of 3 |" in report and "| `count_characters` | 0 of 3 |" in report
    sentence = "the answer " + "considerably " * 30 + "wrong."
    short = first_sentence(sentence)
    assert len(short) <= 200 and short.endswith("considerably …")
    assert first_sentence("short and whole. Then more.") == "short and whole."


class _Started:
    """A stand-in for a feedback process: remembers its command, exits with `code`, logs `log`."""

    made: list[list[str]] = []

    def __init__(self, command, stderr, code=0, **kwargs):
        _Started.made.append(command)
        self.code = code
        stderr.write(f"[GenerateFeedback | ERROR] process {len(_Started.made)} broke\n")

    def wait(self):
        return self.code


def test_feedback_gives_each_graded_student_to_exactly_one_process(tmp_path, monkeypatch):
    """write_feedback starts one generate_feedback per worker for the students it is given; each leaves out every
    other graded student, so each page asked for is written by one process, the others' pages are not written
    again, and a class smaller than the workers starts fewer."""
    students = ["ann", "bob", "cy", "dee", "ed"]
    for student in students:
        (tmp_path / "autograded" / student / "L").mkdir(parents=True)
    (tmp_path / "autograded" / "zed" / "other_lesson").mkdir(parents=True)  # not graded in this lesson
    monkeypatch.setattr(feedback.subprocess, "Popen", _Started)
    for chosen in (students, ["bob", "dee"]):
        for workers in (1, 2, 3, 8):
            _Started.made = []
            assert feedback.write_feedback(tmp_path, "L", chosen, workers) == []
            assert len(_Started.made) == min(workers, len(chosen))
            writes = []
            for command in _Started.made:
                assert command[command.index("generate_feedback") + 1 :][:2] == ["L", "--force"]
                option = [a for a in command if a.startswith("--CourseDirectory.student_id_exclude=")]
                left_out = option[0].split("=", 1)[1].split(",") if option else []
                writes += [s for s in students if s not in left_out]
            assert sorted(writes) == chosen
    _Started.made = []
    assert feedback.write_feedback(tmp_path, "L", ["zed"], 2) == [] and _Started.made == []  # nobody graded: none


def test_feedback_says_which_process_failed(tmp_path, monkeypatch):
    (tmp_path / "autograded" / "ann" / "L").mkdir(parents=True)
    (tmp_path / "autograded" / "bob" / "L").mkdir(parents=True)
    monkeypatch.setattr(feedback.subprocess, "Popen", lambda command, **kw: _Started(command, code=1, **kw))
    _Started.made = []
    failed = feedback.write_feedback(tmp_path, "L", ["ann", "bob"], 2)
    assert failed == [
        "generate_feedback failed: [GenerateFeedback | ERROR] process 1 broke",
        "generate_feedback failed: [GenerateFeedback | ERROR] process 2 broke",
    ]


def test_a_worker_that_crashes_or_hangs_costs_only_that_submission(tmp_path, monkeypatch):
    """The pool of grading workers, with stand-in workers (tests/stand_in_worker.py) that die of a real segmentation
    fault on one student and never finish another: those two are reported not graded, with why, to be tried again
    on the next run, and every student after them in the same share is graded by a new worker in the same run."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT.parent))
    stand_in = [sys.executable, "-m", "tests.stand_in_worker"]
    pool = Pool(tmp_path, "L", workers=2, hang_after=2, command=stand_in, private_library=False)
    students = ["a", "b", "crash", "c", "d", "e", "hang", "f", "g"]  # worker 1 gets a, crash, d, hang and g
    outcomes = pool.grade(students)
    assert list(outcomes) == students
    assert {s for s, o in outcomes.items() if o.graded} == set(students) - {"crash", "hang"}
    crash, hang = outcomes["crash"], outcomes["hang"]
    assert not crash.graded and crash.retry
    assert crash.reason.startswith("the grading process ended while grading it (signal SIGSEGV)")
    assert not hang.graded and hang.retry
    assert hang.reason.startswith("grading it took longer than 2 s, so its grading process was stopped")
    # the students after each, in the same share, each graded by a new process
    assert len({outcomes[s].pid for s in ("a", "d", "g")}) == 3
    assert outcomes["b"].pid == outcomes["f"].pid  # the other share's worker never stopped


def test_a_worker_that_cannot_start_says_why_for_each_of_its_students(tmp_path):
    pool = Pool(tmp_path, "L", workers=1, command=[sys.executable, "-c", "raise SystemExit('no gradebook here')"])
    outcomes = pool.grade(["a", "b"])
    for outcome in outcomes.values():
        assert not outcome.graded and outcome.retry
        assert outcome.reason == "the grading process stopped before grading it (exit code 1: no gradebook here)"


def test_a_run_grades_the_new_the_changed_and_what_failed_for_a_reason_other_than_the_file(tmp_path):
    """Who the class command grades (`steps.plan`), from the files in submitted/, the graded notebooks and the
    records of earlier runs; and what the console says about it, in one line."""
    course = tmp_path
    records = course / RECORDS / "L"

    def submit(student: str, text: str, graded: bool = False, outcome: dict | None = None) -> None:
        path = course / "submitted" / student / "L" / "L.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(_notebook(text), path)
        if graded:
            (course / "autograded" / student / "L").mkdir(parents=True, exist_ok=True)
            (course / "autograded" / student / "L" / "L.ipynb").write_text("{}", encoding="utf-8")
        if outcome is not None:
            said = fingerprint(path) if outcome.pop("same", True) else "0" * 16
            write_record(records, Outcome(student, "L", fingerprint=said, **outcome))

    submit("ann", "new")
    submit("bob", "resubmitted")
    submit("cy", "graded before", graded=True, outcome={"graded": True})
    submit("dee", "graded before the records were kept", graded=True)
    submit("ed", "edited in submitted/ by hand", graded=True, outcome={"graded": True, "same": False})
    submit("flo", "its worker died", outcome={"graded": False, "reason": "the process ended", "retry": True})
    submit("gus", "not a notebook", outcome={"graded": False, "reason": "the file is empty"})
    submit("hal", "never graded")
    submit("ivy", "graded notebook deleted", outcome={"graded": True})
    collected = Collected(new=["ann"], unchanged=["cy", "dee", "ed", "flo", "gus", "hal", "ivy"])
    collected.resubmitted["bob"] = None  # what the history kept is not needed to plan
    decided = plan(course, "L", collected)
    assert decided.to_grade == {
        "ann": "new",
        "bob": "resubmitted",
        "ed": "changed in submitted/",
        "flo": "tried again: the process ended",
        "hal": "never graded",
        "ivy": "graded notebook missing",
    }
    assert decided.kept == ["cy", "dee"] and list(decided.not_retried) == ["gus"]
    assert decided.said() == (
        "grading 6 (1 new, 1 resubmitted, 1 changed in submitted/, 1 tried again, 1 never graded, 1 graded notebook "
        "missing); 2 graded before and unchanged, left as they are; 1 could not be graded before and is unchanged, "
        "not tried again (gus; the report says why; --regrade tries every submission again)"
    )
    everyone = plan(course, "L", collected, regrade=True)
    assert len(everyone.to_grade) == 9 and not everyone.kept and not everyone.not_retried
