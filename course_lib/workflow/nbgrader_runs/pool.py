"""The class command's autograde step: a class's submissions dealt out to N worker processes (`worker.py`), each
grading its share into the one gradebook (SQLite waits for the other writer), with a progress line and an ETA.

Each worker reports each submission as a record (`records.py`), which is all this module reads of it. When a worker
dies (a crash of nbgrader, of Python, the kernel's memory killer), the record it left says on whose submission: that
one is reported as not graded, with why, and a new worker grades the students after it, in the same run. A worker
that holds one submission longer than `hang_after` seconds is stopped, with everything it started, and the same
happens. So nothing that goes wrong while grading a submission costs another student a grade.

Each worker imports its own copy of `course_lib`, so what a submission writes there is put back by that worker,
never blamed on another worker's student, and never lands in the instructor's checkout. Each worker's kernels (with
`run_cells = "always"`) get an equal share of the cores as torch's thread count (`OMP_NUM_THREADS`, unless it is set
already): two kernels that each start one thread per core fight over the cores.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.workflow.course import REPO_ROOT
from course_lib.workflow.nbgrader_runs.records import Outcome, Started, read_record

__all__ = ["Progress", "Pool", "db_url", "kernel_threads", "split"]

_POLL = 0.2  # seconds between looks at a worker's records
WORKER = [sys.executable, "-m", "course_lib.workflow.nbgrader_runs.worker"]


def db_url(course: Path) -> str:
    return f"sqlite:///{(course / 'gradebook.db').resolve()}"


def split(students: list[str], workers: int) -> list[list[str]]:
    """`students` dealt out to at most `workers` groups, none empty (a class sorted by name is mixed across them)."""
    return [students[i::workers] for i in range(max(1, workers)) if students[i::workers]]


def kernel_threads(workers: int) -> int:
    """Threads for each worker's kernels: the cores this process may use, shared equally, at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, workers))


