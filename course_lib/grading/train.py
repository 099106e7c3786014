"""Graders of lesson 11 — Training GPT-2 on a GPU (`grad_accum_steps`, `estimate_mfu`, `rank_batch`; the fourth,
`training_step`, is graded in `course_lib.grading.train_step` and re-exported here).

The recipe is the course's: the from-scratch guard first, expected values from `course_lib.train` computed
outside the learner's call, and on a mismatch each known mistake recomputed on the same input and named when
the answer equals it. The three answers take and return plain numbers and tensors, so they are graded the same
way in the notebook and through the trusted grader's sandbox.

- `grad_accum_steps`: cases that divide (with and without `world_size`, whose default is 1) and cases that do
  not, which must raise ValueError; a rounded result, a world_size left out of the count or of the divisibility
  test, a float, `a // b * c` are named.
- `estimate_mfu`: sizes and throughputs at which every known wrong formula (2·N or the forward pass alone,
  no attention term, multiply-adds, half the attention term, T² or no T, no heads, the ratio upside down, a
  percentage) gives a different number.
- `rank_batch`: distinct token ids, so every block is recognisable; which block each mistake reads is
  recomputed (rank or world_size or micro_step left out, rows dealt out one by one, targets not shifted ...).

Shape legend: B batch rows (micro_batch_size), T time (seq_len), N tokens in the stream.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import torch
from torch import Tensor

from course_lib import train as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Passed,
    call_label,
    catching,
    describe,
    expect_id_batch_pair,
    expect_unchanged,
    is_int,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, find_mistake
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.train_step import check_training_step

__all__ = ["check_estimate_mfu", "check_grad_accum_steps", "check_rank_batch", "check_training_step"]


def _expected_or_error(fn, *args) -> Any:
    """The reference's value, or the ValueError it raises (an input outside the exact division)."""
    try:
        return fn(*args)
    except ValueError as error:
        return error


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: grad_accum_steps
# ------------------------------------------------------------------------------------------------------------

# (total_batch_tokens, micro_batch_size, seq_len, world_size or None: the call leaves world_size to its default)
_ACCUM_CASES: list = [
    (524288, 16, 1024, None),
    (524288, 16, 1024, 8),
    (40960, 4, 512, 2),
    (524288, 16, 1024, 3),
    (1000, 4, 64, None),
]


def _accum_label(name: str, case: tuple, tag: str | None) -> str:
    total, B, T, W = case
    return call_label(name, f"{total}, {B}, {T}" + ("" if W is None else f", world_size={W}"), tag)


