"""Graders of lesson 01 — From text to token ids (one `check_<exercise>` per exercise of COURSE_SPEC §6).

Every check follows the same recipe: `check_definition` first (the from-scratch guard); then, for each case,
the expected value from the reference in `course_lib.tokenization`, computed *outside* the learner's call,
and the learner's answer through `call_answer`. When the two differ, the check computes the output of each
known wrong variant on the same input and, if the learner's output equals one of them, names that mistake;
otherwise it reports the input, the expected value and what came back.

With `cases=None` a check runs its visible cases; a hidden test cell passes its own `cases` (the format is in
each check's docstring) and only those run. Messages about a hidden case call it "hidden case k" instead of
showing its input, so feedback never reveals hidden test text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from numbers import Integral
from typing import Any

import torch

from course_lib import tokenization as ref
from course_lib.grading import core
from course_lib.grading.core import GradingError, Passed, call_label, describe, tagged_cases
from course_lib.grading.guard import check_definition

__all__ = [
    "check_SimpleTokenizer",
    "check_bpe_decode",
    "check_bpe_encode",
    "check_get_pair_counts",
    "check_merge_pair",
    "check_sliding_window_pairs",
    "check_train_bpe",
]

Variant = tuple[Callable[[], Any], str]  # (a wrong version run on the same input, what that mistake is)


# ----------------------------------------------------------------------------------------------
# Shared helpers


def _call(name: str, fn: Callable[..., Any], *args: Any, what: str) -> Any:
    # The time limit is read at call time, so a test (or an instructor) can change it on the core module.
    return core.call_answer(name, fn, *args, what=what, timeout=core.DEFAULT_CALL_TIMEOUT)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _expect_int_list(name: str, got: Any, what: str) -> None:
    if got is None:
        raise GradingError(name, f"{what} returned None. Did you forget the `return`?")
    if isinstance(got, torch.Tensor):
        raise GradingError(name, f"{what} returned a tensor; return a plain Python list of ints.")
    if not isinstance(got, list):
        kind = type(got).__name__
        raise GradingError(name, f"{what} should return a list of ints, got {kind}: {describe(got)}")
    for position, item in enumerate(got):
        if not _is_int(item):
            kind = type(item).__name__
            raise GradingError(name, f"{what} should return a list of ints, but item {position} is {kind}: {item!r}")


def _expect_type(name: str, got: Any, kind: type, what: str, shape: str) -> None:
    if got is None:
        raise GradingError(name, f"{what} returned None. Did you forget the `return`?")
    if not isinstance(got, kind):
        raise GradingError(name, f"{what} should return {shape}, got {type(got).__name__}: {describe(got)}")


def _list_difference(got: list, expected: list) -> str:
    for position, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            return f" First difference at position {position}: expected {b!r}, got {a!r}."
    return f" Expected {len(expected)} items, got {len(got)}."


def _diagnose(name: str, what: str, got: Any, expected: Any, variants: list[Variant]) -> None:
    """Raise a GradingError naming the first wrong variant whose output equals `got`, else a generic one."""
    for compute, mistake in variants:
        try:
            value = compute()
        except Exception:  # a variant that cannot run on this input cannot be the learner's mistake
            continue
        if value != expected and value == got:
            raise GradingError(name, f"{what} returned {describe(got)}: {mistake}")
    detail = _list_difference(got, expected) if isinstance(got, list) and isinstance(expected, list) else ""
    raise GradingError(name, f"{what}: expected {describe(expected)}, got {describe(got)}.{detail}")


def _capture(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap `fn` so that an exception it raises is returned (to check that it raises the right one)."""

    def captured(*args: Any) -> Any:
        try:
            fn(*args)
        except NotImplementedError:
            raise  # call_answer reports it as "not written yet"
        except Exception as exc:
            return exc
        return None

    return captured


def _merges_of(spec: Any) -> dict[tuple[int, int], int]:
    """A case's merges: a dict as it is, or `(training_text, vocab_size)` trained with the reference."""
    if isinstance(spec, dict):
        return dict(spec)
    text, vocab_size = spec
    return ref.train_bpe(text, vocab_size)


