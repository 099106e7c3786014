"""A generated class graded in the same run by stock `nbgrader autograde`, one process, and by the course's class
command, and the same class with 10% of its notebooks damaged by the class command (a script that prints figures, not
a test).

    .venv/bin/python -m tests.benchmarks.bench_class                        # 100 per lesson, lessons 01 and 04
    .venv/bin/python -m tests.benchmarks.bench_class --students 20 --lessons 04_attention
    .venv/bin/python -m tests.benchmarks.bench_class --stock-students 20   # stock nbgrader on the first 20 only
    .venv/bin/python -m tests.benchmarks.bench_class --stock-students 10 --baseline 24a3dcc   # and an older revision

For each lesson (01 and 04 by default) it writes N submissions: of every 10, 6 reference answers, 2 with the
lesson's known mistake (`ONE_WRONG` of the round-trip tests), 1 untouched student version and 1 hostile (the
known mistake plus code that rewrites the grader on disk and patches it in the kernel). The damaged class is the
same with one reference submission of every 10 damaged (tests/damaged.py, one kind after another: saved by another
editor, an answer cell pasted twice or split, its marks stripped, cells deleted, ...). Then, on copies of the
course, each importing its own copy of `course_lib`:
- stock: `python -m nbgrader autograde LESSON` in one process with nbgrader's own preprocessors (a configuration
  that names the course and nothing else): every cell of every submission runs in a kernel, test cells included,
  as nbgrader does out of the box. This is the speed of nbgrader itself, not a safe way to grade: there the hostile
  student's rewrite of the grader does reach the later students' kernels (their checks then pass at once, which
  only makes the stock figure faster);
- course: the class command's autograde step (`nbgrader_runs.pool.Pool`, `--workers` processes, each grading its
  share one submission at a time) with the course's `notebooks/nbgrader_config.py`, then its feedback step
  (`nbgrader_runs.feedback.write_feedback`) with as many processes (`class_steps.py`);
- damaged: the same two steps on the damaged class, right after the course's: the cost of reading and repairing
  damaged notebooks, as the ratio of the two under the same load;
- with `--baseline REV`, the same two steps of the class command as they were at git revision REV (its `course_lib`
  and `nbgrader_config.py`, in a process of their own; feedback in one nbgrader process where REV had no
  `feedback_parallel`), on a third copy of the same class, right after the course's: what changed since REV,
  measured under the same load.
All use the same per-cell time limit. `--stock-students N` grades only the first N submissions (the same mix of
kinds when N is a multiple of 10) the stock way, where grading all of them would take too long: its wall time is
then printed as measured for N, its figure for the whole class only as a labelled scaling of that. Printed: the wall
time of each, the median seconds per submission (from nbgrader's log), the speed-up, how many reference submissions
got full marks on the course's path (in both classes), the time the class command's feedback step takes, the damaged
class's time as a ratio of the clean one's, the machine's load before and after, and a projection for a term: 100
submissions of each of the course's lessons (13), as 13 times the lesson whose autograde and feedback together took
longest (scaled to 100 submissions). `--per-lesson` first prints how long trusted grading
takes for each lesson's reference answers, in this process, to check that the lessons measured are the slowest.
"""

from __future__ import annotations

import argparse
import itertools
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

from course_lib import manifest
from course_lib.workflow.course import REPO_ROOT
from tests.benchmarks.bench_autograde import _run, copy_library, export_revision, per_submission_seconds
from tests.benchmarks.class_steps import class_steps
from tests.damaged import DAMAGES
from tests.nbtools import (
    LESSONS,
    ROOT,
    answer_names,
    read,
    release_path,
    solved,
    with_answer,
    with_hidden_tests,
)
from tests.test_nbgrader_roundtrip import HOSTILE_CODE, ONE_WRONG

# nbgrader as it comes: its own preprocessors, a kernel for every submission, every cell run.
STOCK_CONFIG = 'c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = "transformers-from-scratch"\n'


def submissions(lesson: str, n: int) -> dict[str, bytes]:
    """The class: of every 10, 6 reference answers, 2 with the known mistake, 1 blank, 1 hostile (file bytes)."""
    full, blank = solved(lesson), read(release_path(lesson))
    name, code, _ = ONE_WRONG[lesson]
    wrong = with_answer(full, name, code)
    hostile = with_answer(full, name, code + "\n" + HOSTILE_CODE)
    kinds = ["full"] * 6 + ["wrong"] * 2 + ["blank", "hostile"]
    made = {"full": full, "wrong": wrong, "blank": blank, "hostile": hostile}
    return {f"s{i:03d}_{kinds[i % 10]}": nbformat.writes(made[kinds[i % 10]]).encode() for i in range(n)}


def damaged_class(lesson: str, n: int) -> dict[str, bytes]:
    """The same class with the first reference submission of every 10 damaged, each time another kind of damage
    (those the class command repairs and says so taking turns with saved forms it reads as if clean), on the
    lesson's last exercise (a class with methods in several lessons)."""
    full = solved(lesson)
    name = answer_names(full)[-1]
    repaired = [kind for kind, damage in DAMAGES.items() if damage.words]
    forms = [kind for kind, damage in DAMAGES.items() if not damage.words]
    kinds = [kind for pair in itertools.zip_longest(repaired, forms) for kind in pair if kind]
    out = {}
    for i, (student, raw) in enumerate(submissions(lesson, n).items()):
        if i % 10 == 0:
            kind = kinds[(i // 10) % len(kinds)]
            out[f"{student}_{kind}"] = DAMAGES[kind].build(full, name)
        else:
            out[student] = raw
    return out


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
    for student, raw in class_of.items():
        target = folder / "submitted" / student / lesson
        target.mkdir(parents=True)
        (target / f"{lesson}.ipynb").write_bytes(raw)


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
        nb = with_hidden_tests(solved(lesson), lesson)
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
            class_of, damaged_of = submissions(lesson, args.students), damaged_class(lesson, args.students)
            # Each path imports its own copy: stock nbgrader lets the hostile student rewrite the one it uses.
            stock_env = {"PYTHONPATH": str(copy_library(REPO_ROOT, tmp / f"lib-stock-{lesson}"))}
            course_env = {"PYTHONPATH": str(copy_library(REPO_ROOT, tmp / f"lib-course-{lesson}"))}
            stock_class = dict(list(class_of.items())[:n_stock])
            build(tmp / f"stock-{lesson}", lesson, stock_class, stock_env, STOCK_CONFIG)
            course, damaged = tmp / f"course-{lesson}", tmp / f"damaged-{lesson}"
            build(course, lesson, class_of, course_env)
            build(damaged, lesson, damaged_of, course_env)

            wall_stock, each_stock = autograde(tmp / f"stock-{lesson}", lesson, stock_env, args.timeout)
            print(f"{lesson} stock nbgrader: {wall_stock:.0f} s for {n_stock} submissions", flush=True)
            # each worker imports a copy of course_lib of its own (nbgrader_runs/pool.py)
            clean = class_steps(course, lesson, args.workers, args.timeout, course_env)
            clean["full"] = full_marks(course, lesson, [s for s in class_of if s.endswith("_full")])
            print(f"{lesson} course: {clean['autograde']:.0f} s + feedback {clean['feedback']:.0f} s", flush=True)
            hurt = class_steps(damaged, lesson, args.workers, args.timeout, course_env)
            hurt["full"] = full_marks(damaged, lesson, [s for s in damaged_of if s.endswith("_full")])
            print(f"{lesson} damaged: {hurt['autograde']:.0f} s + feedback {hurt['feedback']:.0f} s", flush=True)
            for name, steps in (("course", clean), ("damaged", hurt)):
                if steps["failed"]:
                    print(f"{lesson} {name}: not graded: {steps['failed']}", flush=True)
            base = None
            if base_tree is not None:
                base_course = tmp / f"base-{lesson}"
                old_config = (base_tree / "notebooks" / "nbgrader_config.py").read_text(encoding="utf-8")
                build(base_course, lesson, class_of, course_env, old_config)  # generated as today, graded as REV
                base = baseline_steps(args.baseline, base_tree, base_course, lesson, args.workers, args.timeout)
                base["full"] = full_marks(base_course, lesson, [s for s in class_of if s.endswith("_full")])
                print(f"{lesson} baseline: {base['autograde']:.0f} s + feedback {base['feedback']:.0f} s", flush=True)
            references = (sum(s.endswith("_full") for s in class_of), sum(s.endswith("_full") for s in damaged_of))
            rows.append((lesson, wall_stock, each_stock, clean, hurt, base, references))

    load_after = os.getloadavg()
    print(f"\n{platform.node()} · {os.cpu_count()} cores · {args.students} submissions per lesson")
    if n_stock < args.students:
        print(f"stock nbgrader graded only the first {n_stock} of them; its figures for {args.students} and the")
        print(f"speed-up are its measured time × {args.students}/{n_stock} (scaled, not measured)")
    print(f"load (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}")
    print(f"load (1/5/15 min) after:  {' '.join(f'{x:.2f}' for x in load_after)}")
    print("stock = one `python -m nbgrader autograde`, nbgrader's own preprocessors; course = the class command's")
    print(f"autograde with {args.workers} workers and notebooks/nbgrader_config.py; damaged = the same, 10% damaged")
    stock_scale = args.students / n_stock
    print(
        f"{'lesson':18}{f'stock wall ({n_stock})':>17}{f'stock, {args.students}':>13}{'course wall':>12}"
        f"{'speed-up':>10}{'stock/sub':>10}{'course/sub':>11}{'damaged wall':>13}{'damaged/clean':>14}"
    )
    for lesson, wall_stock, each_stock, clean, hurt, *_ in rows:
        scaled = "" if stock_scale == 1 else " (scaled)"
        print(
            f"{lesson:18}{wall_stock:16.0f}s{wall_stock * stock_scale:12.0f}s{clean['autograde']:11.0f}s"
            f"{wall_stock * stock_scale / clean['autograde']:9.1f}×"
            f"{statistics.median(each_stock):9.2f}s{statistics.median(clean['each']):10.2f}s"
            f"{hurt['autograde']:12.0f}s{hurt['autograde'] / clean['autograde']:13.2f}×{scaled}"
        )
    for lesson, _, _, clean, hurt, base, (refs, damaged_refs) in rows:
        print(f"{lesson}: {clean['full']} of {refs} reference submissions got full marks on the course's path,")
        print(f"  {hurt['full']} of {damaged_refs} undamaged ones in the damaged class; {hurt['repaired']} repaired")
        print(
            f"{lesson}: feedback ({args.workers} processes) took {clean['feedback']:.0f} s, "
            f"{hurt['feedback']:.0f} s for the damaged class; autograde + feedback, damaged / clean: "
            f"{(hurt['autograde'] + hurt['feedback']) / (clean['autograde'] + clean['feedback']):.2f}×"
        )
        if base is not None:
            print(
                f"{lesson}: baseline {args.baseline}: autograde {base['autograde']:.0f} s (median "
                f"{statistics.median(base['each']):.2f} s per submission), feedback {base['feedback']:.0f} s in "
                f"{base['feedback_processes']} process(es), {base['full']} of {refs} reference submissions full marks"
            )
    scale, term = 100 / args.students, len(manifest.LESSONS)  # a term: every lesson of the course
    slowest = max(rows, key=lambda r: r[3]["autograde"] + r[3]["feedback"])  # what a term waits for
    clean = slowest[3]
    stock_slowest = max(rows, key=lambda r: r[1])
    print(
        f"projected for 100 submissions × {term} lessons ({term} × the lesson whose autograde + feedback took "
        f"longest, scaled to 100): course {term * (clean['autograde'] + clean['feedback']) * scale / 60:.0f} min "
        f"({slowest[0]}: autograde {term * clean['autograde'] * scale / 60:.0f} + feedback "
        f"{term * clean['feedback'] * scale / 60:.0f}); stock nbgrader autograde alone "
        f"{term * stock_slowest[1] * 100 / n_stock / 60:.0f} min ({stock_slowest[0]}, from {n_stock} submissions)"
    )
    if args.baseline:
        base_slowest = max(rows, key=lambda r: r[5]["autograde"] + r[5]["feedback"])
        base = base_slowest[5]
        print(
            f"the same projection for {args.baseline}: "
            f"{term * (base['autograde'] + base['feedback']) * scale / 60:.0f} min ({base_slowest[0]}: autograde "
            f"{term * base['autograde'] * scale / 60:.0f} + feedback {term * base['feedback'] * scale / 60:.0f})"
        )


if __name__ == "__main__":
    main()
