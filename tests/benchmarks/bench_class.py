"""A generated class graded twice in the same run: stock `nbgrader autograde`, one process, against the course's class
command (a script that prints figures, not a test).

    .venv/bin/python -m tests.benchmarks.bench_class                        # 100 per lesson, lessons 01 and 04
    .venv/bin/python -m tests.benchmarks.bench_class --students 20 --lessons 04_attention
    .venv/bin/python -m tests.benchmarks.bench_class --stock-students 20   # stock nbgrader on the first 20 only
    .venv/bin/python -m tests.benchmarks.bench_class --stock-students 10 --baseline 24a3dcc   # and an older revision

For each lesson (01 and 04 by default) it writes N submissions: of every 10, 6 reference answers, 2 with the
lesson's known mistake (`ONE_WRONG` of the round-trip tests), 1 untouched student version and 1 hostile (the
known mistake plus code that rewrites the grader on disk and patches it in the kernel). Then, on two copies of the
course, each importing its own copy of `course_lib`:
- stock: `python -m nbgrader autograde LESSON` in one process with nbgrader's own preprocessors (a configuration
  that names the course and nothing else): every cell of every submission runs in a kernel, test cells included,
  as nbgrader does out of the box. This is the speed of nbgrader itself, not a safe way to grade: there the hostile
  student's rewrite of the grader does reach the later students' kernels (their checks then pass at once, which
  only makes the stock figure faster);
- course: `course_lib.workflow.classroom.autograde_parallel` with `--workers` processes (the autograde step of
  `python -m course_lib class`) and the course's `notebooks/nbgrader_config.py`, then the class command's feedback
  step, `feedback_parallel`, with as many processes;
- with `--baseline REV`, the same two steps of the class command as they were at git revision REV (its `course_lib`
  and `nbgrader_config.py`, in a process of their own; feedback in one nbgrader process where REV had no
  `feedback_parallel`), on a third copy of the same class, right after the course's: what changed since REV,
  measured under the same load.
All use the same per-cell time limit. `--stock-students N` grades only the first N submissions (the same mix of
kinds when N is a multiple of 10) the stock way, where grading all of them would take too long: its wall time is
then printed as measured for N, its figure for the whole class only as a labelled scaling of that. Printed: the wall
time of each, the median seconds per submission (from nbgrader's log), the speed-up, how many reference submissions
got full marks on the course's path, the time the class command's feedback step takes, the machine's load before and
after, and a projection for a term: 100 submissions of each of the 12 lessons, as 12 times the lesson whose autograde
and feedback together took longest (scaled to 100 submissions). `--per-lesson` first prints how long trusted grading
takes for each lesson's reference answers, in this process, to check that the lessons measured are the slowest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from course_lib.workflow import classroom  # a baseline's child process imports that revision's
from course_lib.workflow.course import REPO_ROOT
from tests.benchmarks.bench_autograde import _run, copy_library, export_revision, per_submission_seconds
from tests.nbtools import LESSONS, ROOT, grade_id, read, release_path, solved, source_path, with_answer
from tests.test_nbgrader_roundtrip import HOSTILE_CODE, ONE_WRONG

# nbgrader as it comes: its own preprocessors, a kernel for every submission, every cell run.
STOCK_CONFIG = 'c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = "transformers-from-scratch"\n'


def submissions(lesson: str, n: int) -> dict[str, object]:
    full, blank = solved(lesson), read(release_path(lesson))
    name, code, _ = ONE_WRONG[lesson]
    wrong = with_answer(full, name, code)
    hostile = with_answer(full, name, code + "\n" + HOSTILE_CODE)
    kinds = ["full"] * 6 + ["wrong"] * 2 + ["blank", "hostile"]
    made = {"full": full, "wrong": wrong, "blank": blank, "hostile": hostile}
    return {f"s{i:03d}_{kinds[i % 10]}": made[kinds[i % 10]] for i in range(n)}


def build(folder: Path, lesson: str, class_of: dict, env: dict[str, str], config: str | None = None) -> None:
    """A course in `folder` with `lesson` in its gradebook (generated with the course's configuration) and the
    class submitted; `config`: the nbgrader_config.py text to grade with instead of the course's."""
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", folder / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / lesson, folder / "source" / lesson)
    result = _run([sys.executable, "-m", "nbgrader"], ["generate_assignment", lesson, "--force"], folder, env)
    if result.returncode:
        raise SystemExit(f"generate_assignment failed:\n{result.stderr[-3000:]}")
    if config is not None:
        (folder / "nbgrader_config.py").write_text(config, encoding="utf-8")
    for student, nb in class_of.items():
        target = folder / "submitted" / student / lesson
        target.mkdir(parents=True)
        nbformat.write(nb, target / f"{lesson}.ipynb")


def autograde(folder: Path, lesson: str, env: dict[str, str], timeout: int) -> tuple[float, list[float]]:
    """Wall seconds of one stock `nbgrader autograde` of the class in `folder`, and the seconds each submission took
    in it (from nbgrader's log). No limit on the whole run: a class of 100 took about an hour on a loaded machine."""
    args = ["autograde", lesson, "--force", "--NbGrader.log_format=%(created).3f %(message)s"]
    args.append(f"--Execute.timeout={timeout}")
    full_env = dict(os.environ) | env
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=folder, env=full_env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"autograde failed:\n{result.stderr[-3000:]}")
    return wall, per_submission_seconds(result.stderr)


