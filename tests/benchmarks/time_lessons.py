"""Measure how long each lesson takes to execute and to autograde (medians; docs/MEASUREMENTS.md).

    .venv/bin/python -m tests.benchmarks.time_lessons [--repeats 3] [--save DIR] [LESSON ...]

Execution: the instructor source run top to bottom by nbclient (self-grading off), as a learner's laptop would.
Autograde: one submission (the student version with the reference answers pasted in) graded by
`course_lib.workflow.selfgrade.grade_notebook`, i.e. nbgrader generate_assignment + autograde in a temporary course.
Trusted verdicts: `TrustedGrader.grade` (course_lib.workflow.trusted) alone on the same answers (a sandbox per
exercise, the checks run in this process), the part of an autograde that trusted grading adds (the grader is made
once, before any timing, as nbgrader makes it before the first submission runs); its share of the autograde time
is printed beside it. The machine is shared and noisy: each figure is the median of --repeats runs.
--save DIR keeps each lesson's last executed notebook there, to read the figures a run printed (losses, samples).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import nbformat

from course_lib.workflow import trusted
from course_lib.workflow.selfgrade import grade_notebook
from tests.nbtools import LESSONS, execute, solved, source_path, with_hidden_tests


def execute_seconds(lesson: str, save: Path | None = None) -> float:
    path = source_path(lesson)
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    execute(nb, timeout=600, folder=path.parent)
    seconds = time.perf_counter() - started
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, save / path.name)
    return seconds


def autograde_seconds(lesson: str) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{lesson}.ipynb"
        nbformat.write(solved(lesson), path)
        started = time.perf_counter()
        report = grade_notebook(path)
        return time.perf_counter() - started, f"{report.score:g}/{report.max_score:g}"


def trusted_seconds(grader: trusted.TrustedGrader, lesson: str) -> float:
    nb = with_hidden_tests(solved(lesson), lesson)
    started = time.perf_counter()
    grading = grader.grade(nb, lesson)
    assert all(v.passed for v in grading.verdicts.values()), lesson
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", default=LESSONS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--save", type=Path, help="folder for each lesson's last executed notebook")
    args = parser.parse_args()
    os.environ["COURSE_SELF_GRADE"] = "off"
    grader = trusted.TrustedGrader()
    print(f"{'lesson':<26}{'execute s':>10}{'autograde s':>12}{'trusted s':>10}{'share':>7}  score   runs (medians)")
    for lesson in args.lessons:
        executed = [execute_seconds(lesson, args.save) for _ in range(args.repeats)]
        graded = [autograde_seconds(lesson) for _ in range(args.repeats)]
        seconds = [s for s, _ in graded]
        verdicts = [trusted_seconds(grader, lesson) for _ in range(args.repeats)]
        grade_median, trusted_median = statistics.median(seconds), statistics.median(verdicts)
        print(
            f"{lesson:<26}{statistics.median(executed):>10.1f}{grade_median:>12.1f}{trusted_median:>10.1f}"
            f"{trusted_median / grade_median:>7.0%}  {graded[-1][1]:<7} exec {[round(s, 1) for s in executed]} "
            f"grade {[round(s, 1) for s in seconds]} trusted {[round(s, 1) for s in verdicts]}"
        )


if __name__ == "__main__":
    main()
