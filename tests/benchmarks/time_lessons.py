"""Measure how long each lesson takes to execute and to autograde (medians; for the README and issue notes).

    .venv/bin/python -m tests.benchmarks.time_lessons [--repeats 3] [LESSON ...]

Execution: the instructor source run top to bottom by nbclient (self-grading off), as a learner's laptop would.
Autograde: one submission (the student version with the reference answers pasted in) graded by
`course_lib.workflow.selfgrade.grade_notebook`, i.e. nbgrader generate_assignment + autograde in a temporary course.
The machine is shared and noisy: each figure is the median of --repeats runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.workflow.selfgrade import grade_notebook
from tests.nbtools import LESSONS, solved, source_path


def execute_seconds(lesson: str) -> float:
    path = source_path(lesson)
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - started


def autograde_seconds(lesson: str) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{lesson}.ipynb"
        nbformat.write(solved(lesson), path)
        started = time.perf_counter()
        report = grade_notebook(path)
        return time.perf_counter() - started, f"{report.score:g}/{report.max_score:g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", default=LESSONS)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ["COURSE_SELF_GRADE"] = "off"
    print(f"{'lesson':<26}{'execute s (median)':>20}{'autograde s (median)':>22}  score   runs")
    for lesson in args.lessons:
        executed = [execute_seconds(lesson) for _ in range(args.repeats)]
        graded = [autograde_seconds(lesson) for _ in range(args.repeats)]
        seconds = [s for s, _ in graded]
        print(
            f"{lesson:<26}{statistics.median(executed):>20.1f}{statistics.median(seconds):>22.1f}  "
            f"{graded[-1][1]:<7} exec {[round(s, 1) for s in executed]} grade {[round(s, 1) for s in seconds]}"
        )


if __name__ == "__main__":
    main()
