"""Grade a class: `python -m course_lib class LESSON ... [--from FOLDER | --exchange] [--workers N]`.

For each lesson, in the nbgrader course root (`notebooks/` unless `--course` says otherwise):
1. puts the lesson into the gradebook with `generate_assignment` writing into a temporary folder, so the
   committed student version in `release/` is never replaced or deleted (it only warns when `release/` is stale);
   with `--deadline`, records it as the lesson's due date;
2. collects submissions (`submissions.py`): `--from FOLDER` reads `FOLDER/<student>.ipynb`,
   `FOLDER/<student>/<any name>.ipynb` or nbgrader's `FOLDER/<student>/<lesson>/<lesson>.ipynb`; `--exchange` runs
   `nbgrader collect --update` into a temporary folder and reads that. A new submission is copied to
   `submitted/<student>/<lesson>/<lesson>.ipynb` with nbgrader's `timestamp.txt`; one whose content is the one
   already there is left alone; a changed one is a resubmission: the earlier one, its graded notebook, feedback
   and gradebook record go to `history/<student>/<lesson>/<received>/`, and the new one is graded;
3. autogrades every submission without a graded notebook (one that failed before is tried again; all of them
   with `--regrade`) in N worker processes, each an nbgrader process grading its share of the class into the
   one gradebook (SQLite waits for the other writer), with a progress line and an ETA. Each worker imports its
   own copy of `course_lib` (as the round-trip tests do): what a submission writes there is put back by that
   worker, never blamed on another worker's student, and never lands in the instructor's checkout. Every
   kernel runs confined (`kernels.py`: `--memory` per process, with Landlock writes only in its own folder), and
   each worker reports its peak memory. Each worker's kernels get an equal share of the cores as torch's thread
   count (`OMP_NUM_THREADS`, unless it is set already): two kernels that each start one thread per core fight
   over the cores, and a lesson that trains graded about as slowly with 2 workers as with one;
4. names students who have no name in the gradebook after their id (formgrader lists "None, None" otherwise),
   says on the console what each resubmission got ("alice: resubmitted, regraded 6/9 → 9/9") and adds it to
   `history/history.csv`;
5. writes feedback (hidden tests left out) in as many processes as it graded with, each writing its share of the
   students (a student's page depends on that student's graded notebook and gradebook record only, so the pages
   are the ones one nbgrader process writes), then `class_grades.csv` and `class_report.md` (`class_report.py`:
   one line for each submission that could not be graded or has something to look at: flagged, late, an answer
   that looks copied from the course's code at `--copy-threshold` or above, ...).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from nbgrader.api import Gradebook

from course_lib import manifest
from course_lib.grading.kit.confine import parse_size
from course_lib.workflow import submissions
from course_lib.workflow.class_report import GRADES_FILE, REPORT_FILE, write_grades, write_report
from course_lib.workflow.course import REPO_ROOT, CourseError, course_root, run_nbgrader, stale_files
from course_lib.workflow.similarity import DEFAULT_THRESHOLD
from course_lib.workflow.startup import PEAK_MEMORY

__all__ = [
    "ClassResult",
    "add_to_gradebook",
    "autograde_parallel",
    "collect_exchange",
    "collect_folder",
    "feedback_parallel",
    "grade_class",
]

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
_STAMPED = re.compile(r"^(\d+\.\d+) (\w+) (.*)$")
_LOG_FORMAT = "--NbGrader.log_format=%(created).3f %(levelname)s %(message)s"


@dataclass
class ClassResult:
    lesson: str
    graded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # student -> why nbgrader could not grade it
    notes: list[str] = field(default_factory=list)  # collection problems, a stale release, ...
    seconds: float = 0.0
    each: dict[str, float] = field(default_factory=dict)  # student -> seconds nbgrader spent on the submission
    peak_mib: int = 0  # the largest peak resident memory of the nbgrader worker processes
    collected: submissions.Collected = field(default_factory=submissions.Collected)
    resubmitted: list[str] = field(default_factory=list)  # "alice: resubmitted, regraded 6/9 → 9/9"


def _db_url(course: Path) -> str:
    return f"sqlite:///{(course / 'gradebook.db').resolve()}"


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
    with Gradebook(_db_url(course)) as gradebook:
        for student in gradebook.students:
            if student.first_name is None and student.last_name is None:
                student.last_name = student.id
        gradebook.db.commit()


def _library_copy(into: Path) -> Path:
    """A private copy of the course package for one worker and the kernels it starts."""
    shutil.copytree(REPO_ROOT / "course_lib", into / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    if (REPO_ROOT / "data").exists():
        (into / "data").symlink_to(REPO_ROOT / "data")
    return into


class _Progress:
    def __init__(self, total: int, label: str):
        self.total, self.done, self.label, self.start = total, 0, label, time.monotonic()
        self.lock = threading.Lock()

    def step(self) -> None:
        with self.lock:
            self.done += 1
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            bar = "#" * (20 * self.done // max(self.total, 1))
            line = f"{self.label} [{bar:<20}] {self.done}/{self.total} graded, {elapsed:.0f} s, ETA {eta:.0f} s"
            end = "\r" if sys.stderr.isatty() and self.done < self.total else "\n"
            print(line, end=end, file=sys.stderr, flush=True)


_EXCEPTION = re.compile(r"^(?:[\w]+\.)*(\w+(?:Error|Exception|Exit)): ?(.*)$")


def _reason(trace: list[str]) -> str:
    """One line from a logged traceback: its first exception (the cause), and the last when it is another."""
    found = [f"{m.group(1)}: {m.group(2)}" for m in map(_EXCEPTION.match, trace) if m]
    if not found:
        return (trace[-1] if trace else "nbgrader could not process it")[:300]
    text = found[0] if found[0] == found[-1] else f"{found[0]} (then {found[-1]})"
    return text[:300]


def _follow(command: list[str], course: Path, env: dict[str, str], progress: _Progress, result: ClassResult):
    """Run one worker and read its log as it comes: who is graded, who failed and why (one line)."""
    process = subprocess.Popen(
        command, cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    current, failing, trace, begun = None, None, [], 0.0
    assert process.stdout is not None
    for raw in process.stdout:
        if raw.startswith(PEAK_MEMORY):
            result.peak_mib = max(result.peak_mib, int(raw.removeprefix(PEAK_MEMORY).split()[0]))
            continue
        match = _STAMPED.match(raw.rstrip("\n"))
        if not match or (failing is not None and match.group(3).startswith("Traceback")):
            if failing is not None and raw.strip():
                trace.append(raw.strip())
            continue
        if failing is not None:
            result.failed[failing] = _reason(trace)
            failing, trace = None, []
        stamp, level, message = match.groups()
        started = re.match(r"Creating/updating student with ID '([^']+)'", message)
        if started:
            if current is not None:
                progress.step()
            current, begun = started.group(1), float(stamp)
        elif message.startswith("Setting destination file permissions") and current is not None:
            result.graded.append(current)
            result.each[current] = float(stamp) - begun
        elif level == "ERROR" and message.startswith("There was an error processing assignment:"):
            failing = current
        elif message.startswith("Grading kernels: ") and message not in result.notes:
            result.notes.append(message)
    if failing is not None:
        result.failed[failing] = _reason(trace)
    process.wait()
    if current is not None:
        progress.step()


def kernel_threads(workers: int) -> int:
    """Threads for each worker's kernels: the cores this process may use, shared equally, at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, workers))


