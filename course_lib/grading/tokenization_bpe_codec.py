"""Graders of lesson 01 — encoding and decoding with byte-pair merges (`bpe_encode`, `bpe_decode`).

The lesson's test cells import these checks from `course_lib.grading.tokenization`, which re-exports them. As in
`course_lib.grading.tokenization_bpe`: the guard first, the expected value from `course_lib.tokenization` computed
outside the learner's call, and on a mismatch each known wrong variant (merges replayed by frequency, bytes
decoded one token at a time, ...) computed on the same input and named when the learner's output equals it.

A hidden case is named "hidden case k" in messages, never by its input.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from course_lib import tokenization as ref
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Passed,
    call_answer,
    call_label,
    describe,
    expect_int_list,
    expect_type,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, diagnose_value
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.tokenization_bpe import count_pairs

__all__ = ["check_bpe_decode", "check_bpe_encode"]


def _merges_of(spec: Any) -> dict[tuple[int, int], int]:
    """A case's merges: a dict as it is, or `(training_text, vocab_size)` trained with the reference."""
    if isinstance(spec, dict):
        return dict(spec)
    text, vocab_size = spec
    return ref.train_bpe(text, vocab_size)


# ----------------------------------------------------------------------------------------------
# Exercise 5: bpe_encode

_ENCODE_CASES = [
    ("aacaa", {(99, 97): 256, (97, 97): 257, (97, 99): 258}),  # most frequent, lowest, highest id all differ
    ("aaabdaaabac", ("aaabdaaabac", 259)),  # later merges use ids that exist only after earlier ones
    ("the cat sat on the mat", ("the cat sat on the mat. the rat sat on the hat.", 272)),
    ("héllo, héllo", ("héllo héllo héllo", 262)),
    ("xyz", ("aaabdaaabac", 259)),  # no merge applies
    ("", ("aaabdaaabac", 259)),
]


def _encode_variant(text: str, merges: dict, rule: str) -> list[int]:
    """`bpe_encode` with one mistake (see the messages in `_encode_case`)."""
    ids = list(text.encode("utf-8"))
    if rule == "original_pairs":  # one pass over the pairs of the bytes; pairs made by merges are never seen
        for pair in sorted((p for p in dict.fromkeys(pairwise(ids)) if p in merges), key=merges.get):
            ids = ref.apply_merge(ids, pair, merges[pair])
        return ids
    while present := [p for p in dict.fromkeys(pairwise(ids)) if p in merges]:
        if rule.startswith("frequency"):
            counts = count_pairs([p for p in pairwise(ids) if p in merges])
            tied = [p for p in present if counts[p] == max(counts.values())]
            pair = tied[0] if rule == "frequency" else min(tied, key=merges.get)
        elif rule == "highest":
            pair = max(present, key=merges.get)
        else:  # "once": the lowest-id merge, a single time
            pair = min(present, key=merges.get)
        ids = ref.apply_merge(ids, pair, merges[pair])
        if rule == "once":
            break
    return ids


