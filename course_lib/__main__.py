"""Command line: `python -m course_lib {release,check,grade,class,feedback,handout,nbgrader,train} ...`.

release, check: course_lib.workflow.course; grade: .selfgrade; class: .class_command; feedback and nbgrader
(nbgrader's commands in the course root, with the ones that would do harm there refused and explained): .instructor;
handout: .handout; train: lesson 11's `python -m course_lib.train` on the learner's lesson 09 GPT (course_lib.lesson's
`your_code` finds it, which a teaching module such as course_lib.train may not import).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from course_lib.workflow.course import CourseError, course_root, release, stale_files
from course_lib.workflow.similarity import DEFAULT_THRESHOLD


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
    p_class.add_argument(
        "--regrade",
        action="store_true",
        help="grade every submission again (by default only new and changed ones, those never graded, and those "
        "whose grading failed for a reason other than the file)",
    )
    p_class.add_argument("--course", help="nbgrader course root (default: notebooks/)")
    p_class.add_argument(
        "--memory", help="memory limit of each process running a submission, e.g. 4G (default: nbgrader_config.py)"
    )
    p_class.add_argument(
        "--deadline",
        help="due date and time, e.g. 2026-12-01T23:59 (this machine's time zone) or 2026-12-01T23:59+01:00: "
        "later submissions are graded and marked late",
    )
    p_class.add_argument(
        "--copy-threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="flag answers at least this alike a course reference or solution, names aside (0-1, default "
        "%(default)s: course_lib/workflow/similarity.py); a flag for you to look at, never a score",
    )
    p_class.add_argument(
        "--no-write-containment",
        dest="contain_writes",
        action="store_false",
        help="let submissions' kernels write anywhere you can (only detected, for some folders); see docs/GRADING.md",
    )
    p_feedback = sub.add_parser("feedback", help="copy each student's feedback on a lesson into a folder per student")
    p_feedback.add_argument("lesson", help="lesson id, e.g. 04_attention")
    p_feedback.add_argument("--to", dest="dest", required=True, help="folder: DEST/<student>/<lesson>.html")
    p_feedback.add_argument("--course", help="nbgrader course root (default: notebooks/)")
    p_handout = sub.add_parser("handout", help="build what students get: no instructor sources, no hidden tests")
    p_handout.add_argument("dest", help="a new folder (or an earlier hand-out): it becomes a git repository")
    p_handout.add_argument(
        "--url",
        help="the GitHub repository you will publish it at (https://github.com/<owner>/<name>): its Colab links and "
        "set-up cells point there (without it they point at this course's repository, which holds the solutions)",
    )
    p_handout.add_argument("--archive", action="store_true", help="also write DEST.tar.gz")
    sub.add_parser("nbgrader", help="an nbgrader command in the course root (make nbgrader ARGS=...)", add_help=False)
    sub.add_parser(
        "train",
        help="`python -m course_lib.train prepare | run ...` (lesson 11) training your lesson 09 GPT where it passes "
        "its checks",
        add_help=False,
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["nbgrader"]:  # everything after it is nbgrader's
        from course_lib.workflow.instructor import main as nbgrader_main

        return nbgrader_main(argv[1:])
    if argv[:1] == ["train"]:  # everything after it is python -m course_lib.train's
        return _train(argv[1:])
    args = parser.parse_args(argv)
    try:
        if args.command == "release":
            print("regenerating the student versions with nbgrader (a few seconds a lesson)", file=sys.stderr)
            release(args.lessons or None, progress=lambda line: print(line, file=sys.stderr, flush=True))
            return 0
        if args.command == "check":
            stale = stale_files()
            for name in stale:
                print(f"stale: {name}  (run `make release` and commit the result)")
            return 1 if stale else 0
        if args.command == "class":
            return _grade_class(args)
        if args.command == "feedback":
            from course_lib.workflow.instructor import distribute_feedback

            course = Path(args.course) if args.course else course_root()
            copied = distribute_feedback(course, args.lesson, Path(args.dest))
            for student, path in copied.items():
                print(f"{student}: {path}")
            print(f"{len(copied)} student(s)' feedback on {args.lesson}: {args.dest}/<student>/{args.lesson}.html")
            return 0
        if args.command == "handout":
            from course_lib.workflow.handout import build_handout

            if not args.dest:
                parser.error("handout needs a folder, e.g. make handout DEST=../course-students")
            print(build_handout(Path(args.dest), archive=args.archive, url=args.url))
            return 0
        from course_lib.workflow.selfgrade import grade_notebook

        if not args.notebook:
            parser.error(
                "grade needs the path of your notebook: your copy of the lesson in work/, e.g. "
                "make grade NB=work/00_welcome/00_welcome.ipynb (save it first)"
            )
        report = grade_notebook(args.notebook, args.lesson, timeout=args.timeout)
        print(report)
        return 0
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _train(argv: list[str]) -> int:
    """`python -m course_lib train run --smoke` (and every command line of `python -m course_lib.train`): lesson 11's
    run on your lesson 09 GPT, built on your lesson 05 and 06 classes and read from your saved notebooks as the
    lessons read them (`your_code`), where it passes its visible checks; the course's GPT2 elsewhere. Which, and
    why, goes to stderr first: stdout holds the run's JSON records (the "start" record names the model's class)."""
    from course_lib import train
    from course_lib.lesson import your_code

    yours = your_code("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt")
    print(yours.banner(["MultiHeadAttention", "FeedForward", "TransformerBlock", "GPT"]), file=sys.stderr)
    gpt = yours.GPT if yours.yours("GPT") else None
    print("training " + ("YOUR GPT (lesson 09)" if gpt else "the course's GPT2 (course_lib.gpt2)"), file=sys.stderr)
    train.main(argv, gpt=gpt)
    return 0


def class_settings(args):
    """The class command's settings from its command line (`CourseError` naming what is wrong)."""
    from course_lib.workflow.class_command import ClassSettings
    from course_lib.workflow.submissions import parse_deadline

    try:
        deadline = parse_deadline(args.deadline) if args.deadline else None
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    return ClassSettings(
        lessons=tuple(args.lessons),
        course=Path(args.course) if args.course else course_root(),
        inbox=Path(args.folder) if args.folder else None,
        exchange=args.exchange,
        workers=args.workers,
        cell_timeout=args.timeout,
        regrade=args.regrade,
        memory=args.memory,
        contain_writes=args.contain_writes,
        deadline=deadline,
        copy_threshold=args.copy_threshold,
    )


def _grade_class(args) -> int:
    from course_lib.workflow.class_command import GRADES_FILE, REPORT_FILE, grade_class

    settings = class_settings(args)
    results = grade_class(settings)
    where = settings.course
    for result in results:
        line = f"{result.lesson}: {len(result.graded)} graded now, {len(result.failed)} could not be graded"
        if result.not_retried:
            line += f", {len(result.not_retried)} not tried again (unchanged since they could not be graded)"
        print(line)
    print(f"grades: {where / GRADES_FILE}\nwhat the class got wrong: {where / REPORT_FILE}")
    print(f"feedback: {where / 'feedback'} (make feedback LESSON=<id> DEST=<folder>: one folder per student)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
