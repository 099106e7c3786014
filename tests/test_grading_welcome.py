"""Lesson 00 graders: right answers and the reference pass; each common mistake is named.

The tests every lesson gets, and the tables below, run through tests/grader_kit.py.
"""

from course_lib import welcome
from course_lib.grading import welcome as grading
from tests.grader_kit import GraderKit, LessonGraderTests, wrong_answer

KIT = GraderKit(
    "00_welcome",
    grading,
    welcome,
    {
        "count_characters": "def count_characters(t):\n    c = {}\n    for ch in t:\n"
        "        c[ch] = c.get(ch, 0) + 1\n    return c",
        "next_token_pairs": "def next_token_pairs(i):\n    return list(zip(i, i[1:]))",
        "normalize_rows": "def normalize_rows(x):\n    return x / x.sum(1, keepdim=True)",
    },
)

# Each known mistake, as a whole answer, and what its message names.
MISTAKES = [
    wrong_answer(
        "count_characters",
        "def f(t):\n    return {c: t.count(c) for c in t if c != ' '}",
        "Spaces",
        id="count-skips-spaces",
    ),
    wrong_answer(
        "count_characters",
        "def f(t):\n    return {c: t.count(c) for c in sorted(set(t))}",
        "first appearance",
        id="count-keys-sorted",
    ),
    wrong_answer(
        "next_token_pairs",
        "def f(i):\n    return [(i[k], i[k + 1]) for k in range(len(i) - 2)]",
        "too few",
        id="pairs-one-too-few",
    ),
    wrong_answer(
        "next_token_pairs", "def f(i):\n    return [(b, a) for a, b in zip(i, i[1:])]", "reversed", id="pairs-reversed"
    ),
    wrong_answer(
        "normalize_rows", "def f(x):\n    return x / x.sum(0, keepdim=True)", "columns sum to 1", id="normalize-columns"
    ),
    wrong_answer(
        "normalize_rows",
        "def f(x):\n    x /= x.sum(1, keepdim=True)\n    return x",
        "in place",
        id="normalize-in-place",
    ),
    wrong_answer(
        "normalize_rows", "def f(x):\n    raise NotImplementedError()", "not written yet", id="normalize-unwritten"
    ),
]

# An answer that calls the reference.
BORROWED = [
    wrong_answer(
        "count_characters",
        "from course_lib.welcome import count_characters as c\ndef f(t):\n    return c(t)",
        "write `count_characters` yourself",
        id="count-calling-the-reference",
    ),
]


def test_count_characters_runs_four_visible_checks():
    assert "all 4 visible checks passed" in repr(KIT.grade("count_characters"))


def test_normalize_rows_passes_a_case_of_its_own():
    assert KIT.grade("normalize_rows", cases=[(2, 9, 5)]).hidden


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED
