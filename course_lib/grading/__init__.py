"""Grading helpers for the course's nbgrader test cells (COURSE_SPEC §5).

`core` holds the toolkit (errors, guarded calls, comparisons, seeded inputs), `guard` the from-scratch guard,
and one module per lesson holds its `check_<exercise>` functions, e.g. `course_lib.grading.tokenization`.
"""

from course_lib.grading.core import (
    GradingError,
    Passed,
    call_answer,
    describe,
    expect,
    expect_close,
    expect_equal,
    generator,
    random_tensor,
)
from course_lib.grading.guard import check_definition, watch_calls

__all__ = [
    "GradingError",
    "Passed",
    "call_answer",
    "check_definition",
    "describe",
    "expect",
    "expect_close",
    "expect_equal",
    "generator",
    "random_tensor",
    "watch_calls",
]
