"""Graders of lesson 00's warm-up exercises (see course_lib/welcome.py for the references).

The primer's two exercises, `pairwise_distances` and `gradient_descent`, are graded in
`course_lib.grading.welcome_primer` and re-exported here, where the lesson's test cells import every check.
"""

from __future__ import annotations

import torch

from course_lib import welcome as ref
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Passed,
    call_answer,
    call_label,
    describe,
    expect,
    expect_close,
    random_tensor,
    tagged_cases,
)
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.welcome_primer import check_gradient_descent, check_pairwise_distances

__all__ = [
    "check_count_characters",
    "check_gradient_descent",
    "check_next_token_pairs",
    "check_normalize_rows",
    "check_pairwise_distances",
]

VISIBLE_TEXTS = ["abca", "hello world", "", "Mississippi"]
VISIBLE_IDS = [[5, 7, 9], [1, 1, 1, 2], [3], []]


def check_count_characters(answer, cases: list[str] | None = None) -> Passed:
    """Visible cases: a few short strings. Hidden `cases`: more strings."""
    name = Graded(ref.count_characters)
    check_definition(answer, name)
    texts = tagged_cases(cases, VISIBLE_TEXTS)
    for tag, text in texts:
        expected = ref.count_characters(text)
        label = call_label(name, repr(text), tag)
        got = call_answer(name, answer, text, what=label)
        expect(name, isinstance(got, dict), f"{label} should return a dict, got {type(got).__name__}.")
        shown = "" if tag else f" gave {describe(got)}, expected {describe(expected)}"
        if dict(got) != expected:
            if {k: v for k, v in got.items() if k != " "} == {k: v for k, v in expected.items() if k != " "}:
                hint = "Spaces are characters too: count them like any other."
            elif set(got) == set(expected):
                hint = "The right characters, but some counts are off. Does every occurrence add one?"
            else:
                hint = "Every character of the text should be a key, and nothing else."
            raise GradingError(name, f"{label}{shown or ' gave wrong counts'}. {hint}")
        if list(got) != list(expected):
            order = "" if tag else f" ({list(expected)}), got {list(got)}"
            raise GradingError(
                name, f"{label}: right counts, but the keys should be in order of first appearance{order}."
            )
    return Passed(name, len(texts), hidden=cases is not None)


def check_next_token_pairs(answer, cases: list[list[int]] | None = None) -> Passed:
    """Visible cases: short id lists incl. length 0 and 1. Hidden `cases`: more id lists."""
    name = Graded(ref.next_token_pairs)
    check_definition(answer, name)
    id_lists = tagged_cases(cases, VISIBLE_IDS)
    for tag, ids in id_lists:
        expected = ref.next_token_pairs(ids)
        label = call_label(name, repr(ids), tag)
        got = call_answer(name, answer, list(ids), what=label)
        got_list = [tuple(p) for p in got] if isinstance(got, list | tuple) else got
        if got_list == expected:
            continue
        if isinstance(got_list, list) and len(got_list) == len(expected) + 1:
            hint = "One pair too many: the last token has no next token, so n ids give n - 1 pairs."
        elif isinstance(got_list, list) and len(got_list) + 1 == len(expected):
            hint = "One pair too few: n ids give n - 1 pairs (did the range stop one early?)."
        elif isinstance(got_list, list) and got_list == [(b, a) for a, b in expected]:
            hint = "Each pair is reversed: it should be (token, next token)."
        else:
            hint = "Pair each id with the id right after it."
        shown = " gave a wrong list" if tag else f" gave {describe(got)}, expected {expected}"
        raise GradingError(name, f"{label}{shown}. {hint}")
    return Passed(name, len(id_lists), hidden=cases is not None)


def check_normalize_rows(answer, cases: list[tuple[int, int, int]] | None = None) -> Passed:
    """Visible cases: seeded random non-negative matrices. Hidden `cases`: (rows, cols, seed) triples."""
    name = Graded(ref.normalize_rows)
    check_definition(answer, name)
    shapes = tagged_cases(cases, [(3, 4, 0), (1, 5, 1), (6, 2, 2)])
    for tag, (rows, cols, seed) in shapes:
        x = random_tensor(rows, cols, seed=seed).abs() + 0.1
        original = x.clone()
        expected = ref.normalize_rows(x.clone())
        label = call_label(name, f"<{rows}x{cols} tensor>", tag)
        got = call_answer(name, answer, x, what=label)
        expect(name, torch.equal(x, original), "normalize_rows changed its input in place; return a new tensor.")
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            sums = got.sum(dim=1)
            if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
                column_sums = got.sum(dim=0)
                if torch.allclose(column_sums, torch.ones_like(column_sums), atol=1e-5):
                    raise GradingError(
                        name, "your columns sum to 1, not your rows: sum over dim=1 (with keepdim=True)."
                    )
                raise GradingError(
                    name,
                    f"the rows of your result sum to {describe(sums)}, not 1. Divide each row by its own sum.",
                )
        expect_close(name, got, expected, label)
    return Passed(name, len(shapes), hidden=cases is not None)
