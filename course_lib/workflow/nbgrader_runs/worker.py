"""One grading worker of the class command: an nbgrader process that grades its share of a class, one submission at
a time, and writes what each came to as a record (`records.Outcome`), never as log text to be read back.

    python -m course_lib.workflow.nbgrader_runs.worker COURSE LESSON RECORDS STUDENT... [-- NBGRADER_OPTION...]

It runs in the course root, with nbgrader's `autograde` application set up once (its configuration,
`nbgrader_config.py`, read once; the trusted grader made once, before the first submission's code runs, by
`RestoreAndFlag`), and then, for each student in turn:
1. writes a `Started` record, so that if this process dies or hangs, the class command knows on whose submission;
2. reads the submitted file with `submissions.read_submission` (any saved form; clear damage repaired, in a copy) and
   puts that copy into a private folder that nbgrader reads as `submitted/`: the student's file is never changed;
3. runs nbgrader's Autograde converter on that one submission. Whatever nbgrader raises, even its own `sys.exit`,
   is caught and costs this submission only: the loop goes on with the next student;
4. writes the `Outcome`: graded, with the score of each exercise, the tamper flag and the repairs; or not graded,
   with the reason in words and whether a later run should try again although the file is unchanged.
The nbgrader log still goes to this process's standard error, for a person reading it; nobody parses it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from course_lib.workflow.startup import read_schema_version_here, skip_slow_imports

__all__ = ["Worker", "main", "plain_reason"]

_WORDS = 300  # a reason is at most this long


def _peak_mib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux (bytes on macOS)
    return int(peak // (1024 if sys.platform != "darwin" else 1024 * 1024))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def plain_reason(exc: BaseException) -> tuple[str, bool]:
    """Why nbgrader could not grade a submission, in words, and whether trying again later could help (the
    gradebook was busy, memory ran out) rather than only a changed file."""
    from nbformat import ValidationError
    from nbgrader.nbgraderformat import SchemaTooNewError, SchemaTooOldError
    from sqlalchemy.exc import SQLAlchemyError

    name, line = type(exc).__name__, _first_line(exc)
    if isinstance(exc, SchemaTooNewError):
        return (
            "its cells carry grading marks of a newer nbgrader than the one grading here, which it cannot read",
            False,
        )
    if isinstance(exc, SchemaTooOldError):
        return "its cells carry grading marks in an old format that nbgrader no longer reads", False
    if isinstance(exc, ValidationError):
        return f"nbgrader found the notebook's structure invalid ({line[:200]})", False
    if isinstance(exc, SQLAlchemyError):
        return f"the gradebook could not be written ({name}: {line[:200]}); it is tried again on the next run", True
    if isinstance(exc, MemoryError):
        return "grading it ran out of memory; it is tried again on the next run", True
    if isinstance(exc, SystemExit):
        return "nbgrader stopped while grading it", False
    if isinstance(exc, ValueError) and line.startswith("this submission"):  # RestoreAndFlag's own words
        return line, False
    return f"nbgrader could not grade it ({name}: {line})"[:_WORDS], False


class _Errors(logging.Handler):
    """The error messages nbgrader logs while it grades one submission (it logs why before it stops)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.said.append(record.getMessage().strip().splitlines()[0])


def _lesson_cells(course: Path, lesson: str, db_url: str):
    """What the reader needs of the lesson, from the gradebook: its cells as released (`SaveCells` stores the
    answer cells as students get them) and which are answers."""
    from nbgrader.api import Gradebook

    from course_lib.workflow.submissions import LessonCells

    with Gradebook(db_url) as gradebook:
        notebook = gradebook.find_notebook(lesson, lesson)
        answers = {cell.name for cell in notebook.solution_cells}
        cells = [(c.name, c.source, c.name in answers) for c in notebook.source_cells]
        cells += [(c.name, "", False) for c in notebook.grade_cells if c.name not in {n for n, _, _ in cells}]
    return LessonCells.of(lesson, cells)


def _scores(db_url: str, lesson: str, student: str) -> tuple[dict[str, list[float]], bool]:
    """Each exercise's [points, out of] in the gradebook, and the tamper flag."""
    from nbgrader.api import Gradebook

    from course_lib import manifest
    from course_lib.workflow.nbgrader_runs.records import exercise_of

    try:
        exercises = [e.name for e in manifest.lesson(lesson).exercises]
    except KeyError:
        exercises = []
    scores: dict[str, list[float]] = {}
    with Gradebook(db_url) as gradebook:
        notebook = gradebook.find_submission_notebook(lesson, lesson, student)
        for grade in notebook.grades:
            owner = exercise_of(grade.name, exercises) or grade.name
            got = scores.setdefault(owner, [0.0, 0.0])
            got[0] += float(grade.score or 0.0)
            got[1] += float(grade.max_score or 0.0)
        return scores, bool(notebook.flagged)


