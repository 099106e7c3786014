"""Graders of lesson 07 — The original transformer (`EncoderDecoderTransformer`, `shift_right`,
`masked_cross_entropy`, `greedy_step`).

The model is checked in `course_lib.grading.encoder_decoder_model`, re-exported here, so every test cell imports from
this module. The other three exercises take and return plain tensors and ints, so they grade the same way in the
notebook and in the trusted grader's sandbox. The recipe is the course's: the from-scratch guard first, seeded
inputs, expected values from `course_lib.encoder_decoder` computed outside the learner's call, and on a mismatch
each known mistake recomputed on the same input and named when the answer equals it
(`course_lib.grading.kit.diagnose`).

The inputs are built so that the mistakes differ from the right answer and from each other: labels hold
distinct digits and padding, `bos_id` is not always 1, padding is not always 0, and in `greedy_step` some
unfinished sequences produce <eos> while some finished ones would produce a digit.

Shape legend: B batch, T time (target positions), V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import encoder_decoder as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.encoder_decoder_model import check_EncoderDecoderTransformer
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
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor, find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_EncoderDecoderTransformer", "check_shift_right", "check_masked_cross_entropy", "check_greedy_step"]


def _labels(B: int, T: int, pad_id: int, eos_id: int, seed: int) -> Tensor:
    """(B, T) labels like the reversal task's: digits (ids 3..12), <eos>, then padding; lengths differ per row."""
    g = core.generator(seed)
    labels = torch.randint(3, 13, (B, T), generator=g)  # (B, T)
    for b in range(B):
        n = T - (b % min(T, 3))  # row 0 fills every position, the others end earlier
        if n < T:
            labels[b, n - 1] = eos_id
            labels[b, n:] = pad_id
    return labels


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: shift_right
# ------------------------------------------------------------------------------------------------------------

# (B, T, bos_id, seed)
_SHIFT_CASES: list = [(2, 5, 1, 0), (3, 4, 7, 1), (1, 1, 1, 2)]


def _shift_variants(labels: Tensor, bos_id: int) -> list[Variant]:
    B, T = labels.shape
    bos = torch.full((B, 1), bos_id, dtype=labels.dtype)
    return [
        (
            lambda: torch.cat([labels[:, 1:], bos], dim=1),
            "<bos> was appended at the end and the labels moved left. Teacher forcing shifts them the other "
            "way: <bos> first, then labels[:, :-1], so that position t sees only the labels before t.",
        ),
        (
            lambda: torch.cat([labels, bos], dim=1),
            "<bos> was appended at the end. It goes first: torch.cat([bos, labels[:, :-1]], dim=1).",
        ),
        (
            lambda: torch.cat([bos, labels], dim=1),
            "the last label was not dropped: <bos> + all T labels gives T + 1 positions. The decoder's input "
            "has as many positions as the labels: drop the last one, labels[:, :-1].",
        ),
        (
            lambda: torch.cat([bos, labels[:, 1:]], dim=1),
            "<bos> overwrote the first label instead of shifting the labels right: position t must hold "
            "label t - 1 (torch.cat([bos, labels[:, :-1]], dim=1)).",
        ),
        (
            lambda: torch.roll(labels, 1, dims=1),
            "torch.roll wraps the last label around to position 0; position 0 must hold <bos> (bos_id).",
        ),
        (
            lambda: torch.cat([torch.full((1, T), bos_id, dtype=labels.dtype), labels[:-1]], dim=0),
            "the labels were shifted along the batch dimension (dim 0). Shift along time, dim=1.",
        ),
        (
            lambda: torch.cat([torch.ones_like(bos), labels[:, :-1]], dim=1),
            "position 0 holds 1, not bos_id: use the `bos_id` argument.",
        ),
        (
            lambda: labels,
            "the labels came back unshifted. The decoder's input is <bos> followed by labels[:, :-1].",
        ),
    ]


