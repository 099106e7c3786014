"""The class command's feedback step: nbgrader's `generate_feedback LESSON --force` for the students graded in this
run, in as many processes as it graded with, each given its share (`--CourseDirectory.student_id_exclude` the
others). A student's page depends on that student's graded notebook and gradebook record only, so the pages are the
ones one nbgrader process writes, in about 1/workers of the time on as many cores; the students not graded again
keep the pages they have.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from course_lib.workflow.nbgrader_runs.pool import db_url, split

__all__ = ["write_feedback"]


def _tail(text: str, lines: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def write_feedback(
    course: Path, lesson: str, students: list[str], workers: int = 2, env: dict[str, str] | None = None
) -> list[str]:
    """Feedback pages of `students`' graded submissions of `lesson` (those with a graded notebook), in `workers`
    processes; `env`: extra environment variables for them. Returns one line per process that failed (empty: none)."""
    graded = {p.parent.name for p in (course / "autograded").glob(f"*/{lesson}") if p.is_dir()}
    everyone = sorted(graded | {p.parent.name for p in (course / "feedback").glob(f"*/{lesson}")})
    chosen = sorted(set(students) & graded)
    if not chosen:
        return []
    full_env = dict(os.environ) | (env or {})
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    failed = []
    with contextlib.ExitStack() as logs:
        running = []
        for group in split(chosen, workers):
            command = [sys.executable, "-m", "course_lib.workflow.startup", "generate_feedback", lesson, "--force"]
            others = sorted(set(everyone) - set(group))
            if others:
                command += [f"--CourseDirectory.student_id_exclude={','.join(others)}"]
            command += [f"--CourseDirectory.db_url={db_url(course)}?timeout=300"]
            # Its log goes to a file: a pipe nobody reads while we wait for another process would stall this one.
            log = logs.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
            process = subprocess.Popen(command, cwd=course, env=full_env, stdout=subprocess.DEVNULL, stderr=log)
            running.append((process, log))
        for process, log in running:
            if process.wait():
                log.seek(0)
                failed.append(f"generate_feedback failed: {_tail(log.read())}")
    return failed
