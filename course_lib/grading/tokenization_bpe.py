"""Graders of lesson 01 — training a byte-pair encoding (`get_pair_counts`, `merge_pair`, `train_bpe`); the
encoding and decoding exercises are graded in `course_lib.grading.tokenization_bpe_codec`.

The lesson's test cells import these checks from `course_lib.grading.tokenization`, which re-exports them. The
recipe is that module's: the guard first, the expected value from `course_lib.tokenization` computed outside
the learner's call, and on a mismatch each known wrong variant (overlapping merges, ties broken the wrong way,
merges replayed by frequency, bytes decoded one token at a time, ...) computed on the same input and named
when the learner's output equals it (`course_lib.grading.kit.diagnose`).

A hidden case is named "hidden case k" in messages, never by its input.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from course_lib import tokenization as ref
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Hint,
    Passed,
    call_answer,
    call_label,
    catching,
    describe,
    expect_int_list,
    expect_type,
    is_int,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, diagnose_value
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_get_pair_counts", "check_merge_pair", "check_train_bpe", "count_pairs"]


def count_pairs(pairs: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    return counts


# ----------------------------------------------------------------------------------------------
# Exercise 2: get_pair_counts

_PAIR_COUNT_CASES = [
    [1, 2, 3, 1, 2],
    [1, 1, 1],
    [5, 5, 5, 5, 2, 5, 5],
    [3, 1, 2, 1, 2, 3, 1],
    [],
    [7],
    [0, 2, 1, 1, 3, 0, 1, 1, 1, 2, 0, 2, 2, 2, 1, 3, 3, 0, 1, 2, 1, 1, 0, 3, 3, 3, 2, 1],
]


def _pairs_non_overlapping(ids: list[int]) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    busy_until: dict[tuple[int, int], int] = {}  # an occurrence overlapping the last counted one is skipped
    for i, pair in enumerate(pairwise(ids)):
        if busy_until.get(pair, -1) > i:
            continue
        counts[pair] = counts.get(pair, 0) + 1
        busy_until[pair] = i + 2
    return counts


def check_get_pair_counts(answer: Any, cases: list | None = None) -> Passed:
    """Check `get_pair_counts(ids)`. A case is a list of ints."""
    name = Graded(ref.get_pair_counts)
    check_definition(answer, name)
    tagged = tagged_cases(cases, _PAIR_COUNT_CASES)
    for tag, ids in tagged:
        _pair_counts_case(name, answer, [int(i) for i in ids], tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _pair_counts_case(name: str, answer: Any, ids: list[int], tag: str | None) -> None:
    expected = ref.get_pair_counts(ids)
    what = call_label("get_pair_counts", describe(ids, 60), tag)
    given = list(ids)
    got = call_answer(name, answer, given, what=what)
    if given != ids:
        raise GradingError(name, f"{what} changed its input list. Do not modify `ids`.")
    expect_type(name, got, dict, what, "a dict {(id1, id2): count}")
    for key, value in got.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(is_int(x) for x in key)):
            raise GradingError(name, f"{what}: keys should be tuples of two ints such as (1, 2), got {key!r}.")
        if not is_int(value):
            raise GradingError(name, f"{what}: counts should be ints, got {value!r} for the pair {key}.")
    got = dict(got)
    if got == expected and list(got) != list(expected):
        order = "sorted" if list(got) == sorted(expected) else "in another order"
        raise GradingError(
            name,
            f"{what}: the counts are right but the keys are {order}: {describe(list(got), 60)}. The keys should "
            f"be in order of first occurrence: {describe(list(expected), 60)} (a dict keeps the order of insertion).",
        )
    if got != expected:
        non_overlapping = (
            "pairs were counted without overlap (non-overlapping counting). Count the pair (ids[i], "
            "ids[i+1]) at every i in range(len(ids) - 1): in [1, 1, 1] the pair (1, 1) occurs twice. Only "
            "merge_pair skips overlapping occurrences."
        )
        short = [pair for pair in expected if got.get(pair) != expected[pair]]
        if set(got) == set(expected) and all(a == b and got[(a, b)] < expected[(a, b)] for a, b in short):
            raise GradingError(name, f"{what} returned {describe(got)}: {non_overlapping}")
        variants: list[Variant] = [
            (lambda: _pairs_non_overlapping(ids), non_overlapping),
            (
                lambda: count_pairs(list(zip(ids[::2], ids[1::2], strict=False))),
                "only every other pair was counted (a step of 2). Count the pair starting at every position.",
            ),
            (
                lambda: count_pairs(list(pairwise(ids))[:-1]),
                "the last pair is missing. The pairs start at i in range(len(ids) - 1).",
            ),
        ]
        diagnose_value(name, what, got, expected, variants)


# ----------------------------------------------------------------------------------------------
# Exercise 3: merge_pair

_MERGE_CASES = [
    ([1, 1, 1], (1, 1), 9),
    ([1, 2, 3, 1, 2], (1, 2), 256),
    ([5, 5, 5, 5], (5, 5), 7),
    ([1, 2, 1, 2, 1], (2, 1), 99),
    ([1, 2, 3, 4, 1, 2], (1, 2), 300),
    ([3, 4], (4, 3), 10),
    ([], (1, 2), 3),
]


def _merge_overlapping(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Every occurrence becomes new_id and second halves vanish: [1, 1, 1] -> [new, new]."""
    out = []
    for i, item in enumerate(ids):
        if i + 1 < len(ids) and (item, ids[i + 1]) == pair:
            out.append(new_id)
        elif not (i > 0 and (ids[i - 1], item) == pair):
            out.append(item)
    return out


