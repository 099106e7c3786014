"""The instructor's other commands, made safe: `make nbgrader ARGS="..."` and `make feedback LESSON=... DEST=...`.

`python -m course_lib nbgrader ARGS...` runs `nbgrader ARGS...` in the course root with the course's environment,
except for what would do harm there, which it refuses and explains (exit status 2):

- `generate_assignment` (and its old name `assign`) writes the student version into `release/`, which is committed:
  plain, it skips a lesson whose `release/` exists and leaves the gradebook without the lesson; with `--force` it
  deletes `release/<lesson>/` first. `make class` records a lesson in the gradebook without touching `release/`,
  and `make release` regenerates the student versions. Given `--CourseDirectory.release_directory=...` elsewhere,
  it runs.
- `export` writes nbgrader's own `grades.csv`; the class command writes its richer `class_grades.csv`, a name
  nbgrader never writes. A `grades.csv` an earlier class command wrote (its flag columns show it) is not replaced:
  export refuses and says to name another file with `--to`.
- the exchange commands (`release_feedback`, `collect`, `release_assignment`, ...) need nbgrader's exchange, a folder
  shared by everyone on a server such as JupyterHub (`/usr/local/share/nbgrader/exchange` unless configured). When
  nbgrader says it cannot write there, the message says what to do instead: `make feedback` for feedback, `--from`
  for submissions, or `--Exchange.root=PATH` for an exchange of your own.

`distribute_feedback` copies each student's feedback of a lesson (`feedback/<student>/<lesson>/`, written by the
class command without hidden tests) into `DEST/<student>/<lesson>.html`: one folder per student, to send back or
upload.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

from course_lib.workflow.class_command.report import GRADES_FILE
from course_lib.workflow.course import CourseError, course_root

__all__ = ["distribute_feedback", "main", "refusal"]

_GENERATE = {"generate_assignment", "assign"}
_EXCHANGE = {"release_feedback", "release_assignment", "release", "collect", "fetch_feedback", "list", "submit"}


def _option(args: list[str], name: str) -> str | None:
    """The value of `--name=value` or `--name value` in `args`, if given."""
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def _written_by_the_class_command(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError):
        return False
    return any(column.endswith(" flagged") for column in header)


def refusal(course: Path, args: list[str]) -> str | None:
    """Why `nbgrader ARGS` must not run in `course` as it is asked (see the module docstring), or None."""
    command = next((a for a in args if not a.startswith("-")), "")
    if command in _GENERATE and _option(args, "CourseDirectory.release_directory") is None:
        return (
            f"`nbgrader {command}` in the course folder would write over the committed student versions in "
            f"release/ ({'deleting release/<lesson>/ first' if '--force' in args else 'or skip the lesson'}). "
            "To put a lesson into the gradebook for a class: make class LESSON=<id> (it leaves release/ alone); to "
            "regenerate the student versions after editing a source: make release. To generate elsewhere: add "
            "--CourseDirectory.release_directory=<folder>."
        )
    if command == "export":
        target = _option(args, "to") or _option(args, "CsvExportPlugin.to") or "grades.csv"
        path = course / target
        if path.name == GRADES_FILE or (path.exists() and _written_by_the_class_command(path)):
            return (
                f"{path} holds the class command's grades (a column per exercise, flags, 'not graded'), which "
                "nbgrader's export would replace with fewer columns. Export to another file: "
                'make nbgrader ARGS="export --to nbgrader_grades.csv"'
            )
    return None


_EXCHANGE_HELP = (
    "nbgrader's exchange is a folder shared by everyone on a server (JupyterHub); there is none here. "
    "To hand feedback back without it: make feedback LESSON=<id> DEST=<folder> (one folder per student, to send "
    "or upload); submissions come in with make class LESSON=<id> FROM=<folder>. To use an exchange of your own, "
    "create it (writable by every user) and pass --Exchange.root=<folder>."
)


def run_nbgrader(course: Path, args: list[str]) -> int:
    """`nbgrader ARGS` in `course`, its output shown as it comes; the exchange's failure explained."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    command = [sys.executable, "-m", "course_lib.workflow.startup", *args]
    process = subprocess.Popen(
        command, cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    unwritable = False
    assert process.stdout is not None
    for line in process.stdout:
        print(line, end="", file=sys.stderr, flush=True)
        unwritable |= "Unwritable directory" in line
    code = process.wait()
    if code and unwritable:
        print(f"\n{_EXCHANGE_HELP}", file=sys.stderr)
        return 2
    return code


def distribute_feedback(course: Path, lesson: str, dest: Path) -> dict[str, Path]:
    """Copy each student's feedback of `lesson` to `dest/<student>/<lesson>.html`; returns {student: file}."""
    folders = sorted((course / "feedback").glob(f"*/{lesson}"))
    if not folders:
        raise CourseError(f"no feedback for {lesson} in {course / 'feedback'}: grade the class first (make class)")
    copied = {}
    for folder in folders:
        pages = sorted(folder.glob("*.html"))
        if not pages:
            continue
        student = folder.parent.name
        target = dest / student / f"{lesson}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pages[0], target)
        copied[student] = target
    return copied


def main(argv: list[str] | None = None) -> int:
    """`python -m course_lib nbgrader [--course DIR] ARGS...`: see the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    course = course_root()
    if argv[:1] == ["--course"] and len(argv) > 1:
        course, argv = Path(argv[1]), argv[2:]
    if not argv:
        print('usage: make nbgrader ARGS="<nbgrader command> ..."  (e.g. ARGS="export")', file=sys.stderr)
        return 2
    why = refusal(course, argv)
    if why is not None:
        print(f"not run: {why}", file=sys.stderr)
        return 2
    return run_nbgrader(course, argv)
