"""Grader of lesson 08's `greedy_generate` (re-exported by `course_lib.grading.statquest`).

The model is a seeded state dict (`model_params`, shared with the forward pass's grader). Which id counts
as <EOS> is chosen from the model's own free run, so that a case either stops early on <EOS> (`stop_at` = the
step that writes it) or runs out of budget without one (`stop_at` None): both ways of ending are graded.

Shape legend: B batch, T time, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib import statquest as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, tagged_cases
from course_lib.grading.kit.diagnose import Variant, find_mistake
from course_lib.grading.kit.guard import check_definition
from course_lib.position import sinusoidal_position_encoding

__all__ = ["check_greedy_generate", "generation_case", "model_params"]

# (V, C, max_len, prompt_len, max_new_tokens, stop_at, seed)
_GENERATE_CASES: list = [(7, 4, 8, 3, 5, 3, 2), (7, 4, 8, 3, 5, None, 8), (5, 2, 6, 3, 3, 2, 19)]


def model_params(V: int, C: int, max_len: int, seed: int) -> dict[str, Tensor]:
    """A state dict with the keys and shapes of the toy model (`course_lib.statquest_model`) with V words, width
    C and max_len positions: seeded normal weights, the attention's larger (std 2) so that the attention pattern,
    and every mistake in it, changes the logits clearly; `pe.pe` the sinusoidal table."""
    shapes = {
        "we.weight": ((V, C), 1.0),
        "self_attention.W_q.weight": ((C, C), 2.0),
        "self_attention.W_k.weight": ((C, C), 2.0),
        "self_attention.W_v.weight": ((C, C), 2.0),
        "fc_layer.weight": ((V, C), 1.0),
        "fc_layer.bias": ((V,), 0.5),
    }
    params = {
        key: core.random_tensor(*shape, seed=seed * 10 + i, scale=scale)
        for i, (key, (shape, scale)) in enumerate(shapes.items())
    }
    params["pe.pe"] = sinusoidal_position_encoding(max_len, C)  # (max_len, C)
    return params


def _free_run(params: dict[str, Tensor], prompt: list[int], steps: int) -> list[int]:
    """The ids greedy decoding writes when no id stops it (the logits' argmax, `steps` times)."""
    ids = list(prompt)
    for _ in range(steps):
        ids.append(int(ref.decoder_only_forward(params, torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt) :]


def generation_case(case: tuple) -> tuple[dict[str, Tensor], list[int], int, int]:
    """(params, prompt_ids, eos_id, max_new_tokens) of a case; see the module docstring for `stop_at`."""
    V, C, max_len, prompt_len, budget, stop_at, seed = case
    params = model_params(V, C, max_len, seed)
    prompt = torch.randint(0, V, (prompt_len,), generator=core.generator(seed + 20)).tolist()
    run = _free_run(params, prompt, budget)
    if stop_at is None:  # an id the model never writes in this run
        eos_id = next((v for v in range(V) if v not in run), V)
    else:  # the id written at the first step >= stop_at that writes a new id (or the last new id before)
        firsts = [i for i, token in enumerate(run) if token not in run[:i]]
        eos_id = run[min(firsts, key=lambda i: (i < stop_at, abs(i - stop_at)))]
    return params, prompt, eos_id, budget


def _generate_variants(params: dict[str, Tensor], prompt: list[int], eos_id: int, budget: int) -> list[Variant]:
    def loop(*, stop: bool = True, keep_eos: bool = True, position: int = -1, context: bool = True, steps=budget):
        written: list[int] = []
        while len(written) < steps:
            seen = prompt + written if context else (prompt + written)[-1:]
            logits = ref.decoder_only_forward(params, torch.tensor([seen]))  # (1, t, V)
            next_id = int(logits[0, position].argmax())
            if stop and next_id == eos_id:
                return written + [next_id] if keep_eos else written
            written.append(next_id)
        return written

    return [
        (
            lambda: loop(stop=False),
            "generation did not stop at <EOS>: after writing eos_id, stop (break) — keep the <EOS>, write "
            "nothing after it.",
        ),
        (lambda: loop(keep_eos=False), "the <EOS> itself is missing: append it, then stop."),
        (
            lambda: prompt + loop(),
            "the prompt was returned too: return only the ids written after it.",
        ),
        (
            lambda: loop(position=0),
            "the next id was read from the first position's logits; the last position predicts what comes "
            "next: logits[0, -1].argmax().",
        ),
        (
            lambda: loop(context=False),
            "each step fed only the last id to the model. Feed the whole sequence so far (prompt + ids written): "
            "attention needs the context.",
        ),
        (lambda: loop(steps=budget - 1), "one id too few: write up to max_new_tokens ids."),
        (lambda: loop(steps=budget + 1), "one id too many: write at most max_new_tokens ids."),
    ]


@keeps_rng
def check_greedy_generate(answer: Any, cases: list | None = None) -> Passed:
    """Check `greedy_generate(params, prompt_ids, eos_id, max_new_tokens) -> list[int]`.

    A case is `(V, C, max_len, prompt_len, max_new_tokens, stop_at, seed)`.
    """
    name = Graded(ref.greedy_generate)
    check_definition(answer, name)
    run = tagged_cases(cases, _GENERATE_CASES)
    for tag, case in run:
        params, prompt, eos_id, budget = generation_case(case)
        expected = ref.greedy_generate(params, prompt, eos_id, budget)
        shown = (
            f"params (V={case[0]}, d_model={case[1]}), prompt_ids={prompt}, eos_id={eos_id}, max_new_tokens={budget}"
        )
        what = call_label(name, shown, tag)
        given = {k: v.clone() for k, v in params.items()}
        given_prompt = list(prompt)
        got = call_without_grad(name, answer, given, given_prompt, eos_id, budget, what=what)
        if given_prompt != prompt:
            raise GradingError(
                name, f"{what} changed `prompt_ids` in place (append/extend); copy it first: ids = list(prompt_ids)."
            )
        _expect_id_list(name, got, what)
        if got == expected:
            continue
        mistake = find_mistake(_generate_variants(params, prompt, eos_id, budget), got.__eq__, expected.__eq__)
        if mistake is not None:
            raise GradingError(name, f"{what} returned {got}: {mistake}")
        shown_expected = f", expected {expected}" if tag is None else ""
        raise GradingError(name, f"{what} returned {got}{shown_expected}.")
    return Passed(name, len(run), hidden=cases is not None)


def _expect_id_list(name: str, got: Any, what: str) -> None:
    if isinstance(got, Tensor):
        raise GradingError(name, f"{what} returned a tensor ({describe(got)}); return a list of Python ints.")
    if not isinstance(got, list):
        raise GradingError(name, f"{what} should return a list of ints, got {describe(got)}.")
    for position, item in enumerate(got):
        if isinstance(item, Tensor):
            raise GradingError(
                name,
                f"{what}: item {position} of the result is a tensor ({describe(item)}), not an int. Append "
                "int(logits[0, -1].argmax()) (or .item()): a tensor id is no key of a dict (id_to_token[tensor(3)] "
                "raises KeyError) and is never `in` a set of ints, so such a loop may not even stop.",
            )
        if not core.is_int(item):
            raise GradingError(name, f"{what}: item {position} is {type(item).__name__} {item!r}; ids are ints.")