def _count(pairs: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    return counts


# ----------------------------------------------------------------------------------------------
# Exercise 1: SimpleTokenizer

_TRAINING = 'It was the best of times, it was the worst of times. "Is it?" she asked -- and laughed (twice).'
_TOKENIZER_CASES = [
    (_TRAINING, "It was the best of times."),
    (_TRAINING, '"Is it the age of wisdom?" she asked, and laughed.'),
    (_TRAINING, "it was -- the worst(twice) of   times!"),
    (
        {",": 0, "<|unk|>": 7, "hello": 3, "world": 5, "!": 2, "<|endoftext|>": 9},
        "hello, big world! <|endoftext|>",
    ),
]


def _word_encode(vocab: dict[str, int], text: str, *, strip=True, drop_empty=True, drop_unknown=False, split=None):
    """Wrong (and right) versions of `SimpleTokenizer.encode`, for the diagnosis."""
    items = split(text) if split else re.split(ref.SPLIT_PATTERN, text)
    items = [item.strip() if strip else item for item in items]
    items = [item for item in items if item or not drop_empty]
    if drop_unknown:
        return [vocab[item] for item in items if item in vocab]
    return [vocab.get(item, vocab[ref.UNK_TOKEN]) for item in items]


def check_SimpleTokenizer(answer: Any, cases: list | None = None) -> Passed:
    """Check `SimpleTokenizer(vocab)`: `encode`, then `decode`, on each case.

    A case is `(vocab_or_training_text, text)`: a dict vocabulary (with "<|unk|>"), or a training text whose
    vocabulary `course_lib.tokenization.build_vocab` builds. `text` is encoded; the expected ids are decoded.
    """
    name = "SimpleTokenizer"
    check_definition(name, answer)
    checks = 0
    for tag, (source, text) in tagged_cases(cases, _TOKENIZER_CASES):
        vocab = dict(source) if isinstance(source, dict) else ref.build_vocab(source)
        _tokenizer_case(name, answer, vocab, text, tag)
        checks += 2
    return Passed(name, checks, hidden=cases is not None)


def _tokenizer_case(name: str, answer: Any, vocab: dict[str, int], text: str, tag: str | None) -> None:
    reference = ref.SimpleTokenizer(vocab)
    expected_ids = reference.encode(text)
    expected_text = reference.decode(expected_ids)
    unknown = [word for word in ref.split_words(text) if word not in vocab]

    tokenizer = _call(name, answer, dict(vocab), what=f"SimpleTokenizer(vocab of {len(vocab)} tokens)")
    for method in ("encode", "decode"):
        if not callable(getattr(tokenizer, method, None)):
            raise GradingError(name, f"a SimpleTokenizer object has no method `{method}`.")

    what = call_label("SimpleTokenizer(vocab).encode", _short(text), tag)
    try:
        got = _call(name, tokenizer.encode, text, what=what)
    except GradingError as error:
        if error.message.startswith(f"{what} raised KeyError") and unknown:
            raise GradingError(
                name,
                f"{error.message} — unknown words should map to <|unk|>: {unknown[0]!r} is not in the "
                f"vocabulary, so it gets the id of '<|unk|>' ({vocab[ref.UNK_TOKEN]}).",
            ) from None
        raise
    _expect_int_list(name, got, what)
    if got != expected_ids:
        unstripped = "whitespace items became <|unk|>. Strip each item, then drop the empty ones."
        variants: list[Variant] = [
            (
                lambda: _word_encode(vocab, text, drop_unknown=True),
                "unknown words were dropped; unknown words should map to <|unk|> (one id per word).",
            ),
            (lambda: _word_encode(vocab, text, strip=False), unstripped),
            (lambda: _word_encode(vocab, text, strip=False, drop_empty=False), unstripped),
            (
                lambda: _word_encode(vocab, text, drop_empty=False),
                "empty items became <|unk|>. Drop the items that are empty after strip().",
            ),
            (
                lambda: _word_encode(vocab, text, split=str.split),
                "punctuation stayed attached to words. Split with the lesson's regex, which keeps "
                "punctuation, '--' and whitespace as separate items.",
            ),
        ]
        _diagnose(name, what, got, expected_ids, variants)

    what = call_label("SimpleTokenizer(vocab).decode", _short(expected_ids), tag)
    got_text = _call(name, tokenizer.decode, list(expected_ids), what=what)
    _expect_type(name, got_text, str, what, "a str")
    if got_text != expected_text:
        words = [reference.int_to_str[i] for i in expected_ids]
        variants = [
            (
                lambda: " ".join(words),
                "decode left spaces before punctuation. After joining with single spaces, remove them with "
                "re.sub(r'\\s+([,.:;?!\"()\\'])', r'\\1', text).",
            ),
            (lambda: "".join(words), "the words were joined without spaces. Join them with single spaces."),
        ]
        _diagnose(name, what, got_text, expected_text, variants)


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
    name = "get_pair_counts"
    check_definition(name, answer)
    tagged = tagged_cases(cases, _PAIR_COUNT_CASES)
    for tag, ids in tagged:
        _pair_counts_case(name, answer, [int(i) for i in ids], tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _pair_counts_case(name: str, answer: Any, ids: list[int], tag: str | None) -> None:
    expected = ref.get_pair_counts(ids)
    what = call_label("get_pair_counts", _short(ids), tag)
    given = list(ids)
    got = _call(name, answer, given, what=what)
    if given != ids:
        raise GradingError(name, f"{what} changed its input list. Do not modify `ids`.")
    _expect_type(name, got, dict, what, "a dict {(id1, id2): count}")
    for key, value in got.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(_is_int(x) for x in key)):
            raise GradingError(name, f"{what}: keys should be tuples of two ints such as (1, 2), got {key!r}.")
        if not _is_int(value):
            raise GradingError(name, f"{what}: counts should be ints, got {value!r} for the pair {key}.")
    got = dict(got)
    if got == expected and list(got) != list(expected):
        order = "sorted" if list(got) == sorted(expected) else "in another order"
        raise GradingError(
            name,
            f"{what}: the counts are right but the keys are {order}: {_short(list(got))}. The keys should be "
            f"in order of first occurrence: {_short(list(expected))} (a dict keeps the order of insertion).",
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
                lambda: _count(list(zip(ids[::2], ids[1::2], strict=False))),
                "only every other pair was counted (a step of 2). Count the pair starting at every position.",
            ),
            (
                lambda: _count(list(pairwise(ids))[:-1]),
                "the last pair is missing. The pairs start at i in range(len(ids) - 1).",
            ),
        ]
        _diagnose(name, what, got, expected, variants)


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
    name = "merge_pair"
    check_definition(name, answer)
    tagged = tagged_cases(cases, _MERGE_CASES)
    for tag, (ids, pair, new_id) in tagged:
        _merge_case(name, answer, [int(i) for i in ids], tuple(pair), new_id, tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _merge_case(name: str, answer: Any, ids: list[int], pair: tuple[int, int], new_id: int, tag: str | None):
    expected = ref.merge_pair(ids, pair, new_id)
    what = call_label("merge_pair", f"{_short(ids)}, {pair}, {new_id}", tag)
    given = list(ids)
    got = _call(name, answer, given, pair, new_id, what=what)
    if given != ids:
        raise GradingError(
            name,
            f"{what} modified the input list. Build and return a new list: the caller still needs `ids`.",
        )
    _expect_int_list(name, got, what)
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
        _diagnose(name, what, got, expected, variants)


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
        counts = _count(list(pairwise(ids)))
        top = max(counts.values())
        tied = [pair for pair, count in counts.items() if count == top]  # in order of first occurrence
        best = {"first": tied[0], "last": tied[-1], "largest": max(tied), "smallest": min(tied)}[tie]
        ids = ref._merge(ids, best, 256 + offset + step)
        merges[best] = 256 + offset + step
    return merges


def check_train_bpe(answer: Any, cases: list | None = None) -> Passed:
    """Check `train_bpe(text, vocab_size)`.

    A case is `(text, vocab_size)`; with a vocab_size below 256 a ValueError is expected.
    """
    name = "train_bpe"
    check_definition(name, answer)
    tagged = tagged_cases(cases, _TRAIN_CASES)
    for tag, (text, vocab_size) in tagged:
        _train_case(name, answer, text, vocab_size, tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _train_case(name: str, answer: Any, text: str, vocab_size: int, tag: str | None) -> None:
    what = call_label("train_bpe", f"{_short(text, 40)}, {vocab_size}", tag)
    if vocab_size < 256:
        raised = _call(name, _capture(answer), text, vocab_size, what=what)
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
    try:
        got = _call(name, answer, text, vocab_size, what=what)
    except GradingError as error:
        if error.message.startswith(f"{what} raised ") and len(expected) < vocab_size - 256:
            raise GradingError(
                name,
                f"{error.message} — on this text the sequence shrinks to a single token after "
                f"{len(expected)} merges: stop early when fewer than 2 tokens are left (no pair to merge).",
            ) from None
        raise
    _expect_type(name, got, dict, what, "a dict {(id1, id2): new_id}")
    for key, value in got.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(_is_int(x) for x in key) and _is_int(value)):
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
        _diagnose(name, what, got, expected, variants)


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
            ids = ref._merge(ids, pair, merges[pair])
        return ids
    while present := [p for p in dict.fromkeys(pairwise(ids)) if p in merges]:
        if rule.startswith("frequency"):
            counts = _count([p for p in pairwise(ids) if p in merges])
            tied = [p for p in present if counts[p] == max(counts.values())]
            pair = tied[0] if rule == "frequency" else min(tied, key=merges.get)
        elif rule == "highest":
            pair = max(present, key=merges.get)
        else:  # "once": the lowest-id merge, a single time
            pair = min(present, key=merges.get)
        ids = ref._merge(ids, pair, merges[pair])
        if rule == "once":
            break
    return ids


def check_bpe_encode(answer: Any, cases: list | None = None) -> Passed:
    """Check `bpe_encode(text, merges)`.

    A case is `(text, merges)`: merges is a dict `{(id1, id2): new_id}` or `(training_text, vocab_size)`,
    which the reference `train_bpe` turns into one.
    """
    name = "bpe_encode"
    check_definition(name, answer)
    tagged = tagged_cases(cases, _ENCODE_CASES)
    for tag, (text, spec) in tagged:
        _encode_case(name, answer, text, _merges_of(spec), tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _encode_case(name: str, answer: Any, text: str, merges: dict, tag: str | None) -> None:
    expected = ref.bpe_encode(text, merges)
    what = call_label("bpe_encode", f"{_short(text, 40)}, merges of {len(merges)} pairs", tag)
    got = _call(name, answer, text, dict(merges), what=what)
    _expect_int_list(name, got, what)
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
        _diagnose(name, what, got, expected, variants)


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
    name = "bpe_decode"
    check_definition(name, answer)
    tagged = tagged_cases(cases, _DECODE_CASES)
    for tag, (ids, spec) in tagged:
        _decode_case(name, answer, [int(i) for i in ids], _merges_of(spec), tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _decode_case(name: str, answer: Any, ids: list[int], merges: dict, tag: str | None) -> None:
    expected = ref.bpe_decode(ids, merges)
    what = call_label("bpe_decode", f"{_short(ids)}, merges of {len(merges)} pairs", tag)
    try:
        got = _call(name, answer, list(ids), dict(merges), what=what)
    except GradingError as error:
        if error.message.startswith(f"{what} raised UnicodeDecodeError"):
            raise GradingError(
                name,
                f"{error.message} — these bytes are not valid utf-8 (a character cut in the middle), and "
                'errors="strict" (the default) refuses them. Decode with errors="replace": invalid bytes '
                "become '\\ufffd'.",
            ) from None
        raise
    if isinstance(got, bytes):
        raise GradingError(name, f"{what} returned bytes; decode them: .decode('utf-8', errors='replace').")
    _expect_type(name, got, str, what, "a str")
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
        _diagnose(name, what, got, expected, variants)


# ----------------------------------------------------------------------------------------------
# Exercise 7: sliding_window_pairs

_WINDOW_CASES = [
    (list(range(10)), 4, 1),
    (list(range(100, 120)), 5, 5),
    ([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], 3, 2),
    (list(range(6)), 5, 1),  # a single window
    ([7, 0, 3, 3, 9, 1, 4, 4, 8, 2, 6, 0, 5], 4, 3),
]


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and torch.equal(a, b)


def check_sliding_window_pairs(answer: Any, cases: list | None = None) -> Passed:
    """Check `sliding_window_pairs(token_ids, context_length, stride)`.

    A case is `(token_ids, context_length, stride)` with `len(token_ids) > context_length`.
    """
    name = "sliding_window_pairs"
    check_definition(name, answer)
    tagged = tagged_cases(cases, _WINDOW_CASES)
    for tag, (ids, length, stride) in tagged:
        _window_case(name, answer, [int(i) for i in ids], length, stride, tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _window_case(name: str, answer: Any, ids: list[int], length: int, stride: int, tag: str | None) -> None:
    expected_x, expected_y = ref.sliding_window_pairs(ids, length, stride)  # (N, L) each
    what = call_label("sliding_window_pairs", f"{_short(ids)}, context_length={length}, stride={stride}", tag)
    last = len(ids) - length
    try:
        got = _call(name, answer, list(ids), length, stride, what=what)
    except GradingError as error:
        if (
            error.message.startswith(f"{what} raised ") and last % stride == 0
        ):  # here range(0, len - L + 1, stride) reaches s = len - L, a window too many
            raise GradingError(
                name,
                f"{error.message} — off-by-one window count? A window starting at s = {last} would have "
                f"only {length - 1} target tokens. The starts are range(0, len(token_ids) - context_length, "
                "stride), not range(0, len(token_ids) - context_length + 1, stride).",
            ) from None
        raise
    if not isinstance(got, tuple | list) or len(got) != 2:
        raise GradingError(name, f"{what} should return a tuple (inputs, targets) of two tensors, got {describe(got)}.")
    for label, value in zip(("inputs", "targets"), got, strict=True):
        if not isinstance(value, torch.Tensor):
            raise GradingError(
                name,
                f"{what}: {label} is a {type(value).__name__}, not a tensor. Return LongTensors, e.g. "
                "torch.tensor(windows, dtype=torch.long), instead of lists: a DataLoader batches tensors.",
            )
        if value.dtype != torch.long:
            raise GradingError(name, f"{what}: {label} has dtype {value.dtype}; token ids must be torch.long.")
        if value.dim() != 2 or value.shape[1] != length:
            raise GradingError(name, f"{what}: {label} should have shape (N, {length}), got {tuple(value.shape)}.")
    got_x, got_y = (value.detach().cpu() for value in got)
    if _same_tensor(got_x, expected_x) and _same_tensor(got_y, expected_y):
        return
    if stride != 1:
        every = torch.tensor([ids[s : s + length] for s in range(last)], dtype=torch.long)  # (len - L, L)
        if _same_tensor(got_x, every):
            raise GradingError(
                name,
                f"{what}: there is a window at every position: the stride was ignored. The windows start "
                "at 0, stride, 2 * stride, ...: range(0, len(token_ids) - context_length, stride).",
            )
    if _same_tensor(got_y, got_x):
        raise GradingError(
            name,
            f"{what}: the targets equal the inputs: targets not shifted by one. The target of the window "
            "at s is token_ids[s + 1 : s + context_length + 1], the next token at every position.",
        )
    if _same_tensor(got_x, expected_y) and _same_tensor(got_y, expected_x):
        raise GradingError(name, f"{what}: inputs and targets are swapped. Return (inputs, targets).")
    rows, target_rows, expected_rows = got_x.shape[0], got_y.shape[0], expected_x.shape[0]
    if rows != expected_rows or target_rows != expected_rows:
        off = "off-by-one window count: " if abs(rows - expected_rows) == 1 else ""
        raise GradingError(
            name,
            f"{what}: {off}got {rows} input and {target_rows} target windows, expected {expected_rows}. The "
            "windows start at s in range(0, len(token_ids) - context_length, stride).",
        )
    starts = range(0, last, stride)
    for label, g, e in (("inputs", got_x, expected_x), ("targets", got_y, expected_y)):
        if not _same_tensor(g, e):
            row = next(i for i in range(e.shape[0]) if not torch.equal(g[i], e[i]))
            raise GradingError(
                name,
                f"{what}: {label} row {row} is {g[row].tolist()}, expected {e[row].tolist()} (the window "
                f"that starts at s = {starts[row]}).",
            )