def _converter_class():
    """nbgrader's Autograde, remembering the exception that stopped a submission (nbgrader logs it, then raises a
    message of its own, "see the above traceback")."""
    from nbgrader.converters import Autograde

    class RememberingAutograde(Autograde):
        failure: BaseException | None = None

        def init_assignment(self, assignment_id, student_id):
            try:
                super().init_assignment(assignment_id, student_id)
            except BaseException as exc:
                self.failure = exc
                raise

        def convert_single_notebook(self, notebook_filename):
            try:
                super().convert_single_notebook(notebook_filename)
            except BaseException as exc:
                self.failure = exc
                raise

    return RememberingAutograde


class Worker:
    """nbgrader's autograde application, set up once, grading one submission at a time (module docstring)."""

    def __init__(self, course: Path, lesson: str, options: list[str]):
        from nbgrader.apps.autogradeapp import AutogradeApp

        self.course, self.lesson = course, lesson
        self.app = AutogradeApp()
        self.app.initialize([lesson, "--force", *options])  # reads nbgrader_config.py in the course root
        self.app.coursedir.assignment_id = lesson
        self.db_url = self.app.coursedir.db_url
        self.cells = _lesson_cells(course, lesson, self.db_url)
        self.staging = Path(tempfile.mkdtemp(prefix="course-staging-"))
        self.app.coursedir.submitted_directory = str(self.staging)  # nbgrader reads the repaired copies there
        self.converter = _converter_class()

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def grade(self, student: str):
        """Grade `student`'s submission; return its `Outcome`."""
        import nbformat

        from course_lib.workflow.nbgrader_plugins import KeepGradingWhenKernelDies
        from course_lib.workflow.nbgrader_runs.records import Outcome
        from course_lib.workflow.submissions import Unreadable, fingerprint, read_submission

        started, began = time.monotonic(), time.time()
        folder = self.course / "submitted" / student / self.lesson
        original = folder / f"{self.lesson}.ipynb"
        graded = self.course / "autograded" / student / self.lesson

        def outcome(**fields) -> Outcome:
            return Outcome(
                student,
                self.lesson,
                fingerprint=fingerprint(original) if original.is_file() else "",
                seconds=time.monotonic() - started,
                peak_mib=_peak_mib(),
                limits=KeepGradingWhenKernelDies.limits_said or "",
                pid=os.getpid(),
                started=began,
                **fields,
            )

        try:
            repaired = read_submission(original.read_bytes(), self.cells)
        except (Unreadable, OSError) as exc:
            shutil.rmtree(graded, ignore_errors=True)  # a submission not graded has no graded notebook
            reason = str(exc) if isinstance(exc, Unreadable) else f"the file could not be read ({exc.strerror})"
            return outcome(graded=False, reason=reason)
        stage = self.staging / student / self.lesson
        shutil.rmtree(stage.parent, ignore_errors=True)
        # the files the student sent beside the notebook (nbgrader's timestamp.txt among them) go along
        shutil.copytree(folder, stage, ignore=shutil.ignore_patterns("*.ipynb"))
        nbformat.write(repaired.nb, stage / f"{self.lesson}.ipynb")
        self.app.coursedir.student_id = student
        converter = self.converter(coursedir=self.app.coursedir, parent=self.app)
        errors = _Errors()
        self.app.log.addHandler(errors)
        try:
            converter.start()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # nbgrader's `fail` is a SystemExit: it, too, costs this submission only
            reason, retry = plain_reason(converter.failure or exc)
            if isinstance(converter.failure or exc, SystemExit) and errors.said:
                reason = f"{reason}: {errors.said[-1]}"[:_WORDS]  # what nbgrader said before it stopped
            shutil.rmtree(graded, ignore_errors=True)
            return outcome(graded=False, reason=reason, retry=retry, repairs=repaired.repairs)
        finally:
            self.app.log.removeHandler(errors)
            shutil.rmtree(stage.parent, ignore_errors=True)
        scores, flagged = _scores(self.db_url, self.lesson, student)
        return outcome(graded=True, scores=scores, flagged=flagged, repairs=repaired.repairs)


def main(argv: list[str] | None = None) -> int:
    skip_slow_imports()
    read_schema_version_here()
    argv = list(sys.argv[1:] if argv is None else argv)
    options = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m course_lib.workflow.nbgrader_runs.worker")
    parser.add_argument("course")
    parser.add_argument("lesson")
    parser.add_argument("records", help="folder for one record per student")
    parser.add_argument("students", nargs="+")
    args = parser.parse_args(argv)

    from course_lib.workflow.nbgrader_runs.records import Outcome, Started, write_record

    records = Path(args.records)
    worker = Worker(Path(args.course).resolve(), args.lesson, options)
    try:
        for student in args.students:
            write_record(records, Started(student, time.time()))
            try:
                outcome = worker.grade(student)
            except Exception as exc:  # a fault of the class command's own, on this submission: it costs only this one
                reason = f"the class command failed on it ({type(exc).__name__}: {_first_line(exc)})"[:_WORDS]
                outcome = Outcome(student, args.lesson, graded=False, fingerprint="", reason=reason, retry=True)
                print(f"course: {reason}", file=sys.stderr, flush=True)
            write_record(records, outcome)
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
