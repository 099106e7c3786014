"""Graders of lesson 10 — GPT-2 (`gpt2_parameter_count`, `load_gpt2_weights`, `cosine_lr`, `top_p_filter`,
`attend_with_cache`, `forward_with_cache`).

The counting and schedule exercises are checked here; the weight loading in `course_lib.grading.gpt2_weights`,
the generation exercises (top-p, one attention step with the KV cache) in `course_lib.grading.gpt2_generation` and
the model's cached forward pass in `course_lib.grading.gpt2_cache`, re-exported, so every test cell imports from
this module. Each reference is taken from where it is defined, as the manifest names it:
`course_lib.gpt2` (the lesson's `ref`) for the count and the KV cache, `course_lib.gpt2_weights` for the loading,
`course_lib.train` for the schedule, `course_lib.generate` for top-p. The recipe is the
course's: the from-scratch guard first, expected values from the reference computed outside the learner's call,
and on a mismatch each known mistake recomputed and named when it matches.

`gpt2_parameter_count` is a formula, so each mistake is the formula with one piece changed: the tied head
counted twice, biases, LayerNorms, the final LayerNorm or the position table left out, a narrow feed-forward
layer, per-head projections. `cosine_lr` is compared step by step over warm-up, decay and beyond max_steps;
its mistakes are the warm-up off by one, no floor at min_lr, a wrong decay ratio, a decay to 0.

Shape legend: L layers, H heads, C d_model, V vocabulary, Tctx context length.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

from torch import Tensor

from course_lib import gpt2 as ref
from course_lib import train as training
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.gpt2_cache import check_forward_with_cache
from course_lib.grading.gpt2_generation import check_attend_with_cache, check_top_p_filter
from course_lib.grading.gpt2_weights import check_load_gpt2_weights
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, is_int, tagged_cases
from course_lib.grading.kit.diagnose import find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = [
    "check_gpt2_parameter_count",
    "check_load_gpt2_weights",
    "check_cosine_lr",
    "check_top_p_filter",
    "check_attend_with_cache",
    "check_forward_with_cache",
]


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: gpt2_parameter_count
# ------------------------------------------------------------------------------------------------------------

# (n_layers, n_heads, d_model, vocab_size, context_length, tied); tied None: call without it (the default, True)
_COUNT_CASES: list = [
    (12, 12, 768, 50257, 1024, None),
    (2, 2, 16, 97, 32, True),
    (3, 4, 24, 50, 16, False),
    (1, 2, 8, 11, 5, True),
]


def _count(L: int, H: int, C: int, V: int, Tctx: int, tied: bool, **change: bool) -> int:
    """GPT-2's parameter count from its sizes, optionally with one known mistake (`change`) made."""
    ln = C if change.get("ln_no_bias") else 2 * C  # one LayerNorm: weight and bias
    bias = 0 if change.get("no_biases") else 1
    hidden = C if change.get("narrow_mlp") else 4 * C
    qkv_out = C // H if change.get("per_head_qkv") else C  # q, k, v each project C -> C (all heads together)
    attention = 3 * C * qkv_out + 3 * qkv_out * bias + (0 if change.get("no_out_proj") else C * C + C * bias)
    if change.get("times_heads"):
        attention *= H
    mlp = C * hidden + hidden * bias + hidden * C + C * bias
    block = (0 if change.get("no_block_ln") else 2 * ln) + attention + mlp
    embeddings = V * C + (0 if change.get("no_positions") else Tctx * C)
    final_ln = 0 if change.get("no_final_ln") else ln
    head = V * C if (not tied or change.get("head_twice")) and not change.get("untied_ignored") else 0
    return embeddings + L * block + final_ln + head + (V if change.get("head_bias") else 0)


_COUNT_MISTAKES = [
    (
        "head_twice",
        "the output head was counted although it is tied to the token embedding: with tied=True the head *is* "
        "the (vocab_size, d_model) token table, so it counts once.",
    ),
    (
        "untied_ignored",
        "with tied=False the head has a vocab_size × d_model matrix of its own: add vocab_size * d_model.",
    ),
    ("head_bias", "the output head has no bias (nn.Linear(d_model, vocab_size, bias=False)): drop the + vocab_size."),
    (
        "no_biases",
        "the biases of the four linear layers are missing (9·d_model per block: qkv 3·C, out_proj C, fc1 4·C, fc2 C).",
    ),
    ("no_block_ln", "the two LayerNorms of each block are missing (a weight and a bias each: 4·d_model per block)."),
    ("ln_no_bias", "a LayerNorm has a weight *and* a bias: 2·d_model parameters, not d_model."),
    ("no_final_ln", "the final LayerNorm ln_f (2·d_model parameters, after the last block) is missing."),
    ("no_positions", "the learned position table (context_length × d_model) is missing: GPT-2 learns its positions."),
    (
        "narrow_mlp",
        "the feed-forward layer is d_model → 4·d_model → d_model; the count used a hidden width of d_model.",
    ),
    (
        "per_head_qkv",
        "q, k and v were counted for one head (d_model → d_model / n_heads); together the heads project d_model → "
        "d_model each: 3·C² + 3·C.",
    ),
    (
        "times_heads",
        "the attention was counted once per head; the heads share the d_model channels, so n_heads does "
        "not change the count.",
    ),  # fmt: skip
    ("no_out_proj", "the attention's output projection out_proj (d_model² + d_model) is missing."),
]