@keeps_rng
def check_shift_right(answer: Any, cases: list | None = None) -> Passed:
    """Check `shift_right(labels, bos_id)`: (B, T) -> (B, T), <bos> first, last label dropped, input unchanged.

    A case is `(B, T, bos_id, seed)`.
    """
    name = Graded(ref.shift_right)
    check_definition(answer, name)
    run = tagged_cases(cases, _SHIFT_CASES)
    for tag, (B, T, bos_id, seed) in run:
        labels = _labels(B, T, pad_id=0, eos_id=2, seed=seed)
        expected = ref.shift_right(labels, bos_id)
        shown = f"labels {describe(labels)}, bos_id={bos_id}"
        what = call_label(name, shown, tag)
        given = labels.clone()
        got = call_without_grad(name, answer, given, bos_id, what=what)
        expect_unchanged(name, {"labels": (given, labels)}, what)
        if not isinstance(got, Tensor):
            raise GradingError(name, f"{what} should return a tensor of shape {(B, T)}, got {describe(got)}.")
        if got.dtype.is_floating_point or got.dtype == torch.bool:
            raise GradingError(
                name, f"{what} returned dtype {got.dtype}; token ids are integers (torch.long, like the labels)."
            )
        diagnose_tensor(name, what, got, expected, _shift_variants(labels, bos_id))
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: masked_cross_entropy
# ------------------------------------------------------------------------------------------------------------

# (B, T, V, pad_id, seed)
_LOSS_CASES: list = [(2, 4, 5, 0, 0), (3, 5, 13, 0, 1), (4, 3, 6, 2, 2)]


