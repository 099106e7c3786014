"""What the course's nbgrader plug-ins share: the notes they put at the top of a graded notebook, the gradebook's
flag, and the one trusted grader of an nbgrader process."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook, MissingEntry

from course_lib import manifest

__all__ = [
    "FLAG_MARKER",
    "KERNEL_RAN",
    "flag_submission",
    "strip_hidden_tests",
    "trusted_decides",
    "trusted_grader",
    "trusted_module",
    "warning_cell",
]

FLAG_MARKER = "course-flag: locked cells restored"
# Set in an autograde's resources by KeepGradingWhenKernelDies when it ran the notebook in a kernel.
KERNEL_RAN = "course_kernel_ran"
_HIDDEN = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.S | re.M)


def trusted_module():
    """The trusted grading module, imported on first use: it loads torch and every check (seconds), which
    nbgrader's other commands (generate_assignment, generate_feedback, export, formgrader) load the plug-ins for but
    never need."""
    from course_lib.workflow import trusted

    return trusted


@functools.cache
def trusted_grader():
    """This nbgrader process's one `TrustedGrader`, made on the first call: by `RestoreAndFlag`, which runs before
    any submission's code in the process, and then handed to `TrustedVerdicts`. nbgrader builds its preprocessors
    anew for every notebook, from their classes, so the grader cannot be given to them; it is kept here, the one
    place that holds state across the notebooks of a run."""
    return trusted_module().TrustedGrader(Path.cwd())


def trusted_decides(info: dict | None) -> bool:
    """Whether `TrustedVerdicts` will write every test cell's verdict of the notebook nbgrader describes with `info`
    (`resources["nbgrader"]`): trusted grading works here (it forks) and the assignment is a lesson of the course.
    Then what the notebook's cells do in a kernel decides no score (every graded cell of the course is a test cell)."""
    if not info or not trusted_module().available():
        return False
    try:
        manifest.lesson(info.get("assignment", ""))
    except KeyError:
        return False
    return True


def strip_hidden_tests(source: str) -> str:
    """The cell text a student sees: the instructor source without its hidden-test region."""
    return _HIDDEN.sub("", source)


def warning_cell(problems: list[str]):
    """The note at the top of a graded notebook that lists what the grader found and put right."""
    lines = "\n".join(f"- {p}" for p in problems)
    return new_markdown_cell(
        f"<!-- {FLAG_MARKER} -->\n**Note from the grader:** this submission changed things that must stay as "
        f"released, or reached into the grading. What it changed was put back, the exercises concerned were graded "
        f"as described below, and the submission is flagged for your instructor:\n\n{lines}"
    )


def flag_submission(info) -> None:
    """Set the submission's `flagged` mark in the gradebook (the instructor sees it in formgrader)."""
    with Gradebook(info["db_url"]) as gradebook:
        try:
            submission = gradebook.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
        except MissingEntry:
            return
        submission.flagged = True
        gradebook.db.commit()