def _count_mistake(case: tuple, got: int, expected: int) -> str | None:
    L, H, C, V, Tctx, tied = case
    variants = [
        (lambda key=key: _count(L, H, C, V, Tctx, tied is not False, **{key: True}), m) for key, m in _COUNT_MISTAKES
    ]
    return find_mistake(variants, lambda value: value == got, lambda value: value == expected)


@keeps_rng
def check_gpt2_parameter_count(answer: Any, cases: list | None = None) -> Passed:
    """Check `gpt2_parameter_count(n_layers, n_heads, d_model, vocab_size, context_length, tied=True) -> int`.

    A case is `(n_layers, n_heads, d_model, vocab_size, context_length, tied)`; tied None calls without it.
    """
    name = Graded(ref.gpt2_parameter_count)
    check_definition(answer, name)
    run = tagged_cases(cases, _COUNT_CASES)
    for tag, case in run:
        L, H, C, V, Tctx, tied = case
        expected = ref.gpt2_parameter_count(L, H, C, V, Tctx, tied=tied is not False)
        options = {} if tied is None else {"tied": tied}
        shown = ", ".join(str(n) for n in (L, H, C, V, Tctx)) + ("" if tied is None else f", tied={tied}")
        what = call_label(name, shown, tag)
        got = call_without_grad(name, answer, L, H, C, V, Tctx, what=what, **options)
        if isinstance(got, Tensor) or not is_int(got):
            if isinstance(got, float) and got == expected:
                raise GradingError(name, f"{what} returned the float {got!r}; return an int (use // or int()).")
            raise GradingError(name, f"{what} should return an int, got {type(got).__name__}: {describe(got)}.")
        if got == expected:
            continue
        mistake = _count_mistake(case, got, expected)
        shown = f" returned {got:,}, expected {expected:,}" if tag is None else " returned a wrong count"
        hint = mistake or (
            "count the token and position tables, per block ln1, qkv, out_proj, ln2, fc1, fc2 (weights and "
            "biases), the final LayerNorm, and the head only when it is not tied."
        )
        raise GradingError(name, f"{what}{shown}: {hint}")
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: cosine_lr
# ------------------------------------------------------------------------------------------------------------

# (max_lr, min_lr, warmup_steps, max_steps)
_LR_CASES: list = [(6e-4, 6e-5, 10, 50), (1.0, 0.1, 4, 20), (3e-3, 0.0, 1, 8)]
_REFUSED = [(1.0, 0.1, 5, 5), (1.0, 0.1, 7, 5)]  # warmup_steps >= max_steps: ValueError


