"""Graders of lesson 01 — From text to token ids (one `check_<exercise>` per exercise;
docs/ARCHITECTURE.md, Exercise contract).

This module grades the word tokenizer (`SimpleTokenizer`) and the training windows (`sliding_window_pairs`);
the byte-pair encoding exercises are graded in `course_lib.grading.tokenization_bpe` (training) and
`tokenization_bpe_codec` (encoding, decoding) and re-exported here, so that every
test cell of the lesson imports from `course_lib.grading.tokenization`.

Every check follows the same recipe: `check_definition` first (the from-scratch guard); then, for each case,
the expected value from the reference in `course_lib.tokenization`, computed *outside* the learner's call,
and the learner's answer through `call_answer`. When the two differ, the check computes the output of each
known wrong variant on the same input and, if the learner's output equals one of them, names that mistake;
otherwise it reports the input, the expected value and what came back (`course_lib.grading.kit.diagnose`).

With `cases=None` a check runs its visible cases; a hidden test cell passes its own `cases` (the format is in
each check's docstring) and only those run. Messages about a hidden case call it "hidden case k" instead of
showing its input, so feedback never reveals hidden test text.

Shapes: N windows of L = context_length token ids.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from course_lib import tokenization as ref
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Hint,
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
from course_lib.grading.tokenization_bpe import check_get_pair_counts, check_merge_pair, check_train_bpe
from course_lib.grading.tokenization_bpe_codec import check_bpe_decode, check_bpe_encode

__all__ = [
    "check_SimpleTokenizer",
    "check_bpe_decode",
    "check_bpe_encode",
    "check_get_pair_counts",
    "check_merge_pair",
    "check_sliding_window_pairs",
    "check_train_bpe",
]


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
    name = Graded(ref.SimpleTokenizer)
    check_definition(answer, name)
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

    tokenizer = call_answer(name, answer, dict(vocab), what=f"SimpleTokenizer(vocab of {len(vocab)} tokens)")
    for method in ("encode", "decode"):
        if not callable(getattr(tokenizer, method, None)):
            raise GradingError(name, f"a SimpleTokenizer object has no method `{method}`.")

    what = call_label("SimpleTokenizer(vocab).encode", describe(text, 60), tag)
    hints: list[Hint] = []
    if unknown:
        hints.append(
            (
                lambda message: message.startswith(f"{what} raised KeyError"),
                f"unknown words should map to <|unk|>: {unknown[0]!r} is not in the vocabulary, so it gets the "
                f"id of '<|unk|>' ({vocab[ref.UNK_TOKEN]}).",
            )
        )
    got = call_answer(name, tokenizer.encode, text, what=what, hints=hints)
    expect_int_list(name, got, what)
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
        diagnose_value(name, what, got, expected_ids, variants)

    what = call_label("SimpleTokenizer(vocab).decode", describe(expected_ids, 60), tag)
    got_text = call_answer(name, tokenizer.decode, list(expected_ids), what=what)
    expect_type(name, got_text, str, what, "a str")
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
        diagnose_value(name, what, got_text, expected_text, variants)


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
    name = Graded(ref.sliding_window_pairs)
    check_definition(answer, name)
    tagged = tagged_cases(cases, _WINDOW_CASES)
    for tag, (ids, length, stride) in tagged:
        _window_case(name, answer, [int(i) for i in ids], length, stride, tag)
    return Passed(name, len(tagged), hidden=cases is not None)


def _window_case(name: str, answer: Any, ids: list[int], length: int, stride: int, tag: str | None) -> None:
    expected_x, expected_y = ref.sliding_window_pairs(ids, length, stride)  # (N, L) each
    what = call_label("sliding_window_pairs", f"{describe(ids, 60)}, context_length={length}, stride={stride}", tag)
    last = len(ids) - length
    one_too_many = (
        f"off-by-one window count? A window starting at s = {last} would have only {length - 1} target tokens. "
        "The starts are range(0, len(token_ids) - context_length, stride), not "
        "range(0, len(token_ids) - context_length + 1, stride)."
    )
    # If range(0, len - L + 1, stride) reaches s = len - L here (a window too many), any exception gets the hint.
    hints: list[Hint] = [(lambda message: True, one_too_many)] if last % stride == 0 else []
    got = call_answer(name, answer, list(ids), length, stride, what=what, hints=hints)
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