def _accum_variants(total: int, B: int, T: int, W: int) -> list[Variant]:
    return [
        (lambda: total // (B * T), "world_size is left out: every process runs its own micro-batches, so one "
         "micro-step of all processes together holds micro_batch_size * seq_len * world_size tokens."),
        (lambda: total // (B * T) * W, "the count was multiplied by world_size; more processes mean *fewer* "
         "micro-batches each: divide by micro_batch_size * seq_len * world_size."),
        (lambda: total // (B * W), "seq_len is left out: a micro-batch holds micro_batch_size * seq_len tokens."),
        (lambda: total // B * T * W, "operator precedence: `a // b * c * d` is `((a // b) * c) * d`. Put the "
         "product in brackets: total_batch_tokens // (micro_batch_size * seq_len * world_size)."),
    ]  # fmt: skip


def _accum_rounded(what: str, got: Any, total: int, B: int, T: int, W: int) -> str:
    """What to say when the answer returned `got` for a batch that does not divide."""
    per_step = B * T * W
    how = {total // per_step: "rounded down", -(-total // per_step): "rounded up"}
    rounded = how.get(got) if is_int(got) or isinstance(got, float) else None
    told = f"{what} returned {describe(got)}" + (f" ({rounded})" if rounded else "")
    cure = (
        f"{total} tokens are not a whole number of micro-steps of {B} * {T} * {W} = {per_step} tokens, so it must "
        "raise a ValueError: a rounded count would silently train on another batch size than the one asked for."
    )
    if W > 1 and total % (B * T) == 0:
        cure += " Does your divisibility test leave out world_size?"
    return f"{told}; {cure}"


def _accum_mistake(case: tuple[int, int, int, int], got: int, expected: int) -> str | None:
    return find_mistake(_accum_variants(*case), lambda v: v == got, lambda v: v == expected)


@keeps_rng
def check_grad_accum_steps(answer: Any, cases: list | None = None) -> Passed:
    """Check `grad_accum_steps(total_batch_tokens, micro_batch_size, seq_len, world_size=1) -> int`.

    A case is `(total_batch_tokens, micro_batch_size, seq_len, world_size)`; world_size None calls with three
    arguments. Cases that do not divide exactly must raise ValueError.
    """
    name = Graded(ref.grad_accum_steps)
    check_definition(answer, name)
    run = tagged_cases(cases, _ACCUM_CASES)
    for tag, case in run:
        total, B, T, W = case
        args = (total, B, T) if W is None else (total, B, T, W)
        W = W or 1
        expected = _expected_or_error(ref.grad_accum_steps, *args)
        what = _accum_label(name, case, tag)
        hints = [(lambda m: "world_size" in m and "argument" in m, "world_size defaults to 1: `world_size=1`.")]
        if isinstance(expected, ValueError):
            outcome = call_without_grad(name, catching(answer), *args, what=what, hints=hints)
            if isinstance(outcome, ValueError):
                continue
            if isinstance(outcome, Exception):
                raise GradingError(
                    name,
                    f"{what} raised {type(outcome).__name__} ({outcome}); a batch that does not divide exactly "
                    "must raise a ValueError that says why (`raise ValueError(...)`, not `assert`).",
                )
            got = call_without_grad(name, answer, *args, what=what, hints=hints)
            raise GradingError(name, _accum_rounded(what, got, total, B, T, W))
        got = call_without_grad(name, answer, *args, what=what, hints=hints)
        if isinstance(got, float) and got == expected:
            raise GradingError(
                name, f"{what} returned the float {got!r}; a number of micro-batches is an int (use //)."
            )
        if isinstance(got, Tensor) or not is_int(got):
            raise GradingError(name, f"{what} should return an int, got {describe(got)}.")
        if got == expected:
            continue
        mistake = _accum_mistake((total, B, T, W), got, expected)
        shown = f" returned {got}, expected {expected}" if tag is None else " returned a wrong count"
        raise GradingError(
            name,
            f"{what}{shown}: "
            + (mistake or "divide the batch by the tokens of one micro-step of all processes, B * T * world_size."),
        )
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: estimate_mfu
# ------------------------------------------------------------------------------------------------------------

# (n_params, n_layers, n_heads, d_head, seq_len, tokens_per_second, peak_flops)
_MFU_CASES: list = [
    (124_439_808, 12, 12, 64, 1024, 80_000.0, 312e12),  # GPT-2 small on an A100 (bf16)
    (3_300_000, 2, 4, 16, 64, 500.0, 8e10),  # a tiny GPT-2 on one CPU core
    (1_000_000, 4, 8, 32, 256, 25_000.0, 65e12),
]
_MFU_RTOL = 1e-9


def _mfu_variants(N: int, L: int, H: int, D: int, T: int, tps: float, peak: float) -> list[Variant]:
    attention = L * H * D * T

    def mfu(flops_per_token: float) -> float:
        return flops_per_token * tps / peak

    return [
        (lambda: mfu(2 * N + 12 * attention), "2·N counts the forward pass only (2 FLOPs per parameter); training "
         "adds the backward pass, which costs twice the forward: 6·N."),
        (lambda: mfu(2 * N + 4 * attention), "this counts the forward pass only (2·N + 4·L·H·D·T); a training step "
         "also runs the backward pass, twice as costly: 6·N + 12·L·H·D·T."),
        (lambda: mfu(6 * N), "the attention term 12·n_layers·n_heads·d_head·seq_len is missing: the scores q·kᵀ "
         "and the weighted sum of v are matmuls with no parameters, so 6·N does not count them."),
        (lambda: mfu(3 * N + 6 * attention), "these are multiply-adds, not FLOPs: one multiply-add is 2 FLOPs "
         "(and the GPU's peak counts FLOPs), so 6·N + 12·L·H·D·T."),
        (lambda: mfu(6 * N + 6 * attention), "the attention term is half of what it should be: 2 matmuls × 2 FLOPs "
         "per multiply-add × 3 (forward + backward) = 12·L·H·D·T."),
        (lambda: mfu(6 * N + 12 * attention * T), "the attention term has seq_len twice: per token, attention "
         "costs 12·L·H·D·T (a token meets T keys); T² is per sequence."),
        (lambda: mfu(6 * N + 12 * L * D * T), "n_heads is missing from the attention term: the heads together "
         "have n_heads·d_head = d_model channels."),
        (lambda: mfu(6 * N + 12 * L * H * D), "seq_len is missing from the attention term: each token's query "
         "meets seq_len keys, so attention per token grows with T."),
        (lambda: peak / ((6 * N + 12 * attention) * tps), "the ratio is upside down: MFU = achieved FLOP/s / "
         "peak FLOP/s, a fraction below 1."),
        (lambda: 100 * mfu(6 * N + 12 * attention), "this is a percentage; return the fraction (0.42, not 42)."),
    ]  # fmt: skip


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _MFU_RTOL * abs(b)


def _mfu_mistake(case: tuple, got: float, expected: float) -> str | None:
    return find_mistake(_mfu_variants(*case), lambda v: _close(got, v), lambda v: _close(v, expected))


@keeps_rng
def check_estimate_mfu(answer: Any, cases: list | None = None) -> Passed:
    """Check `estimate_mfu(n_params, n_layers, n_heads, d_head, seq_len, tokens_per_second, peak_flops) -> float`.

    A case is those seven numbers; the answer must agree with (6·N + 12·L·H·D·T) · tokens/s / peak to 1e-9.
    """
    name = Graded(ref.estimate_mfu)
    check_definition(answer, name)
    run = tagged_cases(cases, _MFU_CASES)
    for tag, case in run:
        expected = ref.estimate_mfu(*case)
        N, L, H, D, T, tps, peak = case
        shown = f"n_params={N:,}, L={L}, H={H}, D={D}, T={T}, {tps:,.0f} tokens/s, peak {peak:.3g} FLOP/s"
        what = call_label(name, shown, tag)
        got = call_without_grad(name, answer, *case, what=what)
        if isinstance(got, Tensor | bool) or not isinstance(got, Real):
            raise GradingError(name, f"{what} should return a float (a fraction), got {describe(got)}.")
        if _close(got, expected):
            continue
        mistake = _mfu_mistake(case, got, expected)
        told = f" returned {got:.6g}, expected {expected:.6g}" if tag is None else " returned a wrong value"
        cure = (
            mistake or "FLOPs per token = 6·n_params + 12·n_layers·n_heads·d_head·seq_len; times tokens/s, over peak."
        )
        raise GradingError(name, f"{what}{told}: {cure}")
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: rank_batch
# ------------------------------------------------------------------------------------------------------------

# (N tokens, micro_step, batch_size, seq_len, rank, world_size, seed); the last two visible cases must raise
_RANK_CASES: list = [
    (120, 1, 2, 4, 0, 1, 0),
    (200, 2, 2, 4, 1, 2, 1),
    (400, 2, 3, 5, 2, 4, 2),
    (200, 0, 2, 4, 2, 2, 3),  # rank 2 of 2 does not exist
    (32, 1, 2, 4, 1, 2, 4),  # block 3 is tokens 24..31, its last target token 32: one more than there are
]


def _block(tokens: Tensor, start: int, B: int, T: int, shift: int = 0) -> Tensor:
    return tokens[start + shift : start + shift + B * T].reshape(B, T)  # (B, T)


def _rank_variants(tokens: Tensor, s: int, B: int, T: int, r: int, W: int) -> list[Variant]:
    BT = B * T

    def pair(start: int) -> tuple[Tensor, Tensor]:
        return _block(tokens, start, B, T), _block(tokens, start, B, T, 1)

    def dealt() -> tuple[Tensor, Tensor]:  # the rows of one big (W*B, T) batch, dealt out one by one
        first = s * W * BT
        big_x, big_y = _block(tokens, first, W * B, T), _block(tokens, first, W * B, T, 1)
        return big_x[r::W], big_y[r::W]

    x, y = pair((s * W + r) * BT)
    return [
        (lambda: pair(s * W * BT), "every rank reads the same block (rank is left out): the processes would "
         "compute the same gradients, and N GPUs would do the work of one. Rank r starts r * B * T tokens later."),
        (lambda: pair((s + r) * BT), "world_size is left out of the stride: micro-step s + 1 of rank 0 reads what "
         "rank 1 read at micro-step s. All processes together read B * T * world_size tokens per micro-step: the "
         "block is micro_step * world_size + rank."),
        (lambda: pair((s + r) * W * BT), "rank r's block starts r * B * T tokens after the micro-step's first "
         "token, not r * B * T * world_size: the block is micro_step * world_size + rank."),
        (lambda: pair(r * BT), "micro_step is left out: every micro-step would read the same tokens again. Skip "
         "micro_step * world_size blocks of B * T tokens first."),
        (lambda: pair(s * BT + r), "the ranks' starts are one token apart: block b starts at token b * B * T, "
         "with b = micro_step * world_size + rank."),
        (dealt, "the rows of the big batch are dealt out one by one (rank r gets rows r, r + world_size, ...); "
         "the contract gives each rank one contiguous block of B * T tokens."),
        (lambda: (x, x), "y equals x: the targets are the same block moved one token on."),
        (lambda: (x, _block(tokens, (s * W + r) * BT, B, T, 2)), "y is shifted by two tokens; the next token is "
         "one position on."),
        (lambda: (y, x), "x and y are swapped: x is the block, y the block one token on."),
        (lambda: (x.reshape(T, B), y.reshape(T, B)), f"x and y have shape (seq_len, batch_size) = {(T, B)}: "
         "view the block as batch_size rows of seq_len tokens."),
        (lambda: (x.T, y.T), f"x and y are transposed, shape {(T, B)}: each row is seq_len consecutive tokens."),
    ]  # fmt: skip


def _same_pair(a: Any, b: tuple[Tensor, Tensor]) -> bool:
    if not (isinstance(a, tuple | list) and len(a) == 2 and all(isinstance(t, Tensor) for t in a)):
        return False
    return all(g.shape == e.shape and torch.equal(g.long(), e) for g, e in zip(a, b, strict=True))


def _rank_mistake(tokens: Tensor, case: tuple, got: Any, expected: tuple[Tensor, Tensor]) -> str | None:
    variants = _rank_variants(tokens, *case)
    return find_mistake(variants, lambda v: _same_pair(got, v), lambda v: _same_pair(v, expected))


def _expect_value_error(name: str, answer: Any, args: tuple, what: str, why: str) -> None:
    outcome = call_without_grad(name, catching(answer), *args, what=what)
    if isinstance(outcome, ValueError):
        return
    if isinstance(outcome, Exception):
        raise GradingError(name, f"{what} raised {type(outcome).__name__} ({outcome}) instead of a ValueError: {why}")
    raise GradingError(name, f"{what} returned a result instead of raising a ValueError: {why}")


@keeps_rng
def check_rank_batch(answer: Any, cases: list | None = None) -> Passed:
    """Check `rank_batch(tokens, micro_step, batch_size, seq_len, rank=0, world_size=1) -> (x, y)`.

    A case is `(N, micro_step, batch_size, seq_len, rank, world_size, seed)`: N distinct token ids in a seeded
    order. A rank outside 0..world_size-1, or a stream too short for the block and its last target, must raise
    ValueError.
    """
    name = Graded(ref.rank_batch)
    check_definition(answer, name)
    run = tagged_cases(cases, _RANK_CASES)
    for tag, (N, s, B, T, r, W, seed) in run:
        tokens = torch.randperm(N, generator=torch.Generator().manual_seed(seed)) + 1000  # distinct ids
        shown = f"tokens of {N}, micro_step={s}, batch_size={B}, seq_len={T}, rank={r}, world_size={W}"
        what = call_label(name, shown, tag)
        args = (tokens.clone(), s, B, T, r, W)
        if not 0 <= r < W:
            why = f"rank {r} does not exist among world_size = {W} processes (ranks are 0..world_size - 1)."
            _expect_value_error(name, answer, args, what, why)
            continue
        start = (s * W + r) * B * T
        if start + B * T + 1 > N:
            why = (
                f"its block is tokens {start}..{start + B * T - 1} and the last target is token {start + B * T}, "
                f"but there are only {N} tokens; check len(tokens) first and say so."
            )
            _expect_value_error(name, answer, args, what, why)
            continue
        expected = ref.rank_batch(tokens, s, B, T, r, W)
        given = args[0]
        got = call_without_grad(name, answer, *args, what=what)
        expect_unchanged(name, {"tokens": (given, tokens)}, what)
        got = expect_id_batch_pair(name, got, (B, T), what)
        if _same_pair(got, expected):
            continue
        mistake = _rank_mistake(tokens, (s, B, T, r, W), got, expected)
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        for label, g, e in zip("xy", got, expected, strict=True):
            if tuple(g.shape) != tuple(e.shape):
                raise GradingError(name, f"{what}: {label} has shape {tuple(g.shape)}, expected {tuple(e.shape)}.")
        detail = f" Expected x = {expected[0].tolist()}, got {got[0].tolist()}." if tag is None else ""
        raise GradingError(
            name, f"{what}: not this rank's block (block micro_step * world_size + rank of B * T tokens).{detail}"
        )
    return Passed(name, len(run), hidden=cases is not None)
