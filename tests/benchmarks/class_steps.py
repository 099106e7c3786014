"""The class command's autograde and feedback steps on one class, timed, as the `course_lib` this process imports
does them. `bench_class.py` calls `class_steps` for the class command as it is; with `--baseline REV` it runs this
module in a process of its own with REV's `course_lib` first on the path, so it imports nothing of the tests (REV's
tree has no notebooks). REV may be older than the grading workers of `nbgrader_runs`: its own API is used then.

    python -m tests.benchmarks.class_steps COURSE LESSON WORKERS TIMEOUT    # prints one line of JSON
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _students(course: Path, lesson: str) -> list[str]:
    return sorted({p.parent.parent.name for p in (course / "submitted").glob(f"*/{lesson}/{lesson}.ipynb")})


def class_steps(course: Path, lesson: str, workers: int, timeout: int, env: dict[str, str]) -> dict:
    """Seconds the class command's autograde and feedback steps take on the class in `course` (every submission);
    `env`: extra environment variables for the feedback processes. Also the seconds each graded submission took in
    its worker, and who could not be graded."""
    try:
        from course_lib.workflow.nbgrader_runs.feedback import write_feedback
        from course_lib.workflow.nbgrader_runs.pool import Pool, db_url
    except ImportError:  # a revision from before the grading workers reported records
        return _old_class_steps(course, lesson, workers, timeout, env)
    students = _students(course, lesson)
    options = [f"--Execute.timeout={timeout}", f"--CourseDirectory.db_url={db_url(course)}?timeout=300"]
    start = time.perf_counter()
    outcomes = Pool(course, lesson, workers, options).grade(students)
    autograded = time.perf_counter() - start
    start = time.perf_counter()
    failed = write_feedback(course, lesson, [s for s, o in outcomes.items() if o.graded], workers, env=env)
    if failed:
        raise SystemExit(f"generate_feedback failed:\n{failed}")
    return {
        "autograde": autograded,
        "feedback": time.perf_counter() - start,
        "feedback_processes": workers,
        "failed": {s: o.reason for s, o in outcomes.items() if not o.graded},
        "each": [o.seconds for o in outcomes.values() if o.graded],
        "repaired": sum(bool(o.repairs) for o in outcomes.values()),
    }


def _old_class_steps(course: Path, lesson: str, workers: int, timeout: int, env: dict[str, str]) -> dict:
    from course_lib.workflow import classroom
    from course_lib.workflow.course import run_nbgrader

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
        "repaired": 0,
    }


if __name__ == "__main__":
    course, lesson, workers, timeout = sys.argv[1:5]
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    print(json.dumps(class_steps(Path(course), lesson, int(workers), int(timeout), env)))