def _per_token(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy of every position, padding included: (B, T)."""
    B, T, V = logits.shape
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="none").reshape(B, T)


def _loss_variants(logits: Tensor, targets: Tensor, pad_id: int) -> list[Variant]:
    B, T, V = logits.shape
    real = (targets != pad_id).double()  # (B, T)
    every = _per_token(logits.double(), targets)  # (B, T)
    flat_logits, flat_targets = logits.double().reshape(-1, V), targets.reshape(-1)
    return [
        (
            lambda: every.mean(),
            "padding was counted in the loss: the mean runs over every position. Average only over the real "
            "tokens: F.cross_entropy(..., ignore_index=pad_id), or mask the per-token losses and divide by the "
            "number of real tokens.",
        ),
        (
            lambda: (every * real).sum() / every.numel(),
            "the padded positions were zeroed but still counted in the denominator: divide by the number of "
            "real tokens, (targets != pad_id).sum(), not by B * T.",
        ),
        (
            lambda: (every * real).sum(),
            "the losses of the real tokens were summed, not averaged: divide by their number.",
        ),
        (
            lambda: ((every * real).sum(1) / real.sum(1)).mean(),
            "each sequence was averaged first, then the sequences: short sequences then weigh as much as long "
            "ones. Average over all real tokens at once.",
        ),
        (
            lambda: F.cross_entropy(flat_logits.softmax(-1), flat_targets, ignore_index=pad_id),
            "softmax was applied before F.cross_entropy, which applies log-softmax itself: pass the raw logits.",
        ),
        (
            lambda: F.nll_loss(flat_logits, flat_targets, ignore_index=pad_id),
            "the logits went into nll_loss without log_softmax: nll_loss expects log-probabilities. Use "
            "F.cross_entropy on the logits, or F.log_softmax(logits, dim=-1) first.",
        ),
        (
            lambda: F.cross_entropy(flat_logits, flat_targets, ignore_index=0),
            "padding was taken to be id 0; this call's pad_id is another id. Use the `pad_id` argument.",
        ),
        (
            lambda: (
                -(torch.log_softmax(logits.double(), dim=1).gather(-1, targets[..., None]).squeeze(-1) * real).sum()
                / real.sum()
            ),
            "the log-softmax ran over the wrong dimension (dim=1, time). Normalise over the vocabulary, the last "
            "dimension.",
        ),
    ]


@keeps_rng
def check_masked_cross_entropy(answer: Any, cases: list | None = None) -> Passed:
    """Check `masked_cross_entropy(logits, targets, pad_id)`: the mean cross-entropy over non-padding targets.

    A case is `(B, T, V, pad_id, seed)`; the targets have padding at the end of some rows.
    """
    name = Graded(ref.masked_cross_entropy)
    check_definition(answer, name)
    run = tagged_cases(cases, _LOSS_CASES)
    for tag, (B, T, V, pad_id, seed) in run:
        logits = core.random_tensor(B, T, V, seed=seed, scale=2.0)  # (B, T, V)
        targets = torch.randint(0, V, (B, T), generator=core.generator(seed + 100))  # (B, T)
        targets[targets == pad_id] = (pad_id + 1) % V  # padding only where we put it:
        for b in range(1, B):
            targets[b, T - min(b, T - 1) :] = pad_id  # rows 1.. end with 1, 2, ... padded positions
        expected = ref.masked_cross_entropy(logits, targets, pad_id)
        shown = f"logits of shape {(B, T, V)}, targets {describe(targets)}, pad_id={pad_id}"
        what = call_label(name, shown, tag)
        given_logits, given_targets = logits.clone(), targets.clone()
        got = call_without_grad(name, answer, given_logits, given_targets, pad_id, what=what)
        expect_unchanged(name, {"logits": (given_logits, logits), "targets": (given_targets, targets)}, what)
        if isinstance(got, float | int):
            raise GradingError(
                name,
                f"{what} returned a Python number ({got!r}); return the loss as a tensor — .item() or float() "
                "cut it off from autograd, and loss.backward() would have nothing to work with.",
            )
        if not isinstance(got, Tensor):
            raise GradingError(name, f"{what} should return a 0-dim tensor, got {describe(got)}.")
        if got.numel() != 1:
            raise GradingError(
                name,
                f"{what} returned a tensor of shape {tuple(got.shape)}; the loss is one number (a 0-dim tensor): "
                "the mean over the real target tokens.",
            )
        diagnose_tensor(
            name, what, got.reshape(()).double(), expected.double(), _loss_variants(logits, targets, pad_id)
        )
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: greedy_step
# ------------------------------------------------------------------------------------------------------------

# (B, T, V, eos_id, pad_id, seed)
_STEP_CASES: list = [(4, 3, 7, 2, 0, 0), (6, 1, 13, 2, 0, 1), (5, 4, 9, 1, 3, 2)]


def _step_inputs(B: int, T: int, V: int, eos_id: int, pad_id: int, seed: int) -> tuple[Tensor, Tensor]:
    """Logits (B, T, V) whose last-position argmax is <eos> for rows 1 and 2 (mod 4), a digit otherwise; finished
    (B,) True for rows 2 and 3 (mod 4): every combination of finished / <eos> appears once per 4 rows."""
    logits = core.random_tensor(B, T, V, seed=seed)  # (B, T, V)
    special = {eos_id, pad_id}
    ordinary = [v for v in range(V) if v not in special]
    for b in range(B):
        top = eos_id if b % 4 in (1, 2) else ordinary[(b + seed) % len(ordinary)]
        logits[b, -1, top] = logits[b, -1].max() + 1.0 + 0.1 * b  # the last position's argmax
        if T > 1:  # the first position's argmax is another token
            logits[b, 0, ordinary[(b + seed + 1) % len(ordinary)]] = logits[b, 0].max() + 2.0
    finished = torch.tensor([b % 4 in (2, 3) for b in range(B)])  # (B,)
    return logits, finished


def _step_variants(logits: Tensor, finished: Tensor, eos_id: int, pad_id: int) -> list[Variant]:
    """Each mistake alone: the rest of the step is done right."""

    def rest_right(ids: Tensor) -> tuple[Tensor, Tensor]:
        ids = torch.where(finished, torch.full_like(ids, pad_id), ids)
        return ids, finished | (ids == eos_id)

    last = logits[:, -1].argmax(-1)  # (B,)
    right = rest_right(last)[0]
    return [
        (
            lambda: rest_right(logits[:, 0].argmax(-1)),
            "the next token was read from the first position's logits. The decoder's last position (-1) "
            "predicts what comes next: logits[:, -1, :].argmax(dim=-1).",
        ),
        (
            lambda: rest_right(logits.argmax(dim=1)[:, -1]),
            "the argmax ran over the time dimension (dim=1); the next token is the argmax over the vocabulary, "
            "the last dimension, at the last position.",
        ),
        (
            lambda: (last, finished | (last == eos_id)),
            "<eos> does not stop a sequence: a sequence that has already finished must get pad_id, "
            "torch.where(finished, pad_id, next_ids).",
        ),
        (
            lambda: (torch.where(finished, torch.full_like(last, eos_id), last), finished | (last == eos_id)),
            "after its <eos> a sequence gets eos_id again; it must get pad_id.",
        ),
        (
            lambda: (right, finished),
            "`finished` was not updated: a sequence whose new token is <eos> is finished from now on, "
            "finished | (next_ids == eos_id).",
        ),
        (
            lambda: (right, right == eos_id),
            "`finished` was recomputed from the new tokens alone, so sequences that had finished earlier (and "
            "now get padding) count as unfinished again. Keep them: finished | (next_ids == eos_id).",
        ),
    ]


def _pair(name: str, got: Any, B: int, what: str) -> tuple[Tensor, Tensor]:
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise GradingError(name, f"{what} should return a pair (next_ids, finished), got {describe(got)}.")
    next_ids, finished = got
    for label, value in (("next_ids", next_ids), ("finished", finished)):
        if not isinstance(value, Tensor):
            raise GradingError(name, f"{what}: {label} should be a tensor of shape ({B},), got {describe(value)}.")
    if tuple(next_ids.shape) == (B, 1):
        raise GradingError(
            name, f"{what}: next_ids has shape {(B, 1)}; return one id per sequence, shape ({B},) (no keepdim)."
        )
    if next_ids.dtype.is_floating_point or next_ids.dtype == torch.bool:
        raise GradingError(name, f"{what}: next_ids has dtype {next_ids.dtype}; token ids are integers.")
    if finished.dtype != torch.bool:
        raise GradingError(name, f"{what}: finished has dtype {finished.dtype}; keep it a bool tensor.")
    return next_ids, finished


@keeps_rng
def check_greedy_step(answer: Any, cases: list | None = None) -> Passed:
    """Check `greedy_step(logits, finished, eos_id, pad_id) -> (next_ids, finished)`.

    A case is `(B, T, V, eos_id, pad_id, seed)`; with B >= 4 every combination of "already finished" and "the
    new token is <eos>" appears.
    """
    name = Graded(ref.greedy_step)
    check_definition(answer, name)
    run = tagged_cases(cases, _STEP_CASES)
    for tag, case in run:
        _step_case(name, answer, *case, tag)
    return Passed(name, len(run), hidden=cases is not None)


def _step_case(name: str, answer: Any, B: int, T: int, V: int, eos_id: int, pad_id: int, seed: int, tag) -> None:
    logits, finished = _step_inputs(B, T, V, eos_id, pad_id, seed)
    expected = ref.greedy_step(logits, finished, eos_id, pad_id)
    shown = f"logits of shape {(B, T, V)}, finished={finished.tolist()}, eos_id={eos_id}, pad_id={pad_id}"
    what = call_label(name, shown, tag)
    given_logits, given_finished = logits.clone(), finished.clone()
    got = call_without_grad(name, answer, given_logits, given_finished, eos_id, pad_id, what=what)
    expect_unchanged(name, {"logits": (given_logits, logits)}, what)
    if not torch.equal(given_finished, finished):
        raise GradingError(
            name,
            f"{what} changed `finished` in place (|= or [...] =). The caller may still need the old value: "
            "return a new tensor, finished | (next_ids == eos_id).",
        )
    pair = _pair(name, got, B, what)
    if _same_pair(pair, expected):
        return
    mistake = find_mistake(
        _step_variants(logits, finished, eos_id, pad_id),
        lambda value: _same_pair(pair, value),
        lambda value: _same_pair(value, expected),
    )
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    for label, g, e in zip(("next_ids", "finished"), pair, expected, strict=True):
        if g.shape != e.shape or not torch.equal(g.long(), e.long()):
            values = f": expected {e.tolist()}, got {g.tolist()}" if tag is None else ""
            raise GradingError(name, f"{what}: {label} is wrong{values}.")


def _same_pair(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor]) -> bool:
    return all(x.shape == y.shape and torch.equal(x.long(), y.long()) for x, y in zip(a, b, strict=True))