def _steps(warmup: int, max_steps: int) -> list[int]:
    """Every step up to a few past max_steps for short schedules; the telling ones for long ones."""
    if max_steps <= 80:
        return list(range(max_steps + 4))
    around = [0, 1, warmup - 1, warmup, warmup + 1, (warmup + max_steps) // 2, max_steps - 1, max_steps]
    return sorted({s for s in around if s >= 0} | {max_steps + 1, max_steps + 100})


def _lr(step: int, hi: float, lo: float, w: int, n: int, mistake: str | None = None) -> float:
    """The schedule with one known mistake made (None: the contract's)."""
    if mistake == "warmup_from_zero" and step < w:
        return hi * step / w
    if mistake == "warmup_plus_one" and step < w:
        return hi * (step + 1) / (w + 1)
    if mistake == "warmup_too_long" and step <= w and w > 0:
        return hi * (step + 1) / w
    if mistake not in ("no_warmup",) and step < w:
        return hi * (step + 1) / w
    if step > n and mistake not in ("no_floor",):
        return 0.0 if mistake == "zero_after" else lo
    r = (step - w) / (n - w)
    if mistake == "ratio_over_max_steps":
        r = step / n
    elif mistake == "ratio_minus_warmup_over_max":
        r = (step - w) / n
    angle = r if mistake == "no_pi" else math.pi * r
    low = 0.0 if mistake == "decay_to_zero" else lo
    factor = math.cos(angle) if mistake == "no_half" else 0.5 * (1.0 + math.cos(angle))
    return low + factor * (hi - low)


_LR_MISTAKES = [
    (
        "warmup_from_zero",
        "warm-up off by one: step 0 got a learning rate of 0. Use max_lr * (step + 1) / warmup_steps, so the "
        "first step already learns and step warmup_steps - 1 reaches max_lr.",
    ),
    ("warmup_plus_one", "the warm-up divides by warmup_steps + 1: it is max_lr * (step + 1) / warmup_steps."),
    (
        "warmup_too_long",
        "the warm-up lasts one step too long (step <= warmup_steps): at step warmup_steps the decay starts, "
        "with max_lr (use step < warmup_steps).",
    ),
    ("no_warmup", "there is no warm-up: while step < warmup_steps the rate rises linearly to max_lr."),
    (
        "no_floor",
        "after max_steps the rate must stay at min_lr; the cosine, continued past max_steps, rises again.",
    ),
    ("zero_after", "after max_steps the rate is min_lr, not 0."),
    (
        "ratio_over_max_steps",
        "the decay ratio is r = (step - warmup_steps) / (max_steps - warmup_steps): 0 when warm-up ends, 1 at "
        "max_steps. step / max_steps starts the cosine too late.",
    ),
    (
        "ratio_minus_warmup_over_max",
        "the decay ratio divides by the decay's length, max_steps - warmup_steps, not by max_steps: "
        "r = (step - warmup_steps) / (max_steps - warmup_steps).",
    ),
    ("decay_to_zero", "the decay ends at 0, not at min_lr: min_lr + 0.5 * (1 + cos(pi * r)) * (max_lr - min_lr)."),
    ("no_half", "the factor is 0.5 * (1 + cos(pi * r)), which falls from 1 to 0; cos(pi * r) alone goes to -1."),
    ("no_pi", "the cosine needs pi: cos(pi * r) covers half a period as r goes from 0 to 1."),
]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _lr_mistake(case: tuple, steps: list[int], got: list[float], expected: list[float]) -> str | None:
    def variant(key: str):
        return lambda: [_lr(s, *case, mistake=key) for s in steps]

    same = lambda a, b: all(_close(x, y) for x, y in zip(a, b, strict=True))  # noqa: E731
    variants = [(variant(key), message) for key, message in _LR_MISTAKES]
    return find_mistake(variants, lambda value: same(got, value), lambda value: same(value, expected))


@keeps_rng
def check_cosine_lr(answer: Any, cases: list | None = None) -> Passed:
    """Check `cosine_lr(step, max_lr, min_lr, warmup_steps, max_steps) -> float` at every step of short
    schedules (and the telling steps of long ones), past max_steps included, and the ValueError when
    warmup_steps >= max_steps. A case is `(max_lr, min_lr, warmup_steps, max_steps)`."""
    name = Graded(training.cosine_lr)
    check_definition(answer, name)
    run = tagged_cases(cases, _LR_CASES)
    for tag, (hi, lo, w, n) in run:
        steps = _steps(w, n)
        expected = [training.cosine_lr(s, hi, lo, w, n) for s in steps]
        got = []
        for s in steps:
            what = call_label(name, f"{s}, {hi}, {lo}, {w}, {n}", tag)
            value = call_without_grad(name, answer, s, hi, lo, w, n, what=what)
            if isinstance(value, Tensor | bool) or not isinstance(value, Real):
                raise GradingError(
                    name, f"{what} should return a float, got {type(value).__name__}: {describe(value)}."
                )
            got.append(float(value))
        bad = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if not _close(g, e)]
        if not bad:
            continue
        mistake = _lr_mistake((hi, lo, w, n), steps, got, expected)
        first = bad[0]
        what = call_label(name, f"{steps[first]}, {hi}, {lo}, {w}, {n}", tag)
        shown = f" returned {got[first]:.6g}, expected {expected[first]:.6g}" if tag is None else " is wrong"
        hint = mistake or (
            "while step < warmup_steps: max_lr * (step + 1) / warmup_steps; after max_steps: min_lr; otherwise "
            "min_lr + 0.5 * (1 + cos(pi * r)) * (max_lr - min_lr), r = (step - warmup_steps) / (max_steps - "
            "warmup_steps)."
        )
        raise GradingError(name, f"{what}{shown}: {hint}")
    for hi, lo, w, n in _REFUSED:
        what = f"{name}(0, {hi}, {lo}, warmup_steps={w}, max_steps={n})"
        raised = core.call_answer(name, core.catching(answer), 0, hi, lo, w, n, what=what)
        if raised is None or not issubclass(type(raised), ValueError):
            got = "returned without an error" if raised is None else f"raised {type(raised).__name__}: {raised}"
            raise GradingError(
                name,
                f"{what} {got}. The schedule needs warmup_steps < max_steps: raise ValueError naming both "
                "(otherwise the decay ratio divides by 0 or runs backwards).",
            )
    return Passed(name, len(run) + 1, hidden=cases is not None)