def full_marks(course: Path, lesson: str, students: list[str]) -> int:
    """How many of `students` got every point of `lesson`."""
    count = 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            nb = gb.find_submission_notebook(lesson, lesson, student)
            count += nb.score == nb.max_score and nb.max_score > 0
    return count


def baseline_steps(revision: str, tree: Path, course: Path, lesson: str, workers: int, timeout: int) -> dict:
    """`class_steps.class_steps` with `revision`'s course_lib (exported to `tree`), in a child process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(REPO_ROOT)]))
    command = [sys.executable, "-m", "tests.benchmarks.class_steps", str(course), lesson]
    command += [str(workers), str(timeout)]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the baseline {revision} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def per_lesson() -> None:
    """Seconds trusted grading takes for each lesson's reference answers (median of 3), in this process."""
    from course_lib.workflow.trusted import TrustedGrader

    grader = TrustedGrader()
    print("trusted grading of each lesson's reference answers (this process, median of 3):", flush=True)
    for lesson in LESSONS:
        nb = solved(lesson)
        hidden = {grade_id(c): c.source for c in read(source_path(lesson)).cells if grade_id(c)}
        for cell in nb.cells:  # the hidden tests, as nbgrader puts them back before grading
            if (grade_id(cell) or "").startswith("test_"):
                cell.source = hidden[grade_id(cell)]
        seconds = []
        for _ in range(3):
            start = time.perf_counter()
            grading = grader.grade(nb, lesson)
            seconds.append(time.perf_counter() - start)
        passed = all(v.passed for v in grading.verdicts.values())
        print(f"  {lesson:28}{statistics.median(seconds):6.2f} s{'' if passed else '  (NOT all passed)'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lessons", nargs="+", default=["01_tokenization", "04_attention"])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60, help="per-cell time limit (seconds), both paths")
    parser.add_argument("--stock-students", type=int, help="grade only the first N submissions with stock nbgrader")
    parser.add_argument("--per-lesson", action="store_true", help="first time trusted grading of every lesson")
    parser.add_argument("--baseline", help="git revision whose class command is also timed on the same class")
    args = parser.parse_args()
    n_stock = min(args.stock_students or args.students, args.students)
    load_before = os.getloadavg()
    if args.per_lesson:
        per_lesson()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        tmp = Path(tmp)
        base_tree = export_revision(args.baseline, tmp / "baseline-tree") if args.baseline else None
        for lesson in args.lessons:
            class_of = submissions(lesson, args.students)
            # Each path imports its own copy: stock nbgrader lets the hostile student rewrite the one it uses.
            stock_env = {"PYTHONPATH": str(copy_library(REPO_ROOT, tmp / f"lib-stock-{lesson}"))}
            course_env = {"PYTHONPATH": str(copy_library(REPO_ROOT, tmp / f"lib-course-{lesson}"))}
            stock_class = dict(list(class_of.items())[:n_stock])
            build(tmp / f"stock-{lesson}", lesson, stock_class, stock_env, STOCK_CONFIG)
            course = tmp / f"course-{lesson}"
            build(course, lesson, class_of, course_env)

            wall_stock, each_stock = autograde(tmp / f"stock-{lesson}", lesson, stock_env, args.timeout)
            print(f"{lesson} stock nbgrader: {wall_stock:.0f} s for {n_stock} submissions", flush=True)

            start = time.perf_counter()  # each worker imports a copy of course_lib of its own (classroom.py)
            to_grade = classroom.students_to_grade(course, lesson)
            result = classroom.autograde_parallel(course, lesson, to_grade, args.workers, args.timeout)
            wall_course = time.perf_counter() - start
            start = time.perf_counter()  # the class command's next step, in as many processes
            failed = classroom.feedback_parallel(course, lesson, args.workers, env=course_env)
            wall_feedback = time.perf_counter() - start
            if failed:
                raise SystemExit(f"generate_feedback failed:\n{failed}")
            reference = [s for s in class_of if s.endswith("_full")]
            got_full = full_marks(course, lesson, reference)
            print(
                f"{lesson} course: {wall_course:.0f} s + feedback {wall_feedback:.0f} s, "
                f"failed: {result.failed or 'none'}",
                flush=True,
            )
            base = None
            if base_tree is not None:
                base_course = tmp / f"base-{lesson}"
                old_config = (base_tree / "notebooks" / "nbgrader_config.py").read_text(encoding="utf-8")
                build(base_course, lesson, class_of, course_env, old_config)  # generated as today, graded as REV
                base = baseline_steps(args.baseline, base_tree, base_course, lesson, args.workers, args.timeout)
                base["full"] = full_marks(base_course, lesson, reference)
                print(f"{lesson} baseline: {base['autograde']:.0f} s + feedback {base['feedback']:.0f} s", flush=True)
            each_course = list(result.each.values())
            rows.append(
                (lesson, wall_stock, wall_course, each_stock, each_course, got_full, reference, wall_feedback, base)
            )

    load_after = os.getloadavg()
    print(f"\n{platform.node()} · {os.cpu_count()} cores · {args.students} submissions per lesson")
    if n_stock < args.students:
        print(f"stock nbgrader graded only the first {n_stock} of them; its figures for {args.students} and the")
        print(f"speed-up are its measured time × {args.students}/{n_stock} (scaled, not measured)")
    print(f"load (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}")
    print(f"load (1/5/15 min) after:  {' '.join(f'{x:.2f}' for x in load_after)}")
    print("stock = one `python -m nbgrader autograde`, nbgrader's own preprocessors; course = the class command's")
    print(f"autograde with {args.workers} workers and notebooks/nbgrader_config.py")
    stock_scale = args.students / n_stock
    print(
        f"{'lesson':18}{f'stock wall ({n_stock})':>17}{f'stock, {args.students}':>13}{'course wall':>12}"
        f"{'speed-up':>10}{'stock/sub':>10}{'course/sub':>11}"
    )
    for lesson, wall_stock, wall_course, each_stock, each_course, *_ in rows:
        scaled = "" if stock_scale == 1 else " (scaled)"
        print(
            f"{lesson:18}{wall_stock:16.0f}s{wall_stock * stock_scale:12.0f}s{wall_course:11.0f}s"
            f"{wall_stock * stock_scale / wall_course:9.1f}×"
            f"{statistics.median(each_stock):9.2f}s{statistics.median(each_course):10.2f}s{scaled}"
        )
    for lesson, *_, got_full, reference, wall_feedback, base in rows:
        print(f"{lesson}: {got_full} of {len(reference)} reference submissions got full marks on the course's path")
        print(f"{lesson}: the class's feedback ({args.workers} generate_feedback processes) took {wall_feedback:.0f} s")
        if base is not None:
            print(
                f"{lesson}: baseline {args.baseline}: autograde {base['autograde']:.0f} s (median "
                f"{statistics.median(base['each']):.2f} s per submission), feedback {base['feedback']:.0f} s in "
                f"{base['feedback_processes']} process(es), {base['full']} of {len(reference)} reference submissions "
                "full marks"
            )
    scale = 100 / args.students
    slowest = max(rows, key=lambda r: r[2] + r[7])  # autograde + feedback: what a term waits for
    stock_slowest = max(rows, key=lambda r: r[1])
    print(
        f"projected for 100 submissions × 12 lessons (12 × the lesson whose autograde + feedback took longest, scaled "
        f"to 100): course {12 * (slowest[2] + slowest[7]) * scale / 60:.0f} min ({slowest[0]}: autograde "
        f"{12 * slowest[2] * scale / 60:.0f} + feedback {12 * slowest[7] * scale / 60:.0f}); "
        f"stock nbgrader autograde alone {12 * stock_slowest[1] * 100 / n_stock / 60:.0f} min ({stock_slowest[0]}, "
        f"from {n_stock} submissions)"
    )
    if args.baseline:
        base_slowest = max(rows, key=lambda r: r[8]["autograde"] + r[8]["feedback"])
        base = base_slowest[8]
        print(
            f"the same projection for {args.baseline}: {12 * (base['autograde'] + base['feedback']) * scale / 60:.0f} "
            f"min ({base_slowest[0]}: autograde {12 * base['autograde'] * scale / 60:.0f} + feedback "
            f"{12 * base['feedback'] * scale / 60:.0f})"
        )


if __name__ == "__main__":
    main()
