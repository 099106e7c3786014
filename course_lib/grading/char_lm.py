"""Graders of lesson 09 — A character-level GPT (`build_char_vocab`, `get_batch`, `BigramLanguageModel`,
`sample_next_token`, `GPT`).

The data exercises are checked here; the bigram and sampling exercises in `course_lib.grading.char_lm_sampling`
and the GPT in `course_lib.grading.char_lm_gpt`, re-exported, so every test cell imports from this module. The
recipe is the course's: the from-scratch guard first, seeded inputs, expected values from the references computed
outside the learner's call, and on a mismatch each known mistake recomputed on the same input and named when the
answer equals it.

`get_batch` is checked draw for draw: the learner's call gets a generator seeded like the reference's, so the
right answer returns exactly the reference's windows. The data hold distinct ids, so every window is readable,
and the global random state is seeded differently, so an answer that ignores `generator` is recognised.

Shape legend: B batch, T time (block_size), N length of the data, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib import char_lm as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.char_lm_gpt import check_GPT
from course_lib.grading.char_lm_sampling import check_BigramLanguageModel, check_sample_next_token
from course_lib.grading.kit import core
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Passed,
    call_label,
    describe,
    expect_unchanged,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = [
    "check_build_char_vocab",
    "check_get_batch",
    "check_BigramLanguageModel",
    "check_sample_next_token",
    "check_GPT",
]


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: build_char_vocab
# ------------------------------------------------------------------------------------------------------------

_VOCAB_CASES: list = ["hello world", "To be, or not to be:\nthat is the question.", "zyx ZYX 321 !?"]


def _vocab_variants(text: str) -> list[Variant]:
    def numbered(chars, start=0):
        return {ch: i for i, ch in enumerate(chars, start)}, {i: ch for i, ch in enumerate(chars, start)}

    distinct = sorted(set(text))
    return [
        (
            lambda: numbered(list(dict.fromkeys(text))),
            "the characters are numbered in order of first appearance; the contract numbers them in sorted "
            "order, sorted(set(text)), so the same text always gives the same ids.",
        ),
        (lambda: numbered(distinct[::-1]), "the characters are sorted in reverse; use sorted(set(text))."),
        (lambda: numbered(distinct, 1), "the ids start at 1; they start at 0 (enumerate(chars))."),
        (
            lambda: numbered(sorted(set(text.split()))),
            "the vocabulary holds words (text.split()); a character-level vocabulary holds every distinct "
            "character, spaces and newlines included: sorted(set(text)).",
        ),
        (
            lambda: numbered(sorted(set(text) - {" ", "\n"})),
            "spaces or newlines are missing from the vocabulary; they are characters the model must predict too.",
        ),
        (
            lambda: numbered(sorted(set(text.lower()))),
            "the text was lower-cased first; keep upper and lower case apart (sorted(set(text))).",
        ),
    ]


def _as_itos(itos: Any) -> dict | None:
    """itos as a dict {id: character}; a list (indexed by id) is accepted too."""
    if isinstance(itos, dict):
        return itos
    if isinstance(itos, list):
        return dict(enumerate(itos))
    return None


def _same_vocab(got: tuple[Any, Any], expected: tuple[dict, dict]) -> bool:
    return got[0] == expected[0] and _as_itos(got[1]) == expected[1]


def _vocab_mistake(text: str, got: tuple[Any, Any], expected: tuple[dict, dict]) -> str | None:
    return find_mistake(_vocab_variants(text), lambda value: _same_vocab(got, value), lambda v: v == expected)


@keeps_rng
def check_build_char_vocab(answer: Any, cases: list | None = None) -> Passed:
    """Check `build_char_vocab(text) -> (stoi, itos)`: every distinct character, sorted, ids 0..V-1.

    A case is a text. `itos` may be a dict {id: character} or a list indexed by id.
    """
    name = Graded(ref.build_char_vocab)
    check_definition(answer, name)
    run = tagged_cases(cases, _VOCAB_CASES)
    for tag, text in run:
        expected = ref.build_char_vocab(text)
        what = call_label(name, repr(text) if len(text) <= 40 else f"{text[:37]!r}...", tag)
        got = call_without_grad(name, answer, text, what=what)
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise GradingError(name, f"{what} should return a pair (stoi, itos), got {describe(got)}.")
        stoi, itos = got
        if isinstance(itos, dict) and isinstance(stoi, dict) and (stoi, itos) == expected[::-1]:
            raise GradingError(name, f"{what} returned (itos, stoi): return stoi (character -> id) first.")
        if not isinstance(stoi, dict):
            raise GradingError(name, f"{what}: stoi should be a dict {{character: id}}, got {describe(stoi)}.")
        if _as_itos(itos) is None:
            raise GradingError(name, f"{what}: itos should be a dict {{id: character}}, got {describe(itos)}.")
        if _same_vocab((stoi, itos), expected):
            continue
        mistake = _vocab_mistake(text, (stoi, itos), expected)
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        if stoi != expected[0]:
            shown = f": expected {describe(expected[0])}, got {describe(stoi)}" if tag is None else ""
            raise GradingError(name, f"{what}: stoi is wrong{shown}.")
        raise GradingError(
            name, f"{what}: stoi is right but itos is not its inverse: itos[stoi[ch]] must give ch back."
        )
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: get_batch
# ------------------------------------------------------------------------------------------------------------

# (N, block_size, batch_size, seed)
_BATCH_CASES: list = [(40, 8, 4, 0), (12, 5, 6, 1), (9, 8, 3, 2)]
_GLOBAL_SEED = 1234  # the global RNG's state during the learner's call; not the generator's


_OFF_BY_ONE = (
    "off by one? A start drawn up to len(data) - block_size leaves the last target outside the data: "
    "torch.randint(len(data) - block_size, ...) draws starts 0..N - block_size - 1 (its upper bound is excluded)."
)
_BATCH_HINTS = [
    (lambda message: "out of bounds" in message or "equal size" in message or "same size" in message, _OFF_BY_ONE)
]


def _windows(data: Tensor, starts: Tensor, length: int, shift: int = 0) -> Tensor:
    return torch.stack([data[i + shift : i + shift + length] for i in starts.tolist()])  # (B, length)


def _batch_variants(data: Tensor, block_size: int, batch_size: int, seed: int) -> list[Variant]:
    N, T, B = len(data), block_size, batch_size

    def starts(high: int, use_generator: bool = True) -> Tensor:
        if use_generator:
            return torch.randint(high, (B,), generator=core.generator(seed))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_GLOBAL_SEED)
            return torch.randint(high, (B,))

    ix = starts(N - T)
    x = _windows(data, ix, T)
    return [
        (
            lambda: (_windows(data, starts(N - T - 1), T), _windows(data, starts(N - T - 1), T, 1)),
            "off by one: the starts were drawn from 0..N - block_size - 2, so the last window is never picked. "
            "torch.randint(len(data) - block_size, ...) already excludes its upper bound.",
        ),
        (
            lambda: (_windows(data, starts(N - T + 1), T), _windows(data, starts(N - T + 1), T, 1)),
            "off by one: the starts were drawn from 0..N - block_size, so a window starting at N - block_size "
            "has no target for its last position. Draw from torch.randint(len(data) - block_size, ...).",
        ),
        (lambda: (x, x), "y equals x: the targets are the same windows shifted by one, data[i + 1 : i + T + 1]."),
        (
            lambda: (x, _windows(data, ix, T, 2)),
            "y is shifted by two positions; the next character is one position on: data[i + 1 : i + T + 1].",
        ),
        (
            lambda: (_windows(data, ix, T, 1), x),
            "x and y are swapped: x = data[i : i + T] is the input, y = data[i + 1 : i + T + 1] the target.",
        ),
        (
            lambda: (_windows(data, starts(N - T, False), T), _windows(data, starts(N - T, False), T, 1)),
            "the starts were drawn without the `generator` argument (from the global random state): pass "
            "generator=generator to torch.randint, so that a seeded generator gives the same batches.",
        ),
        (
            lambda: (x.T, _windows(data, ix, T, 1).T),
            f"x and y have shape (block_size, batch_size) = {(T, B)}: stack the windows along dim 0, one row each.",
        ),
    ]


def _second_draw_variant(data: Tensor, block_size: int, batch_size: int, seed: int) -> tuple[Tensor, Tensor]:
    """x from the first draw of the generator, y from a second draw: two different sets of windows."""
    g = core.generator(seed)
    first = torch.randint(len(data) - block_size, (batch_size,), generator=g)
    second = torch.randint(len(data) - block_size, (batch_size,), generator=g)
    return _windows(data, first, block_size), _windows(data, second, block_size, 1)


def _same_batch(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor]) -> bool:
    return all(x.shape == y.shape and torch.equal(x.long(), y.long()) for x, y in zip(a, b, strict=True))


def _batch_mistake(data: Tensor, T: int, B: int, seed: int, got: tuple, expected: tuple) -> str | None:
    variants = [
        *_batch_variants(data, T, B, seed),
        (
            lambda: _second_draw_variant(data, T, B, seed),
            "x and y come from different windows (torch.randint was called twice): draw the starts once and "
            "cut both x and y from them.",
        ),
    ]
    return find_mistake(variants, lambda v: _same_batch(got, v), lambda v: _same_batch(v, expected))


@keeps_rng
def check_get_batch(answer: Any, cases: list | None = None) -> Passed:
    """Check `get_batch(data, block_size, batch_size, generator) -> (x, y)` draw for draw against the reference.

    A case is `(N, block_size, batch_size, seed)`: N distinct ids, and a generator seeded with `seed`.
    """
    name = Graded(ref.get_batch)
    check_definition(answer, name)
    run = tagged_cases(cases, _BATCH_CASES)
    for tag, (N, T, B, seed) in run:
        data = torch.randperm(N, generator=core.generator(seed + 100)) + 3  # distinct ids: windows are readable
        expected = ref.get_batch(data, T, B, core.generator(seed))
        what = call_label(name, f"data of {N} ids, block_size={T}, batch_size={B}, generator", tag)
        given = data.clone()
        torch.manual_seed(_GLOBAL_SEED)
        got = call_without_grad(name, answer, given, T, B, core.generator(seed), what=what, hints=_BATCH_HINTS)
        expect_unchanged(name, {"data": (given, data)}, what)
        pair = core.expect_id_batch_pair(name, got, (B, T), what)
        if _same_batch(pair, expected):
            continue
        mistake = _batch_mistake(data, T, B, seed, pair, expected)
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        for label, g, e in zip("xy", pair, expected, strict=True):
            if tuple(g.shape) != tuple(e.shape):
                raise GradingError(name, f"{what}: {label} has shape {tuple(g.shape)}, expected {tuple(e.shape)}.")
        if tag is None:
            raise GradingError(
                name,
                f"{what}: the windows differ from the contract's. Expected x = {expected[0].tolist()}, "
                f"got {pair[0].tolist()}.",
            )
        raise GradingError(name, f"{what}: the windows differ from the contract's.")
    return Passed(name, len(run), hidden=cases is not None)