def _merge_step_one(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """After a match the scan moves on by one, not two: [1, 1, 1] -> [new, new, 1]."""
    return [new_id if (item, after) == pair else item for item, after in zip(ids, [*ids[1:], None], strict=True)]


def _merge_first_only(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return [*ids[:i], new_id, *ids[i + 2 :]]
    return list(ids)


def check_merge_pair(answer: Any, cases: list | None = None) -> Passed:
    """Check `merge_pair(ids, pair, new_id)`. A case is `(ids, pair, new_id)`."""
    name = Graded(ref.merge_pair)
    check_definition(answer, name)
    tagged = tagged_cases(cases, _MERGE_CASES)
    for tag, (ids, pair, new_id) in tagged:
        _merge_case(name, answer, [int(i) for i in ids], tuple(pair), new_id, tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _merge_case(name: str, answer: Any, ids: list[int], pair: tuple[int, int], new_id: int, tag: str | None):
    expected = ref.merge_pair(ids, pair, new_id)
    what = call_label("merge_pair", f"{describe(ids, 60)}, {pair}, {new_id}", tag)
    given = list(ids)
    got = call_answer(name, answer, given, pair, new_id, what=what)
    if given != ids:
        raise GradingError(
            name,
            f"{what} modified the input list. Build and return a new list: the caller still needs `ids`.",
        )
    expect_int_list(name, got, what)
    if got != expected:
        overlapping = (
            "overlapping merges: after replacing the match at i, continue at i + 2. [1, 1, 1] with the pair "
            f"(1, 1) becomes [{new_id}, 1]."
        )
        variants: list[Variant] = [
            (lambda: _merge_overlapping(ids, pair, new_id), overlapping),
            (lambda: _merge_step_one(ids, pair, new_id), overlapping),
            (
                lambda: _merge_first_only(ids, pair, new_id),
                "only the first occurrence was replaced. Replace every (non-overlapping) occurrence.",
            ),
            (
                lambda: expected[:-1],
                "the last item is lost. When the scan reaches the last item, append it.",
            ),
        ]
        diagnose_value(name, what, got, expected, variants)


# ----------------------------------------------------------------------------------------------
# Exercise 4: train_bpe

_TRAIN_CASES = [
    ("cadbecadbe", 258),  # four pairs tie: the first and the last to occur, the smallest, the largest
    ("aaabdaaabac", 259),
    ("aaaa", 300),  # the sequence shrinks to a single token after two merges
    ("café, café! naïve café", 264),
    ("hello", 256),
    ("the cat sat on the mat; the rat sat on the hat", 270),
    ("any text", 255),  # vocab_size < 256: ValueError
]


def _train_variant(text: str, vocab_size: int, *, tie="first", offset=0, extra=0, chars=False):
    """`train_bpe` with one mistake: the tie rule, the first id, the number of merges, or characters."""
    ids = [ord(c) for c in text] if chars else list(text.encode("utf-8"))
    merges: dict[tuple[int, int], int] = {}
    for step in range(vocab_size - 256 + extra):
        if len(ids) < 2:
            break
        counts = count_pairs(list(pairwise(ids)))
        top = max(counts.values())
        tied = [pair for pair, count in counts.items() if count == top]  # in order of first occurrence
        best = {"first": tied[0], "last": tied[-1], "largest": max(tied), "smallest": min(tied)}[tie]
        ids = ref.apply_merge(ids, best, 256 + offset + step)
        merges[best] = 256 + offset + step
    return merges


def check_train_bpe(answer: Any, cases: list | None = None) -> Passed:
    """Check `train_bpe(text, vocab_size)`.

    A case is `(text, vocab_size)`; with a vocab_size below 256 a ValueError is expected.
    """
    name = Graded(ref.train_bpe)
    check_definition(answer, name)
    tagged = tagged_cases(cases, _TRAIN_CASES)
    for tag, (text, vocab_size) in tagged:
        _train_case(name, answer, text, vocab_size, tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _train_case(name: str, answer: Any, text: str, vocab_size: int, tag: str | None) -> None:
    what = call_label("train_bpe", f"{describe(text, 40)}, {vocab_size}", tag)
    if vocab_size < 256:
        raised = call_answer(name, catching(answer), text, vocab_size, what=what)
        if not isinstance(raised, ValueError):
            did = "returned normally" if raised is None else f"raised {type(raised).__name__}: {raised}"
            raise GradingError(
                name,
                f"{what} {did}. A vocab_size below 256 cannot even hold the 256 byte values: raise a "
                "ValueError (ValueError missing), e.g. `raise ValueError(f'vocab_size must be >= 256, got "
                "{vocab_size}')`.",
            )
        return
    expected = ref.train_bpe(text, vocab_size)
    stop_early = (
        f"on this text the sequence shrinks to a single token after {len(expected)} merges: stop early when "
        "fewer than 2 tokens are left (no pair to merge)."
    )
    # If the text runs out of pairs before vocab_size is reached, any exception gets the hint.
    hints: list[Hint] = [(lambda message: True, stop_early)] if len(expected) < vocab_size - 256 else []
    got = call_answer(name, answer, text, vocab_size, what=what, hints=hints)
    expect_type(name, got, dict, what, "a dict {(id1, id2): new_id}")
    for key, value in got.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(is_int(x) for x in key) and is_int(value)):
            raise GradingError(
                name, f"{what}: each item should be (id1, id2): new_id, all ints; got {key!r}: {value!r}."
            )
    got = dict(got)
    if got != expected:
        n = vocab_size - 256
        offset = min(got.values()) - 256 if got else 0
        first = (
            "Among equally frequent pairs, take the one whose first occurrence in the current sequence comes "
            "first (max() over a dict in insertion order does that)"
        )
        variants: list[Variant] = [
            (
                lambda: _train_variant(text, vocab_size, tie="largest"),
                f"ties were broken by the largest pair. {first}.",
            ),
            (
                lambda: _train_variant(text, vocab_size, tie="smallest"),
                f"ties were broken by the smallest pair. {first}.",
            ),
            (
                lambda: _train_variant(text, vocab_size, tie="last"),
                f"ties went to the pair that occurs last (`>=` instead of `>`?). {first}.",
            ),
            (
                lambda: _train_variant(text, vocab_size, offset=offset),
                f"the merge ids start at {256 + offset}. Ids 0-255 are the bytes, so merge i gets id 256 + i "
                "(the first merge is 256).",
            ),
            (
                lambda: _train_variant(text, vocab_size, extra=1),
                f"that is {n + 1} merges, one too many (off-by-one): make vocab_size - 256 = {n} merges.",
            ),
            (
                lambda: _train_variant(text, vocab_size, extra=-1),
                f"that is {n - 1} merges, one too few (off-by-one): make vocab_size - 256 = {n} merges.",
            ),
            (
                lambda: _train_variant(text, vocab_size, chars=True),
                "it worked on characters (ord(c)), not bytes. Start from list(text.encode('utf-8')): "
                "byte-level BPE sees 'é' as two bytes.",
            ),
        ]
        diagnose_value(name, what, got, expected, variants)
