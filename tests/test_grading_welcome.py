"""Lesson 00 graders: the reference passes; each common mistake is named."""

import pytest

from course_lib import welcome
from course_lib.grading import GradingError
from course_lib.grading.welcome import check_count_characters, check_next_token_pairs, check_normalize_rows
from tests.answers import define


def test_reference_passes_visible_and_hidden_cases():
    assert "4 visible" in repr(
        check_count_characters(
            define(
                "def count_characters(t):\n    c = {}\n    for ch in t:\n"
                "        c[ch] = c.get(ch, 0) + 1\n    return c",
                "count_characters",
            )
        )
    )
    check_next_token_pairs(define("def next_token_pairs(i):\n    return list(zip(i, i[1:]))", "next_token_pairs"))
    check_normalize_rows(define("def normalize_rows(x):\n    return x / x.sum(1, keepdim=True)", "normalize_rows"))
    check_normalize_rows(
        define("def normalize_rows(x):\n    return x / x.sum(1, keepdim=True)", "normalize_rows"), cases=[(2, 9, 5)]
    )


@pytest.mark.parametrize(
    "check, code, name, words",
    [
        (check_count_characters, "def f(t):\n    return {c: t.count(c) for c in t if c != ' '}", "f", "Spaces"),
        (
            check_count_characters,
            "def f(t):\n    return {c: t.count(c) for c in sorted(set(t))}",
            "f",
            "first appearance",
        ),
        (check_next_token_pairs, "def f(i):\n    return [(i[k], i[k + 1]) for k in range(len(i) - 2)]", "f", "too few"),
        (check_next_token_pairs, "def f(i):\n    return [(b, a) for a, b in zip(i, i[1:])]", "f", "reversed"),
        (check_normalize_rows, "def f(x):\n    return x / x.sum(0, keepdim=True)", "f", "columns sum to 1"),
        (check_normalize_rows, "def f(x):\n    x /= x.sum(1, keepdim=True)\n    return x", "f", "in place"),
        (check_normalize_rows, "def f(x):\n    raise NotImplementedError()", "f", "not written yet"),
    ],
)
def test_common_mistakes_are_named(check, code, name, words):
    with pytest.raises(GradingError, match=words):
        check(define(code, name))


@pytest.mark.parametrize(
    "answer",
    [
        welcome.count_characters,
        define("from course_lib.welcome import count_characters as c\ndef f(t):\n    return c(t)", "f"),
    ],
)
def test_the_reference_earns_nothing(answer):
    with pytest.raises(GradingError, match="write `count_characters` yourself"):
        check_count_characters(answer)
