"""Command line: `python -m course_lib {release,check,grade,class} ...` (course_lib.workflow.course, .classroom)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from course_lib.workflow.course import CourseError, course_root, release, stale_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_release = sub.add_parser("release", help="regenerate student versions from the instructor sources")
    p_release.add_argument("lessons", nargs="*", help="lesson ids (default: all)")
    sub.add_parser("check", help="fail if the committed student versions are stale")
    p_grade = sub.add_parser("grade", help="autograde one notebook and print the score of each exercise")
    p_grade.add_argument("notebook", help="path to your .ipynb file (save it first)")
    p_grade.add_argument("--lesson", help="lesson id, when the file name does not say it")
    p_grade.add_argument("--timeout", type=int, help="per-cell time limit in seconds")
    p_class = sub.add_parser("class", help="grade a class: collect, autograde in parallel, feedback, grades, report")
    p_class.add_argument("lessons", nargs="+", help="lesson ids, e.g. 04_attention")
    p_class.add_argument("--from", dest="folder", help="folder of submissions: <student>.ipynb or <student>/*.ipynb")
    p_class.add_argument("--exchange", action="store_true", help="collect from the nbgrader exchange first")
    p_class.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel graders (default: cores)")
    p_class.add_argument("--timeout", type=int, help="per-cell time limit in seconds (default: nbgrader_config.py)")
    p_class.add_argument("--regrade", action="store_true", help="grade again submissions already autograded")
    p_class.add_argument("--course", help="nbgrader course root (default: notebooks/)")
    p_class.add_argument(
        "--memory", help="memory limit of each process running a submission, e.g. 4G (default: nbgrader_config.py)"
    )
    p_class.add_argument(
        "--no-write-containment",
        dest="contain_writes",
        action="store_false",
        help="let submissions' kernels write anywhere you can (only detected, for some folders); see docs/GRADING.md",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "release":
            for path in release(args.lessons or None):
                print(f"wrote {path}")
            return 0
        if args.command == "check":
            stale = stale_files()
            for name in stale:
                print(f"stale: {name}  (run `make release` and commit the result)")
            return 1 if stale else 0
        if args.command == "class":
            from course_lib.workflow.classroom import grade_class

            course = Path(args.course) if args.course else None
            folder = Path(args.folder) if args.folder else None
            results = grade_class(
                args.lessons, course, folder, args.exchange, args.workers, args.timeout, args.regrade,
                args.memory, args.contain_writes,
            )  # fmt: skip
            where = (course or course_root()).resolve()
            for result in results:
                print(f"{result.lesson}: {len(result.graded)} graded, {len(result.failed)} could not be graded")
            print(f"grades: {where / 'grades.csv'}\nwhat the class got wrong: {where / 'class_report.md'}")
            return 0
        from course_lib.workflow.selfgrade import grade_notebook

        if not args.notebook:
            parser.error(
                "grade needs a notebook path, e.g. make grade NB=notebooks/release/00_welcome/00_welcome.ipynb"
            )
        report = grade_notebook(args.notebook, args.lesson, timeout=args.timeout)
        print(report)
        return 0
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
