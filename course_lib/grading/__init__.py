"""The graders of the lessons' exercises: one module per lesson, holding its `check_<exercise>` functions.

A test cell imports from its lesson's module (`from course_lib.grading.attention import check_causal_mask`). A
long lesson keeps one unit in a second module that the lesson's module re-exports (`tokenization_bpe` for the
byte-pair-encoding exercises of lesson 01, `attention_modules` for lesson 04), and `attention_common` holds
what the attention graders of lessons 04 and 05 share. The machinery every grader is built from — messages,
guarded calls, comparisons, the from-scratch guard, naming known mistakes, and the remote answers through which
a graded notebook's code is reached — lives in `course_lib.grading.kit`.
"""

from course_lib.grading.kit.core import (
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
from course_lib.grading.kit.guard import check_definition, watch_calls

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