def check_bpe_encode(answer: Any, cases: list | None = None) -> Passed:
    """Check `bpe_encode(text, merges)`.

    A case is `(text, merges)`: merges is a dict `{(id1, id2): new_id}` or `(training_text, vocab_size)`,
    which the reference `train_bpe` turns into one.
    """
    name = Graded(ref.bpe_encode)
    check_definition(answer, name)
    tagged = tagged_cases(cases, _ENCODE_CASES)
    for tag, (text, spec) in tagged:
        _encode_case(name, answer, text, _merges_of(spec), tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _encode_case(name: str, answer: Any, text: str, merges: dict, tag: str | None) -> None:
    expected = ref.bpe_encode(text, merges)
    what = call_label("bpe_encode", f"{describe(text, 40)}, merges of {len(merges)} pairs", tag)
    got = call_answer(name, answer, text, dict(merges), what=what)
    expect_int_list(name, got, what)
    if got != expected:
        frequency = (
            "it merged by pair frequency. Encoding replays the merges in the order they were learned: always "
            "the present pair with the lowest merge id, however often it occurs."
        )
        one_pass = (
            "it stopped after one pass. A merge creates new pairs, which may have merges too: repeat 'merge "
            "the present pair with the lowest merge id' until no adjacent pair has a merge."
        )
        variants: list[Variant] = [
            (lambda: _encode_variant(text, merges, "frequency"), frequency),
            (lambda: _encode_variant(text, merges, "frequency_lowest"), frequency),
            (
                lambda: _encode_variant(text, merges, "highest"),
                "the pair with the highest merge id went first. Pick the present pair with the lowest id.",
            ),
            (lambda: _encode_variant(text, merges, "once"), one_pass),
            (lambda: _encode_variant(text, merges, "original_pairs"), one_pass),
        ]
        diagnose_value(name, what, got, expected, variants)


# ----------------------------------------------------------------------------------------------
# Exercise 6: bpe_decode

_DECODE_CASES = [
    ([104, 257, 108, 111, 32, 119, 111, 114, 108, 100], {(101, 108): 256, (256, 108): 257}),  # "hello world"
    ([104, 195, 169, 108, 108, 111], {}),  # "héllo" as bytes
    ([256, 169, 32, 104, 105], {(97, 195): 256}),  # "aé hi": the é is cut between two tokens
    ([195, 104, 105], {}),  # an invalid cut: 0xC3 starts a character that never ends
    ([], ("aaabdaaabac", 259)),
    ([259, 256, 33], {(97, 98): 256, (256, 99): 257, (100, 100): 258, (257, 258): 259}),
]


def check_bpe_decode(answer: Any, cases: list | None = None) -> Passed:
    """Check `bpe_decode(ids, merges)`.

    A case is `(ids, merges)`: merges is a dict `{(id1, id2): new_id}` or `(training_text, vocab_size)`,
    which the reference `train_bpe` turns into one.
    """
    name = Graded(ref.bpe_decode)
    check_definition(answer, name)
    tagged = tagged_cases(cases, _DECODE_CASES)
    for tag, (ids, spec) in tagged:
        _decode_case(name, answer, [int(i) for i in ids], _merges_of(spec), tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _decode_case(name: str, answer: Any, ids: list[int], merges: dict, tag: str | None) -> None:
    expected = ref.bpe_decode(ids, merges)
    what = call_label("bpe_decode", f"{describe(ids, 60)}, merges of {len(merges)} pairs", tag)
    strict = (
        lambda message: message.startswith(f"{what} raised UnicodeDecodeError"),
        'these bytes are not valid utf-8 (a character cut in the middle), and errors="strict" (the default) '
        "refuses them. Decode with errors=\"replace\": invalid bytes become '\\ufffd'.",
    )
    got = call_answer(name, answer, list(ids), dict(merges), what=what, hints=[strict])
    if isinstance(got, bytes):
        raise GradingError(name, f"{what} returned bytes; decode them: .decode('utf-8', errors='replace').")
    expect_type(name, got, str, what, "a str")
    if got != expected:
        table = ref.bpe_vocab(merges)
        chunks = [table[i] for i in ids]
        variants: list[Variant] = [
            (
                lambda: b"".join(chunks).decode("utf-8", errors="ignore"),
                'invalid bytes were dropped (errors="ignore"). Use errors="replace", which shows them as \'\\ufffd\'.',
            ),
            (
                lambda: "".join(chunk.decode("utf-8", errors="replace") for chunk in chunks),
                "each token was decoded on its own. A token may hold part of a character: join all the bytes "
                "first, then decode once.",
            ),
            (
                lambda: "".join(chr(byte) for chunk in chunks for byte in chunk),
                "bytes were turned into characters with chr(). Join the bytes, then decode them as utf-8.",
            ),
        ]
        diagnose_value(name, what, got, expected, variants)
