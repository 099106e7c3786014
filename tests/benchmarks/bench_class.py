"""A generated class graded twice in the same run: plain sequential `nbgrader autograde` vs the class command.

    .venv/bin/python -m tests.benchmarks.bench_class                                  # 100 per lesson, 2 workers
    .venv/bin/python -m tests.benchmarks.bench_class --students 20 --baseline e12afe5

For each lesson (01 and 04 by default) it writes N submissions: of every 10, 6 reference answers, 2 with the
lesson's known mistake (`ONE_WRONG` of the round-trip tests), 1 untouched student version and 1 hostile (the
known mistake plus code that rewrites the grader on disk and patches it in the kernel). Then, on two copies:
- sequential: `python -m nbgrader autograde LESSON` in one process, as nbgrader is usually run; with
  `--baseline REV` it imports `course_lib` and `nbgrader_config.py` as they were at git revision REV;
- class: `course_lib.workflow.classroom.autograde_parallel` with `--workers` processes (the autograde step of
  `python -m course_lib class`).
Both import copies of `course_lib` and use the same per-cell limit. Printed: wall time of each, the median
seconds per submission (from nbgrader's log), and the speed-up in wall time, with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from course_lib.workflow.classroom import autograde_parallel, students_to_grade
from course_lib.workflow.course import REPO_ROOT
from tests.benchmarks.bench_autograde import _run, autograde, copy_library, export_revision
from tests.nbtools import ROOT, read, release_path, solved, with_answer
from tests.test_nbgrader_roundtrip import HOSTILE_CODE, ONE_WRONG


def submissions(lesson: str, n: int) -> dict[str, object]:
    full, blank = solved(lesson), read(release_path(lesson))
    name, code, _ = ONE_WRONG[lesson]
    wrong = with_answer(full, name, code)
    hostile = with_answer(full, name, code + "\n" + HOSTILE_CODE)
    kinds = ["full"] * 6 + ["wrong"] * 2 + ["blank", "hostile"]
    made = {"full": full, "wrong": wrong, "blank": blank, "hostile": hostile}
    return {f"s{i:03d}_{kinds[i % 10]}": made[kinds[i % 10]] for i in range(n)}


def build(folder: Path, lesson: str, config: Path, class_of: dict, command: list[str], env: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    shutil.copy(config, folder / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / lesson, folder / "source" / lesson)
    result = _run(command, ["generate_assignment", lesson, "--force"], folder, env)
    if result.returncode:
        raise SystemExit(f"generate_assignment failed:\n{result.stderr[-3000:]}")
    for student, nb in class_of.items():
        target = folder / "submitted" / student / lesson
        target.mkdir(parents=True)
        nbformat.write(nb, target / f"{lesson}.ipynb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lessons", nargs="+", default=["01_tokenization", "04_attention"])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--baseline", help="git revision for the sequential path's course_lib and config")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        tmp = Path(tmp)
        library = copy_library(REPO_ROOT, tmp / "current")
        if args.baseline:
            old = export_revision(args.baseline, tmp / "baseline")
            seq_env, seq_config = {"PYTHONPATH": str(old)}, old / "notebooks" / "nbgrader_config.py"
        else:
            seq_env, seq_config = {"PYTHONPATH": str(library)}, ROOT / "nbgrader_config.py"
        plain = [sys.executable, "-m", "nbgrader"]
        for lesson in args.lessons:
            class_of = submissions(lesson, args.students)
            build(tmp / f"seq-{lesson}", lesson, seq_config, class_of, plain, seq_env)
            new_env = {"PYTHONPATH": str(library)}
            build(tmp / f"par-{lesson}", lesson, ROOT / "nbgrader_config.py", class_of, plain, new_env)
            wall_seq, each_seq = autograde(
                tmp / f"seq-{lesson}", lesson, [*plain], seq_env, [f"--Execute.timeout={args.timeout}"]
            )
            print(f"{lesson} sequential: {wall_seq:.0f} s", flush=True)
            course = tmp / f"par-{lesson}"
            start = time.perf_counter()
            result = autograde_parallel(course, lesson, students_to_grade(course, lesson), args.workers, args.timeout)
            wall_par = time.perf_counter() - start
            print(f"{lesson} class command: {wall_par:.0f} s, failed: {result.failed or 'none'}", flush=True)
            rows.append((lesson, wall_seq, wall_par, each_seq, list(result.each.values())))

    print(f"\n{platform.node()} · {os.cpu_count()} cores · load {os.getloadavg()[0]:.2f} at the end")
    print(f"{args.students} submissions per lesson; class command with {args.workers} workers")
    baseline = f" (course_lib at {args.baseline})" if args.baseline else ""
    print(f"sequential = one `python -m nbgrader autograde`{baseline}")
    print(f"{'lesson':18}{'seq wall':>10}{'class wall':>12}{'speed-up':>10}{'seq/sub':>9}{'class/sub':>11}")
    for lesson, wall_seq, wall_par, each_seq, each_par in rows:
        print(
            f"{lesson:18}{wall_seq:9.0f}s{wall_par:11.0f}s{wall_seq / wall_par:9.2f}×"
            f"{statistics.median(each_seq):8.1f}s{statistics.median(each_par):10.1f}s"
        )


if __name__ == "__main__":
    main()
