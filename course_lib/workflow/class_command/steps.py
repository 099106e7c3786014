"""Grade a class: `python -m course_lib class LESSON ... [--from FOLDER | --exchange] [--workers N]`, set by one
`ClassSettings`.

For each lesson, in the nbgrader course root (`notebooks/` unless `--course` says otherwise):
1. puts the lesson into the gradebook with `generate_assignment` writing into a temporary folder, so the committed
   student version in `release/` is never replaced or deleted (it only warns when `release/` is stale); with
   `--deadline`, records it as the lesson's due date;
2. collects submissions (`course_lib.workflow.submissions`): `--from FOLDER` reads `FOLDER/<student>.ipynb`,
   `FOLDER/<student>/<any name>.ipynb` or nbgrader's `FOLDER/<student>/<lesson>/<lesson>.ipynb`; `--exchange` runs
   `nbgrader collect --update` into a temporary folder and reads that. A new submission is copied to
   `submitted/<student>/<lesson>/<lesson>.ipynb` with nbgrader's `timestamp.txt`; one whose content is the one
   already there is left alone; a changed one is a resubmission: the earlier one, its graded notebook, feedback,
   gradebook record and grading record go to `history/<student>/<lesson>/<received>/`, and the new one is graded;
3. decides who is graded (`plan`): a new or resubmitted file, one changed in `submitted/` since it was graded, one
   never graded, and one whose grading failed for a reason other than the file (its grading process died or
   hung, the gradebook was busy). A file that could not be graded because of what it is (not a notebook, another
   lesson's, refused by nbgrader) is **not tried again until it changes**: each run names it again, with the
   reason, in the console and the report. `--regrade` grades every submission again;
4. autogrades those in N worker processes (`nbgrader_runs.pool`): each worker grades its share one submission at a
   time and reports each as a record, so a submission that crashes, hangs or confuses nbgrader costs that
   submission only (module docstrings of `nbgrader_runs`); each reads the file with `submissions.read_submission`,
   which repairs what is clearly meant (an answer cell pasted twice or split, its marks stripped) in a copy and
   says so. The outcomes are kept in `class_records/<lesson>/<student>.json` for the next run;
5. names students who have no name in the gradebook after their id (formgrader lists "None, None" otherwise), says
   on the console what each resubmission got ("alice: resubmitted, regraded 6/9 → 9/9") and adds it to
   `history/history.csv`;
6. writes feedback (hidden tests left out) for the students graded in this run (and any graded student whose page
   is missing), in as many processes as it graded with (`nbgrader_runs.feedback`), then `class_grades.csv` and
   `class_report.md` (`report.py`), which cover every graded student, not only this run's.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook

from course_lib.workflow import submissions
from course_lib.workflow.class_command.report import GRADES_FILE, REPORT_FILE, write_grades, write_report
from course_lib.workflow.class_command.settings import ClassSettings
from course_lib.workflow.course import CourseError, run_nbgrader, stale_files
from course_lib.workflow.nbgrader_runs.feedback import write_feedback
from course_lib.workflow.nbgrader_runs.pool import Pool, Progress, db_url
from course_lib.workflow.nbgrader_runs.records import Outcome, read_outcome, write_record

__all__ = [
    "STUDENT_ID",
    "ClassResult",
    "Plan",
    "add_to_gradebook",
    "collect_exchange",
    "collect_folder",
    "grade_class",
    "plan",
    "students_of",
]

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")


@dataclass
class Plan:
    """Who of a lesson's students is graded in this run, and why; who is not."""

    to_grade: dict[str, str] = field(default_factory=dict)  # student -> why ("new", "resubmitted", ...)
    kept: list[str] = field(default_factory=list)  # graded before, unchanged: left as they are
    not_retried: dict[str, Outcome] = field(default_factory=dict)  # could not be graded, unchanged: not tried again

    def said(self) -> str:
        """`grading 3 (2 new, 1 resubmitted); 4 graded before and unchanged, left as they are; 1 could not be
        graded before and is unchanged, not tried again (bob)`."""
        kinds: dict[str, int] = {}
        for why in self.to_grade.values():
            kind = why.split(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        parts = [
            f"grading {len(self.to_grade)}" + (f" ({', '.join(f'{n} {k}' for k, n in kinds.items())})" if kinds else "")
        ]
        if self.kept:
            parts.append(f"{len(self.kept)} graded before and unchanged, left as they are")
        if self.not_retried:
            who = ", ".join(sorted(self.not_retried))
            verb = "is" if len(self.not_retried) == 1 else "are"
            parts.append(
                f"{len(self.not_retried)} could not be graded before and {verb} unchanged, not tried again ({who}; "
                "the report says why; --regrade tries every submission again)"
            )
        return "; ".join(parts)


@dataclass
class ClassResult:
    lesson: str
    graded: list[str] = field(default_factory=list)  # graded in this run
    failed: dict[str, str] = field(default_factory=dict)  # tried in this run and not graded: student -> why
    not_retried: dict[str, str] = field(default_factory=dict)  # not graded earlier, unchanged: student -> why
    notes: list[str] = field(default_factory=list)  # collection problems, a stale release, ...
    seconds: float = 0.0
    each: dict[str, float] = field(default_factory=dict)  # student -> seconds a worker spent on the submission
    peak_mib: int = 0  # the largest peak resident memory of the grading workers
    collected: submissions.Collected = field(default_factory=submissions.Collected)
    resubmitted: list[str] = field(default_factory=list)  # "alice: resubmitted, regraded 6/9 → 9/9"
    plan: Plan = field(default_factory=Plan)
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # this run's, by student


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def add_to_gradebook(course: Path, lesson: str) -> list[str]:
    """Record `lesson` in the gradebook from its source without touching `release/`; notes for the instructor."""
    if not (course / "source" / lesson / f"{lesson}.ipynb").is_file():
        raise CourseError(f"no instructor source at {course / 'source' / lesson}")
    notes = []
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        args = ["generate_assignment", lesson, "--force", f"--CourseDirectory.release_directory={tmp}"]
        result = run_nbgrader(args, course)
        if result.returncode:
            raise CourseError(f"nbgrader generate_assignment {lesson} failed:\n{_tail(result.stderr)}")
    if (course / "release" / lesson).is_dir():
        # Compared with what `make release` would write (diagrams inlined, the set-up cell refreshed), not with
        # nbgrader's bare output above: that one always differed for a lesson with diagrams.
        try:
            stale = stale_files(course, [lesson])
        except CourseError as exc:
            notes.append(f"release/ was not compared with the source: {str(exc).splitlines()[0]}")
        else:
            if stale:
                notes.append("release/ differs from the source (run `make release`); grading follows the source")
    return notes


def collect_folder(course: Path, lesson: str, folder: Path) -> submissions.Collected:
    """Collect `folder`'s submissions of `lesson` into `submitted/` (new, unchanged, resubmitted: see
    `submissions.collect`); the inbox itself is never changed."""
    try:
        incoming, notes = submissions.find_incoming(folder, lesson, STUDENT_ID)
    except FileNotFoundError as exc:
        raise CourseError(str(exc)) from None
    collected = submissions.collect(course, lesson, incoming)
    collected.notes = notes + collected.notes
    return collected


def collect_exchange(course: Path, lesson: str) -> submissions.Collected:
    """`nbgrader collect --update` into a temporary folder, then collected from there as from a folder: the
    exchange's newest submission of each student, with nbgrader's timestamp."""
    with tempfile.TemporaryDirectory(prefix="exchange-") as tmp:
        result = run_nbgrader(["collect", lesson, "--update", f"--CourseDirectory.submitted_directory={tmp}"], course)
        if result.returncode:
            collected = submissions.Collected()
            collected.notes.append(f"nbgrader collect {lesson} failed: {_tail(result.stderr, 3)}")
            return collected
        return collect_folder(course, lesson, Path(tmp))


def name_students(course: Path) -> None:
    """Students nbgrader created without a name get their id as last name (formgrader shows it then)."""
    with Gradebook(db_url(course)) as gradebook:
        for student in gradebook.students:
            if student.first_name is None and student.last_name is None:
                student.last_name = student.id
        gradebook.db.commit()


def students_of(course: Path, lesson: str) -> list[str]:
    """Every student with a submission of `lesson` in `submitted/`."""
    return sorted({p.parent.parent.name for p in (course / "submitted").glob(f"*/{lesson}/{lesson}.ipynb")})


def plan(course: Path, lesson: str, collected: submissions.Collected, regrade: bool = False) -> Plan:
    """Who is graded in this run (step 3 of the module docstring)."""
    result = Plan()
    records = course / submissions.RECORDS / lesson
    for student in students_of(course, lesson):
        path = course / "submitted" / student / lesson / f"{lesson}.ipynb"
        graded = (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file()
        outcome = read_outcome(records, student)
        if regrade:
            result.to_grade[student] = "graded again (--regrade)"
        elif student in collected.new:
            result.to_grade[student] = "new"
        elif student in collected.resubmitted:
            result.to_grade[student] = "resubmitted"
        elif outcome is None:
            if graded:  # graded before this record was kept
                result.kept.append(student)
            else:
                result.to_grade[student] = "never graded"
        elif outcome.fingerprint != submissions.fingerprint(path):
            result.to_grade[student] = "changed in submitted/"
        elif outcome.graded:
            if graded:
                result.kept.append(student)
            else:
                result.to_grade[student] = "graded notebook missing"
        elif outcome.retry:
            result.to_grade[student] = f"tried again: {outcome.reason}"
        else:
            result.not_retried[student] = outcome
    return result


def grade_class(settings: ClassSettings) -> list[ClassResult]:
    """Steps 1–6 of the module docstring for each lesson of `settings`; returns what happened to each."""
    course = settings.course
    results = []
    for lesson in settings.lessons:
        notes = add_to_gradebook(course, lesson)
        if settings.deadline is not None:
            submissions.set_deadline(course, lesson, settings.deadline)
        sources = [collect_exchange(course, lesson)] if settings.exchange else []
        if settings.inbox is not None:
            sources.append(collect_folder(course, lesson, settings.inbox))
        collected = submissions.Collected.merged(sources)
        if sources:
            print(f"{lesson}: {_collected(collected)}", file=sys.stderr)
        result = ClassResult(lesson, notes=notes + collected.notes, collected=collected)
        result.plan = plan(course, lesson, collected, settings.regrade)
        print(f"{lesson}: {result.plan.said()}", file=sys.stderr)
        result.not_retried = {s: o.reason for s, o in result.plan.not_retried.items()}
        if result.plan.to_grade:
            _autograde(settings, lesson, result)
        name_students(course)
        result.resubmitted = submissions.record_history(course, lesson, collected.resubmitted)
        for line in result.resubmitted:
            print(line, file=sys.stderr)
        missing = [
            s
            for s in students_of(course, lesson)
            if (course / "autograded" / s / lesson).is_dir() and not (course / "feedback" / s / lesson).is_dir()
        ]
        result.notes += write_feedback(course, lesson, sorted(set(result.graded) | set(missing)), settings.workers)
        results.append(result)
    write_grades(course, course / GRADES_FILE, settings.copy_threshold)
    write_report(course, results, course / REPORT_FILE, settings.copy_threshold)
    return results


def _autograde(settings: ClassSettings, lesson: str, result: ClassResult) -> None:
    """Step 4: grade the plan's students; their outcomes go into `result` and `class_records/`."""
    students = list(result.plan.to_grade)
    start = time.monotonic()
    records = settings.course / submissions.RECORDS / lesson
    options = [*settings.nbgrader_options(), f"--CourseDirectory.db_url={db_url(settings.course)}?timeout=300"]
    pool = Pool(settings.course, lesson, settings.workers, options, settings.hang_after, logs=records / "logs")
    outcomes = pool.grade(students, Progress(len(students), lesson))
    result.seconds = time.monotonic() - start
    result.outcomes = outcomes
    for student, outcome in outcomes.items():
        write_record(records, outcome)
        if outcome.graded:
            result.graded.append(student)
            result.each[student] = outcome.seconds
        else:
            result.failed[student] = outcome.reason
        result.peak_mib = max(result.peak_mib, outcome.peak_mib)
    limits = next((o.limits for o in outcomes.values() if o.limits), "")
    if limits:
        result.notes.append(f"Grading kernels: {limits}")
    if result.failed:
        where = (records / "logs").relative_to(settings.course)
        result.notes.append(f"nbgrader's own messages of this run, for the submissions not graded: {where}/")


def _collected(collected: submissions.Collected) -> str:
    """`collected 2 new, 1 resubmitted (alice), 3 unchanged`."""
    parts = [f"{len(collected.new)} new"]
    if collected.resubmitted:
        parts.append(f"{len(collected.resubmitted)} resubmitted ({', '.join(sorted(collected.resubmitted))})")
    if collected.unchanged:
        parts.append(f"{len(collected.unchanged)} unchanged")
    return "collected " + ", ".join(parts)