def library_copy(into: Path) -> Path:
    """A private copy of the course package for one worker and the kernels it starts."""
    shutil.copytree(REPO_ROOT / "course_lib", into / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    if (REPO_ROOT / "data").exists():
        (into / "data").symlink_to(REPO_ROOT / "data")
    return into


class Progress:
    """`04_attention [####      ] 7/18 graded, 12 s, ETA 19 s` on standard error, one step per submission."""

    def __init__(self, total: int, label: str):
        self.total, self.done, self.label, self.start = total, 0, label, time.monotonic()
        self.lock = threading.Lock()

    def step(self) -> None:
        with self.lock:
            self.done += 1
            elapsed = time.monotonic() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            bar = "#" * (20 * self.done // max(self.total, 1))
            line = f"{self.label} [{bar:<20}] {self.done}/{self.total} done, {elapsed:.0f} s, ETA {eta:.0f} s"
            end = "\r" if sys.stderr.isatty() and self.done < self.total else "\n"
            print(line, end=end, file=sys.stderr, flush=True)


def _ended(code: int | None) -> str:
    if code is None:
        return "it was stopped"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " / ".join(line.strip() for line in text.strip().splitlines()[-lines:])


@dataclass
class Pool:
    """Grades `students`' submissions of `lesson` in `course` with `workers` processes (module docstring).

    `options`: nbgrader options for every worker; `hang_after`: seconds one submission may hold its worker;
    `command`: how a worker is started (`WORKER`, plus the arguments `worker.py` takes); `logs`: a folder for the
    workers' logs (nbgrader's own messages, for a person), else they go when the run ends."""

    course: Path
    lesson: str
    workers: int = 2
    options: list[str] = field(default_factory=list)
    hang_after: float = 600.0
    command: list[str] = field(default_factory=lambda: list(WORKER))
    private_library: bool = True  # each worker imports its own copy of course_lib
    logs: Path | None = None

    def grade(self, students: list[str], progress: Progress | None = None) -> dict[str, Outcome]:
        """Every student's `Outcome`, in the order given."""
        progress = progress or Progress(len(students), self.lesson)
        outcomes: dict[str, Outcome] = {}
        groups = split(students, self.workers)
        running: dict[int, subprocess.Popen] = {}  # so that an interrupted run stops every worker it started
        with tempfile.TemporaryDirectory(prefix="class-workers-") as tmp:
            threads = [
                threading.Thread(target=self._group, args=(k, group, Path(tmp), outcomes, progress, running))
                for k, group in enumerate(groups)
            ]
            try:
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            finally:
                for process in list(running.values()):
                    _stop(process)
        return {student: outcomes[student] for student in students}

    def _environment(self, k: int, tmp: Path, groups: int) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(kernel_threads(groups)))
        if self.private_library:
            library = library_copy(tmp / f"library-{k}")
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(library), env.get("PYTHONPATH")) if p)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    def _group(self, k: int, group: list[str], tmp: Path, outcomes: dict, progress: Progress, running: dict) -> None:
        env = self._environment(k, tmp, self.workers)
        remaining = list(group)
        attempt = 0
        while remaining:
            records = tmp / f"records-{k}-{attempt}"
            log = (self.logs or tmp) / f"worker-{k + 1}{f'-{attempt + 1}' if attempt else ''}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            command = [*self.command, str(self.course), self.lesson, str(records), *remaining, "--", *self.options]
            with log.open("w", encoding="utf-8") as out:
                process = subprocess.Popen(
                    command, cwd=self.course, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            running[id(process)] = process
            try:
                finished = self._watch(process, records, remaining, outcomes, progress)
            finally:
                running.pop(id(process), None)
            how = _ended(process.returncode)
            for at, student in enumerate(remaining):
                if student not in outcomes and isinstance(read_record(records / f"{student}.json"), Started):
                    outcomes[student] = self._lost(
                        student, f"the grading process ended while grading it ({how}){_after(remaining[at + 1 :])}"
                    )
                    finished += 1
                    progress.step()
            remaining = [s for s in remaining if s not in outcomes]
            if remaining and not finished:  # it could not start, or stopped before its first submission
                why = f"the grading process stopped before grading it ({how}: {_tail(log) or 'no message'})"
                for student in remaining:
                    outcomes[student] = self._lost(student, why[:300])
                    progress.step()
                remaining = []
            attempt += 1

    def _watch(self, process, records: Path, remaining: list[str], outcomes: dict, progress: Progress) -> int:
        """Follow one worker's records until it exits; stop it when a submission holds it past `hang_after`.
        A worker takes its students in the order given, so only the next one's record can have changed.
        Returns how many submissions it finished."""
        finished, queue = 0, [s for s in remaining if s not in outcomes]
        while True:
            done = process.poll() is not None
            while queue:
                record = read_record(records / f"{queue[0]}.json")
                if isinstance(record, Outcome):
                    outcomes[queue.pop(0)] = record
                    finished += 1
                    progress.step()
                    continue
                if isinstance(record, Started) and not done and time.time() - record.at > self.hang_after:
                    _stop(process)
                    outcomes[queue[0]] = self._lost(
                        queue[0],
                        f"grading it took longer than {self.hang_after:.0f} s, so its grading process was "
                        f"stopped{_after(queue[1:])}",
                    )
                    progress.step()
                    return finished + 1
                break
            if done:
                return finished
            time.sleep(_POLL)

    def _lost(self, student: str, reason: str) -> Outcome:
        """The outcome of a submission whose worker did not come back with one: tried again on the next run."""
        from course_lib.workflow.submissions import fingerprint

        path = self.course / "submitted" / student / self.lesson / f"{self.lesson}.ipynb"
        shutil.rmtree(self.course / "autograded" / student / self.lesson, ignore_errors=True)
        try:
            said = fingerprint(path)
        except OSError:
            said = ""
        return Outcome(student, self.lesson, graded=False, fingerprint=said, reason=reason, retry=True)


def _after(rest: list[str]) -> str:
    return "; the submissions after it were graded by a new one" if rest else ""


def _stop(process: subprocess.Popen) -> None:
    """Stop a worker and everything it started (its sandboxes, its kernels): they share its process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
