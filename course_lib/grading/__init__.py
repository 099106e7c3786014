"""Grading helpers for the course's nbgrader test cells (COURSE_SPEC §5).

`core` holds the toolkit (errors, guarded calls, comparisons, seeded inputs), `guard` the from-scratch guard,
`diagnose` the comparison with known wrong variants that names a learner's likely mistake, and
`attention_common` what the attention graders of lessons 04 and 05 share. One module per lesson holds its
`check_<exercise>` functions, e.g. `course_lib.grading.tokenization`; a long lesson keeps one unit in a second
module that the lesson's module re-exports (`bpe` for lesson 01, `attention_modules` for lesson 04), so a test
cell always imports from the lesson's module.
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