def autograde_parallel(
    course: Path,
    lesson: str,
    students: list[str],
    workers: int = 2,
    timeout: int | None = None,
    limits: list[str] | None = None,
) -> ClassResult:
    """Autograde `students`' submissions of `lesson` in `workers` nbgrader processes (see module docstring);
    `limits`: nbgrader options for the grading kernels (`_limit_options`)."""
    result = ClassResult(lesson)
    groups = _split(students, workers)
    progress = _Progress(len(students), lesson)
    start = time.monotonic()
    everyone = set(students_to_grade(course, lesson, regrade=True))  # all submissions, graded or not
    with tempfile.TemporaryDirectory(prefix="class-workers-") as tmp:
        threads = []
        for k, group in enumerate(groups):
            # A worker grades its group only: nbgrader takes every submission it is not told to leave out.
            others = sorted(everyone - set(group)) or ["-"]
            library = _library_copy(Path(tmp) / f"worker-{k}")
            env = dict(os.environ)
            env.setdefault("OMP_NUM_THREADS", str(kernel_threads(len(groups))))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(library), env.get("PYTHONPATH")) if p)
            env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
            command = [sys.executable, "-m", "course_lib.workflow.startup", "--report-peak-memory"]
            command += ["autograde", lesson, "--force", *(limits or [])]
            command += [f"--CourseDirectory.student_id_exclude={','.join(others)}", _LOG_FORMAT]
            command += [f"--CourseDirectory.db_url={_db_url(course)}?timeout=300"]
            if timeout:
                command.append(f"--Execute.timeout={timeout}")
            thread = threading.Thread(target=_follow, args=(command, course, env, progress, result))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
    for student in students:
        if student not in result.graded and student not in result.failed:
            result.failed[student] = "nbgrader gave no result for this submission"
    result.graded = [s for s in result.graded if s not in result.failed]
    result.seconds = time.monotonic() - start
    return result


def _split(students: list[str], workers: int) -> list[list[str]]:
    """`students` dealt out to at most `workers` groups, none empty (a class sorted by name is mixed across them)."""
    return [students[i::workers] for i in range(max(1, workers)) if students[i::workers]]


