"""Graders of lesson 09's model and sampling exercises (`BigramLanguageModel`, `sample_next_token`), re-exported
by `course_lib.grading.char_lm`, which the test cells import.

`BigramLanguageModel` gets the reference's random table through load_state_dict, then its logits and loss are
compared with the reference's; the known mistakes (the loss over the wrong axis, summed, only the last position,
softmax before cross-entropy, flattened logits) are recomputed and named.

`sample_next_token` is checked draw for draw: the learner's call gets a generator seeded like the reference's, so
a right answer draws exactly the reference's ids. Each case has many rows of fairly flat logits, so that a
mistake (no temperature, temperature multiplied, top-k keeping k - 1 or k + 1, top-k ignored, the argmax, the
global random state) changes some of the draws and is named.

Shape legend: B batch, T time, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import char_lm as ref
from course_lib.grading.attention_common import build_module, call_without_grad, keeps_rng
from course_lib.grading.blocks_layers import expect_state
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

__all__ = ["check_BigramLanguageModel", "check_sample_next_token"]


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: BigramLanguageModel
# ------------------------------------------------------------------------------------------------------------

# (vocab_size, B, T, seed); T never equals V, so a loss over the wrong axis cannot line up by chance
_BIGRAM_CASES: list = [(7, 2, 5, 0), (13, 3, 4, 1), (5, 1, 6, 2)]
_BIGRAM_NAMES = "self.token_embedding_table = nn.Embedding(vocab_size, vocab_size), and nothing else."


def _bigram_loss_variants(logits: Tensor, targets: Tensor) -> list[Variant]:
    B, T, V = logits.shape
    flat, flat_targets = logits.reshape(B * T, V), targets.reshape(B * T)
    return [
        (
            lambda: -F.log_softmax(logits, dim=1).gather(-1, targets[..., None]).mean(),
            "the loss's softmax ran over the wrong axis (dim=1, time). The classes are the last axis: flatten "
            "to logits.view(B*T, V) and targets.view(B*T) for F.cross_entropy.",
        ),
        (
            lambda: F.cross_entropy(flat, targets.T.reshape(B * T)),
            "the targets were flattened in another order than the logits (targets.T): flatten both with "
            "view(B*T, ...) so that row i of the logits meets target i.",
        ),
        (lambda: F.cross_entropy(flat, flat_targets, reduction="sum"), "the loss is a sum; take the mean."),
        (
            lambda: F.cross_entropy(logits[:, -1], targets[:, -1]),
            "the loss uses only the last position; every position predicts its next character and counts.",
        ),
        (
            lambda: F.cross_entropy(flat.softmax(-1), flat_targets),
            "softmax was applied before F.cross_entropy, which applies log-softmax itself: pass the raw logits.",
        ),
        (
            lambda: F.nll_loss(flat, flat_targets),
            "F.nll_loss got raw logits; it expects log-probabilities. Use F.cross_entropy on the logits.",
        ),
    ]


def _pair(name: str, got: Any, what: str) -> tuple[Any, Any]:
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise GradingError(name, f"{what} should return a pair (logits, loss), got {describe(got)}.")
    return got[0], got[1]


@keeps_rng
def check_BigramLanguageModel(answer: Any, cases: list | None = None) -> Passed:
    """Check `BigramLanguageModel(vocab_size)`: its table, forward(idx, targets) -> (logits (B, T, V), mean
    cross-entropy) and forward(idx) -> (logits, None). A case is `(vocab_size, B, T, seed)`."""
    name = Graded(ref.BigramLanguageModel)
    check_definition(answer, name)
    run = tagged_cases(cases, _BIGRAM_CASES)
    for tag, (V, B, T, seed) in run:
        what = call_label(name, str(V), tag)
        module = build_module(name, answer, V, what=what, seed=seed)
        reference = ref.BigramLanguageModel(V)
        expect_state(name, module, reference, what, _BIGRAM_NAMES, "the table maps each of V ids to V logits")
        state = {"token_embedding_table.weight": core.random_tensor(V, V, seed=seed + 50, scale=2.0)}
        reference.load_state_dict(state)
        call_without_grad(name, module.load_state_dict, state, what=f"{what}.load_state_dict(...)")
        g = core.generator(seed + 100)
        idx, targets = torch.randint(V, (B, T), generator=g), torch.randint(V, (B, T), generator=g)
        with torch.no_grad():
            expected_logits, expected_loss = reference(idx, targets)
        call = f"{what} on idx and targets of shape {(B, T)}" if tag is None else f"{what} on its input"
        logits, loss = _pair(name, call_without_grad(name, module, idx.clone(), targets.clone(), what=call), call)
        _check_logits(name, call, logits, expected_logits)
        if not isinstance(loss, Tensor) or loss.numel() != 1:
            raise GradingError(name, f"{call}: the loss should be a 0-dim tensor (one number), got {describe(loss)}.")
        if not torch.allclose(loss.reshape(()).double(), expected_loss.double(), atol=1e-5, rtol=1e-4):
            mistake = _loss_mistake(expected_logits.double(), targets, loss, expected_loss)
            detail = mistake or f"expected {expected_loss.item():.5f}, got {loss.item():.5f}."
            raise GradingError(name, f"{call}: the loss is wrong — {detail}")
        call = f"{what} on idx alone (targets=None)"
        logits, loss = _pair(name, call_without_grad(name, module, idx.clone(), what=call), call)
        _check_logits(name, call, logits, expected_logits)
        if loss is not None:
            raise GradingError(name, f"{call}: without targets the loss must be None, got {describe(loss)}.")
    return Passed(name, len(run), hidden=cases is not None)


def _loss_mistake(logits: Tensor, targets: Tensor, got: Tensor, expected: Tensor) -> str | None:
    def close(a: Tensor, b: Tensor) -> bool:
        return torch.allclose(a.reshape(()).double(), b.reshape(()).double(), atol=1e-5, rtol=1e-4)

    return find_mistake(_bigram_loss_variants(logits, targets), lambda v: close(got, v), lambda v: close(v, expected))


def _check_logits(name: str, call: str, logits: Any, expected: Tensor) -> None:
    B, T, V = expected.shape
    if not isinstance(logits, Tensor):
        raise GradingError(name, f"{call}: logits should be a tensor of shape {(B, T, V)}, got {describe(logits)}.")
    if tuple(logits.shape) == (B * T, V) and B > 1:
        raise GradingError(
            name,
            f"{call}: the logits came back flattened to (B*T, V) = {(B * T, V)}. Return them as (B, T, V) and "
            "flatten only inside the loss computation.",
        )
    if tuple(logits.shape) != (B, T, V):
        raise GradingError(name, f"{call}: logits have shape {tuple(logits.shape)}, expected {(B, T, V)}.")
    if torch.allclose(logits, expected.softmax(-1), atol=1e-5):
        raise GradingError(name, f"{call}: the logits went through softmax; return the table's raw rows.")
    if not torch.allclose(logits, expected, atol=1e-5, rtol=1e-4):
        raise GradingError(
            name, f"{call}: the logits are not the table's rows: logits = self.token_embedding_table(idx)."
        )


# ------------------------------------------------------------------------------------------------------------
# Exercise 4: sample_next_token
# ------------------------------------------------------------------------------------------------------------

# (B, V, temperature, top_k, seed); many rows of flat logits, so that a mistake changes some draw
_SAMPLE_CASES: list = [(64, 10, 1.0, None, 0), (64, 10, 0.5, None, 1), (64, 12, 2.0, 4, 2), (64, 8, 1.0, 3, 3)]
_GLOBAL_SEED = 4321  # the global RNG's state during the learner's call; not the generator's


def _draw(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, seed: int = 0, keep=None) -> Tensor:
    """One draw per row from softmax(logits / temperature), keeping the entries `keep` says (all by default)."""
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]  # (B, 1)
        scaled = scaled.masked_fill(~(keep or (lambda s, k: s >= k))(scaled, kth), float("-inf"))
    return torch.multinomial(F.softmax(scaled, -1), 1, generator=core.generator(seed))  # (B, 1)


def _sample_variants(logits: Tensor, temperature: float, top_k: int | None, seed: int) -> list[Variant]:
    def global_state() -> Tensor:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_GLOBAL_SEED)
            return torch.multinomial(F.softmax(ref_scaled(), -1), 1)

    def ref_scaled() -> Tensor:
        scaled = logits / temperature
        if top_k is None:
            return scaled
        return scaled.masked_fill(scaled < torch.topk(scaled, top_k, dim=-1).values[:, -1:], float("-inf"))

    variants: list[Variant] = [
        (
            lambda: _draw(logits, 1.0, top_k, seed),
            "the temperature was not applied: divide the logits by `temperature` before the softmax.",
        ),
        (
            lambda: _draw(logits * temperature * temperature, temperature, top_k, seed),
            "the logits were multiplied by the temperature; divide them by it (a low temperature sharpens).",
        ),
        (
            lambda: _draw(logits, temperature, None, seed),
            "top_k was ignored: keep only the k largest logits of each row and set the rest to -inf.",
        ),
        (lambda: logits.argmax(-1, keepdim=True), "this is the argmax, not a sample: use torch.multinomial."),
        (
            global_state,
            "the draw did not use the `generator` argument (it came from the global random state): pass "
            "generator=generator to torch.multinomial.",
        ),
    ]
    if top_k is not None:
        variants += [
            (
                lambda: _draw(logits, temperature, top_k, seed, keep=lambda s, k: s > k),
                "top-k keeps only k - 1 tokens: the k-th largest logit must stay (logits < kth become -inf, "
                "not logits <= kth).",
            ),
            (
                lambda: _draw(logits, temperature, top_k + 1, seed),
                "top-k keeps k + 1 tokens: the threshold is the k-th largest, topk(...).values[:, -1] (or "
                "[:, k - 1]), not [:, k].",
            ),
            (
                lambda: _draw(logits, temperature, top_k, seed, keep=lambda s, k: s <= k),
                "top-k kept the smallest logits instead of the largest: entries below the k-th largest become -inf.",
            ),
        ]
    return variants


def _sample_mistake(logits: Tensor, temperature: float, top_k, seed: int, got: Tensor, expected: Tensor):
    variants = _sample_variants(logits, temperature, top_k, seed)
    return find_mistake(variants, lambda v: torch.equal(got, v), lambda v: torch.equal(v, expected))


@keeps_rng
def check_sample_next_token(answer: Any, cases: list | None = None) -> Passed:
    """Check `sample_next_token(logits, temperature, top_k, generator) -> (B, 1)` draw for draw, and that a
    temperature of 0 or below is a ValueError. A case is `(B, V, temperature, top_k, seed)`."""
    name = Graded(ref.sample_next_token)
    check_definition(answer, name)
    run = tagged_cases(cases, _SAMPLE_CASES)
    for tag, (B, V, temperature, top_k, seed) in run:
        logits = core.random_tensor(B, V, seed=seed + 100)  # (B, V), fairly flat: every token has a chance
        expected = ref.sample_next_token(logits, temperature, top_k, generator=core.generator(seed))
        shown = f"logits of shape {(B, V)}, temperature={temperature}, top_k={top_k}, generator"
        what = call_label(name, shown, tag)
        given = logits.clone()
        torch.manual_seed(_GLOBAL_SEED)
        got = call_without_grad(
            name, answer, given, temperature=temperature, top_k=top_k, generator=core.generator(seed), what=what
        )
        expect_unchanged(name, {"logits": (given, logits)}, what)
        if not isinstance(got, Tensor):
            raise GradingError(name, f"{what} should return a tensor of shape {(B, 1)}, got {describe(got)}.")
        if tuple(got.shape) == (B,):
            raise GradingError(name, f"{what} returned shape {(B,)}; keep one column, {(B, 1)}, as multinomial gives.")
        if tuple(got.shape) != (B, 1):
            raise GradingError(name, f"{what} returned shape {tuple(got.shape)}, expected {(B, 1)}.")
        if got.dtype.is_floating_point or got.dtype == torch.bool:
            raise GradingError(name, f"{what} returned dtype {got.dtype}; token ids are integers (torch.long).")
        if torch.equal(got.long(), expected):
            continue
        mistake = _sample_mistake(logits, temperature, top_k, seed, got.long(), expected)
        if mistake is not None:
            raise GradingError(name, f"{what}: {mistake}")
        differ = int((got.long() != expected).sum())
        raise GradingError(
            name,
            f"{what}: {differ} of {B} draws differ from softmax(logits / temperature) (top-k applied) sampled "
            "with torch.multinomial(probs, 1, generator=generator).",
        )
    _check_temperature_refused(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _check_temperature_refused(name: str, answer: Any) -> None:
    logits = core.random_tensor(2, 5, seed=7)
    for temperature in (0.0, -1.0):
        what = f"{name}(logits, temperature={temperature})"
        raised = core.call_answer(
            name, core.catching(answer), logits.clone(), temperature=temperature, generator=core.generator(0), what=what
        )
        if raised is None or not issubclass(type(raised), ValueError):
            got = "returned without an error" if raised is None else f"raised {type(raised).__name__}: {raised}"
            raise GradingError(
                name,
                f"{what} {got}. A temperature must be > 0: raise ValueError naming `temperature` "
                "(dividing by 0 gives inf and NaN probabilities).",
            )
