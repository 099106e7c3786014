"""The class command's autograde and feedback steps on one class, timed, as the `course_lib` this process imports
does them. `bench_class.py --baseline REV` runs it in a process of its own with REV's `course_lib` first on the path,
so it imports nothing of the tests (REV's tree has no notebooks):

    python -m tests.benchmarks.class_steps COURSE LESSON WORKERS TIMEOUT    # prints one line of JSON
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from course_lib.workflow import classroom
from course_lib.workflow.course import run_nbgrader


def class_steps(course: Path, lesson: str, workers: int, timeout: int, env: dict[str, str]) -> dict:
    """Seconds the class command's autograde and feedback steps take on the class in `course`; `env`: extra
    environment variables for the feedback processes."""
    start = time.perf_counter()
    result = classroom.autograde_parallel(course, lesson, classroom.students_to_grade(course, lesson), workers, timeout)
    autograded = time.perf_counter() - start
    parallel = getattr(classroom, "feedback_parallel", None)
    start = time.perf_counter()
    if parallel is not None:
        failed = parallel(course, lesson, workers, env=env)
    else:  # before feedback was parallel: one nbgrader process, as the class command ran it
        done = run_nbgrader(["generate_feedback", lesson, "--force"], course, env=env)
        failed = [done.stderr[-3000:]] if done.returncode else []
    if failed:
        raise SystemExit(f"generate_feedback failed:\n{failed}")
    return {
        "autograde": autograded,
        "feedback": time.perf_counter() - start,
        "feedback_processes": workers if parallel is not None else 1,
        "failed": result.failed,
        "each": list(result.each.values()),
    }


if __name__ == "__main__":
    course, lesson, workers, timeout = sys.argv[1:5]
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    print(json.dumps(class_steps(Path(course), lesson, int(workers), int(timeout), env)))
