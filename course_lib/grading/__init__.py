"""The graders of the lessons' exercises: one module per lesson, holding its `check_<exercise>` functions.

A test cell imports from its lesson's module (`from course_lib.grading.attention import check_causal_mask`). A
long lesson keeps one unit in a second module that the lesson's module re-exports (`tokenization_bpe` for the
byte-pair-encoding exercises of lesson 01, `attention_modules` for lesson 04), and `attention_common` holds
what the attention graders of lessons 04 and 05 share. The machinery every grader is built from — messages,
guarded calls, comparisons, the from-scratch guard, naming known mistakes, and the remote answers through which
a graded notebook's code is reached, with the sandbox that runs it — lives in `course_lib.grading.kit`.

The names below are loaded on first use: importing a module of the kit does not import torch through this
package, so `python -m course_lib.grading.kit.confine` (which starts every grading kernel) stays quick.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GradingError": "course_lib.grading.kit.core",
    "Passed": "course_lib.grading.kit.core",
    "call_answer": "course_lib.grading.kit.core",
    "describe": "course_lib.grading.kit.core",
    "expect": "course_lib.grading.kit.core",
    "expect_close": "course_lib.grading.kit.core",
    "expect_equal": "course_lib.grading.kit.core",
    "generator": "course_lib.grading.kit.core",
    "random_tensor": "course_lib.grading.kit.core",
    "check_definition": "course_lib.grading.kit.guard",
    "watch_calls": "course_lib.grading.kit.guard",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