def feedback_parallel(course: Path, lesson: str, workers: int = 2, env: dict[str, str] | None = None) -> list[str]:
    """nbgrader's `generate_feedback LESSON --force` for every graded submission of `lesson`, in `workers`
    processes, each given its share of the students (`--CourseDirectory.student_id_exclude` the others, as the
    autograde workers are): the same files one process writes, in about 1/workers of the time on as many cores.
    `env`: extra environment variables for the processes. Returns one line per process that failed (empty: none)."""
    students = sorted(p.parent.name for p in (course / "autograded").glob(f"*/{lesson}") if p.is_dir())
    groups = _split(students, workers) or [[]]
    full_env = dict(os.environ) | (env or {})
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    failed = []
    with contextlib.ExitStack() as logs:
        running = []
        for group in groups:
            command = [sys.executable, "-m", "course_lib.workflow.startup", "generate_feedback", lesson, "--force"]
            if len(groups) > 1:
                others = sorted(set(students) - set(group))
                command += [f"--CourseDirectory.student_id_exclude={','.join(others)}"]
                command += [f"--CourseDirectory.db_url={_db_url(course)}?timeout=300"]
            # Its log goes to a file: a pipe nobody reads while we wait for another process would stall this one.
            log = logs.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
            process = subprocess.Popen(command, cwd=course, env=full_env, stdout=subprocess.DEVNULL, stderr=log)
            running.append((process, log))
        for process, log in running:
            if process.wait():
                log.seek(0)
                failed.append(f"generate_feedback failed: {_tail(log.read(), 3)}")
    return failed


def students_to_grade(course: Path, lesson: str, regrade: bool = False) -> list[str]:
    students = sorted({p.parent.parent.name for p in (course / "submitted").glob(f"*/{lesson}/*.ipynb")})
    if regrade:
        return students
    return [s for s in students if not (course / "autograded" / s / lesson).is_dir()]


def _limit_options(memory: str | None, contain_writes: bool) -> list[str]:
    """nbgrader options for `kernels.GradingLimits`: `memory` per process (None: nbgrader_config.py's)."""
    options = []
    if memory is not None:
        try:
            parse_size(memory)
        except ValueError as exc:
            raise CourseError(f"--{exc}") from None
        options.append(f"--GradingLimits.memory={memory}")
    if not contain_writes:
        options.append("--GradingLimits.contain_writes=False")
    return options


def grade_class(
    lessons: list[str],
    course: Path | None = None,
    folder: Path | None = None,
    exchange: bool = False,
    workers: int = 2,
    timeout: int | None = None,
    regrade: bool = False,
    memory: str | None = None,
    contain_writes: bool = True,
    deadline: datetime | None = None,
    copy_threshold: float | None = DEFAULT_THRESHOLD,
) -> list[ClassResult]:
    """Steps 1–5 of the module docstring for each lesson; returns what happened to each. `memory` and
    `contain_writes` override `GradingLimits` in nbgrader_config.py (see course_lib/workflow/kernels.py);
    `deadline` (aware) becomes each lesson's due date; `copy_threshold`: see `similarity.py` (None: answers are not
    compared)."""
    course = (course or course_root()).resolve()
    limits = _limit_options(memory, contain_writes)
    results = []
    for lesson in lessons:
        try:
            manifest.lesson(lesson)
        except KeyError:
            raise CourseError(f"{lesson!r} is not a lesson of this course") from None
        notes = add_to_gradebook(course, lesson)
        if deadline is not None:
            submissions.set_deadline(course, lesson, deadline)
        sources = [collect_exchange(course, lesson)] if exchange else []
        if folder is not None:
            sources.append(collect_folder(course, lesson, folder))
        collected = submissions.Collected.merged(sources)
        if sources:
            print(f"{lesson}: {_collected(collected)}", file=sys.stderr)
        notes += collected.notes
        students = students_to_grade(course, lesson, regrade)
        result = autograde_parallel(course, lesson, students, max(1, workers), timeout, limits) if students else None
        result = result or ClassResult(lesson)
        result.notes = notes + result.notes
        result.collected = collected
        name_students(course)
        result.resubmitted = submissions.record_history(course, lesson, collected.resubmitted)
        for line in result.resubmitted:
            print(line, file=sys.stderr)
        result.notes += feedback_parallel(course, lesson, max(1, workers))
        results.append(result)
    write_grades(course, course / GRADES_FILE, copy_threshold)
    write_report(course, results, course / REPORT_FILE, copy_threshold)
    return results


def _collected(collected: submissions.Collected) -> str:
    """`collected 2 new, 1 resubmitted (alice), 3 unchanged (not graded again)`."""
    parts = [f"{len(collected.new)} new"]
    if collected.resubmitted:
        parts.append(f"{len(collected.resubmitted)} resubmitted ({', '.join(sorted(collected.resubmitted))})")
    if collected.unchanged:
        parts.append(f"{len(collected.unchanged)} unchanged (not graded again)")
    return "collected " + ", ".join(parts)
