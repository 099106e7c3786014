"""Grader of lesson 11's main exercise, `training_step` (re-exported by `course_lib.grading.train`).

A case builds a training step's objects where the answer lives (`core.make` of
`train_step_problem.step_problem`: a tiny GPT-2 with stale gradients, SGD, a real CPU GradScaler or none, an
autocast stand-in, all reporting to one log) and calls the answer twice, on two lists of micro-batches. After
each call the check compares, with one step of the reference `course_lib.train.training_step` on identical
objects built here: what was done to the objects and in which order (the log), the loss returned, the weights,
and the scaler's scale. The log names each mistake directly — the loss not divided by the number of
micro-batches (the backward factor is 1 instead of 1/n), backward on the unscaled loss (1/n instead of S/n),
zero_grad inside the loop, a step per micro-batch, clipping before `unscale_` (the step's gradient norm is
clip_norm / S), `optimizer.step()` where `scaler.step` belongs, a forgotten `update` — and the returned value is
compared with the sum, the last loss, and the other wrong means.

A case is `(n_micro, B, T, clip_norm, scale, autocast, seed)`: `clip_norm` None and `autocast` False leave those
arguments to the answer's defaults, `scale` None passes no scaler. In one visible case the scaled loss
overflows (a scale of 2**127), and the scaler must skip the step and halve the scale.

Shape legend: B micro-batch rows, T time.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from course_lib import train as ref
from course_lib.grading.attention_common import keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, tagged_cases
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.train_step_problem import micro_batches, step_problem

__all__ = ["CASES", "check_training_step"]

# (micro-batches, rows, seq_len, clip_norm or None (default), loss scale or None (no scaler), autocast?, seed)
CASES: list = [
    (2, 2, 8, 0.05, None, False, 0),  # clipping acts; autocast and the scaler left to their defaults
    (3, 2, 8, 1e3, None, True, 1),  # clipping too loose to act, so the division by 3 shows in the weights
    (2, 2, 6, 0.05, 2.0**10, True, 2),  # a loss scaler
    (1, 2, 8, None, 2.0**127, True, 3),  # the scaled loss overflows fp32: the scaler must skip the step
]
_CALLS = 2  # steps per case, each on new micro-batches


def _close(a: float, b: float, rtol: float = 1e-4, atol: float = 1e-6) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= atol + rtol * abs(b)


def _kinds(events: list, kind: str) -> list[int]:
    return [i for i, e in enumerate(events) if e[0] == kind]


def _check_events(got: list, expected: list, n: int, scaled: bool, autocast: bool, shown: bool) -> str:
    """What the answer did differently from the reference, as a message ("" when the log agrees)."""
    forwards, backwards = _kinds(got, "forward"), _kinds(got, "backward")
    if len(forwards) != n:
        return (f"the model ran {len(forwards)} forward passes for {n} micro-batches: one `model(x, y)` per "
                "(x, y) pair of micro_batches.")  # fmt: skip
    if autocast and not all(got[i][1] for i in forwards):
        return "the forward pass ran outside autocast(): `with autocast(): _, loss = model(x, y)`."
    if not backwards:
        return "no backward pass reached the loss: call backward() on each micro-batch's (divided) loss."
    if len(backwards) != n or any(b > f for b, f in zip(backwards, forwards[1:], strict=False)):
        return ("the backward passes did not come one per micro-batch, each before the next forward pass: call "
                "backward() on each micro-batch's loss in the loop, so its activations are freed before the next "
                "forward (holding them all at once is the memory accumulation exists to save).")  # fmt: skip
    factor, want = got[backwards[0]][1], expected[_kinds(expected, "backward")[0]][1]
    scale = want * n  # S (1 without a scaler)
    if not all(_close(got[i][1], want) for i in backwards):
        if n > 1 and _close(factor, scale):
            return (f"each micro-batch's loss was not divided by the number of micro-batches ({n}): backward() "
                    f"adds every micro-batch's gradients to .grad, so the step used {n} times the mean loss's "
                    "gradient. Divide: `loss = loss / len(micro_batches)` before backward.")  # fmt: skip
        if scaled and _close(factor, 1 / n):
            return ("backward() ran on the unscaled loss: with a scaler, `scaler.scale(loss).backward()`. In fp16, "
                    "small gradients underflow to 0 unless the loss is scaled up first.")  # fmt: skip
        if scaled and n > 1 and _close(factor, 1.0):
            return ("backward() ran on the unscaled loss, not divided by the number of micro-batches: "
                    "`scaler.scale(loss / len(micro_batches)).backward()`.")  # fmt: skip
        if n > 1 and _close(factor, want / n):
            return f"the loss was divided by the number of micro-batches twice (by {n}**2): divide it once."
        detail = f" by {factor:.6g}, expected {want:.6g}" if shown else ""
        return (
            f"the loss that backward() ran on was the micro-batch's loss multiplied{detail}: divide it by "
            "len(micro_batches)" + (" and scale it with scaler.scale" if scaled else "") + "."
        )
    clears = _kinds(got, "zero_grad")
    if not clears:
        return ("the gradients were never cleared: the ones the model arrived with (an earlier step's) were "
                "added to this step's. Call optimizer.zero_grad(set_to_none=True) once, before the first "
                "micro-batch.")  # fmt: skip
    if any(forwards[0] < c < backwards[-1] for c in clears):
        return ("zero_grad was called inside the accumulation loop: it wiped the gradients of the micro-batches "
                "before, and the step used only the last one's. Clear once, before the loop.")  # fmt: skip
    if clears[0] > backwards[-1]:
        return ("zero_grad came after the backward passes (after the step?): the gradients the model arrived with "
                "were added to this step's. Clear them once, before the first micro-batch.")  # fmt: skip
    steps = _kinds(got, "step")
    direct = [i for i in steps if not got[i][2]]
    scaler_steps = _kinds(got, "scaler.step")
    if scaled and direct:
        return ("optimizer.step() was called directly: with a scaler, call scaler.step(optimizer), which skips the "
                "step when the scaled gradients overflowed (inf or nan) and steps otherwise.")  # fmt: skip
    if len(direct) + len(scaler_steps) > 1:
        return (f"the optimizer stepped {len(direct) + len(scaler_steps)} times: once per micro-batch? Accumulation "
                "steps once, after the last micro-batch's backward.")  # fmt: skip
    if not direct and not scaler_steps:
        return (
            "the optimizer never stepped: "
            + ("scaler.step(optimizer)" if scaled else "optimizer.step()")
            + (" after clipping.")
        )
    stepped = (direct or scaler_steps)[0]
    if stepped < backwards[-1]:
        return "the optimizer stepped before the last micro-batch's backward: step once, after all of them."
    if scaled:
        updates = _kinds(got, "update")
        if not updates:
            return ("scaler.update() was not called after scaler.step(optimizer): without it the scale never "
                    "adapts (after an overflow it must be lowered).")  # fmt: skip
        if updates[0] < stepped or len(updates) > 1:
            return "call scaler.update() once, after scaler.step(optimizer)."
        if not any(not got[i][2] for i in _kinds(got, "unscale_")):
            return ("scaler.unscale_(optimizer) was not called before clipping, so clip_grad_norm_ clipped the "
                    "scaled gradients (scaler.step unscaled them only afterwards): call scaler.unscale_(optimizer) "
                    "after the last backward, then clip, then scaler.step(optimizer).")  # fmt: skip
    return ""


def _check_clipping(got: list, expected: list, clip: float, true_norm: float, scale: float, shown: bool) -> str:
    """Compare the gradient norm the optimizer stepped with (when it stepped: an overflow skips the step);
    `true_norm` is the norm before clipping, `scale` the loss scale (1 without a scaler)."""
    want = [expected[i][1] for i in _kinds(expected, "step")]
    norms = [got[i][1] for i in _kinds(got, "step")]
    if not want or not norms or _close(norms[0], want[0], rtol=1e-3):
        return ""
    norm, wanted = norms[0], want[0]
    if scale != 1 and _close(norm, clip / scale, rtol=1e-3):
        return ("the gradients were clipped while still scaled: clip_grad_norm_ came before "
                "scaler.unscale_(optimizer), so after unscaling their norm was clip_norm / scale. Unscale first, "
                "then clip.")  # fmt: skip
    if _close(norm, true_norm, rtol=1e-3) and true_norm > clip:
        detail = f" (norm {norm:.4g}, clip_norm {clip:g})" if shown else ""
        return (f"the gradients were not clipped{detail}: call torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "clip_norm) after the last backward (and scaler.unscale_), before the step.")  # fmt: skip
    detail = f" {norm:.4g}, expected {wanted:.4g}" if shown else " not the expected one"
    return (f"the optimizer stepped with gradients of norm{detail}: clip the global norm of all the model's "
            "gradients together with clip_grad_norm_(model.parameters(), clip_norm) (clip_grad_value_ clips each "
            "entry on its own, and clipping each parameter's gradient separately is not the global norm "
            "either).")  # fmt: skip


def _check_loss(got: Any, losses: list[float], expected: float, scale: float) -> str:
    """The returned value against the mean of the micro-batches' losses, and the usual wrong values."""
    if isinstance(got, torch.Tensor):
        return "it returned a tensor: return a Python float, the mean loss's .item()."
    if got is None:
        return "it returned None: return the mean loss of the micro-batches (a float). Did you forget `return`?"
    if isinstance(got, bool) or not isinstance(got, int | float):
        return f"it returned {core.describe(got)}: return the mean loss of the micro-batches as a float."
    got, n = float(got), len(losses)
    if _close(got, expected, rtol=1e-5):
        return ""
    wrong = [
        (sum(losses), "the sum of the micro-batches' losses: return their mean (the sum of the divided losses)."),
        (losses[-1], "only the last micro-batch's loss: return the mean over all micro-batches."),
        (losses[-1] / n, "only the last micro-batch's share (its loss / n): add up every micro-batch's share."),
        (expected / n, "the mean divided by the number of micro-batches once more: the divided losses add up to "
         "the mean already."),
        (expected * scale, "the scaled loss: return the loss before scaler.scale (scaling is for backward only)."),
    ]  # fmt: skip
    for value, message in wrong:
        if _close(got, value, rtol=1e-5) and not _close(value, expected, rtol=1e-5):
            return f"it returned {message}"
    return f"it returned {got:.6g}, not the mean of the micro-batches' losses: return that mean, a float."


@keeps_rng
def check_training_step(answer: Any, cases: list | None = None) -> Passed:
    """Check `training_step(model, micro_batches, optimizer, scaler=None, autocast=contextlib.nullcontext,
    clip_norm=1.0) -> float` against `course_lib.train.training_step`; see the module docstring for a case."""
    name = Graded(ref.training_step)
    check_definition(answer, name)
    run = tagged_cases(cases, CASES)
    for tag, (n, B, T, clip, scale, autocast, seed) in run:
        model, optimizer, scaler, stand_in, log = core.make(answer, step_problem, seed, scale)
        mine, my_optimizer, my_scaler, my_stand_in, my_log = step_problem(seed, scale)
        for call in range(1, _CALLS + 1):
            batches = micro_batches(n, B, T, seed + 100 * call)
            kwargs, mine_kwargs = {}, {}
            if scale is not None:
                kwargs["scaler"], mine_kwargs["scaler"] = scaler, my_scaler
            if autocast:
                kwargs["autocast"], mine_kwargs["autocast"] = stand_in, my_stand_in
            if clip is not None:
                kwargs["clip_norm"] = mine_kwargs["clip_norm"] = clip
            shown = f"model, {n} micro-batch(es) of ({B}, {T}), optimizer" + "".join(
                [f", scaler (scale {scaler.get_scale():g})" if scale is not None else "", ", autocast" * autocast]
                + [f", clip_norm={clip:g}" if clip is not None else ""]
            )
            what = call_label(name, shown, tag) + (" (a second step)" if call == 2 else "")
            done = len(log.events)
            with torch.enable_grad():
                got = core.call_answer(
                    name, answer, model, [(x.clone(), y.clone()) for x, y in batches], optimizer,
                    what=what, hints=_HINTS, **kwargs,
                )  # fmt: skip
                my_done, stats = len(my_log.events), {}
                expected = ref.training_step(mine, batches, my_optimizer, **mine_kwargs, stats=stats)
            _compare(name, what, tag is None, (log.events[done:], my_log.events[my_done:]), (got, expected),
                     (n, scale, autocast, 1.0 if clip is None else clip, stats["grad_norm"].item()),
                     (model, mine, scaler, my_scaler))  # fmt: skip
    return Passed(name, _CALLS * len(run), hidden=cases is not None)


def _compare(name, what, shown, logs, values, setting, objects) -> None:
    (got_events, events), (got, expected), (n, scale, autocast, clip, true_norm) = logs, values, setting
    losses = [events[i][2] for i in _kinds(events, "forward")]  # each micro-batch's loss (the reference's)
    model, mine, scaler, my_scaler = objects
    used = n * events[_kinds(events, "backward")[0]][1]  # the scale the step ran with (1 without a scaler)
    problem = _check_events(got_events, events, n, scale is not None, autocast, shown)
    problem = problem or _check_clipping(got_events, events, clip, true_norm, used, shown)
    problem = problem or _check_loss(got, losses, expected, used)
    if problem:
        raise GradingError(name, f"{what}: {problem}")
    state, mine_state = model.state_dict(), mine.state_dict()
    for key, value in mine_state.items():
        if not torch.allclose(state[key], value, rtol=1e-4, atol=1e-6, equal_nan=True):
            diff = (state[key] - value).abs().max().item()
            raise GradingError(
                name,
                f"{what}: after the step `{key}` differs from the reference's by up to {diff:.3g}, although the "
                "calls look right. Is the step exactly: zero_grad once; per micro-batch forward under autocast(), "
                "loss / len(micro_batches), backward; unscale_, clip, step (and update)?",
            )
    if scaler is not None and scaler.get_scale() != my_scaler.get_scale():
        raise GradingError(name, f"{what}: the scaler's scale is not what one scaler.update() per step leaves.")


_HINTS: list[core.Hint] = [
    (lambda m: "scaler.scale" in m, "backward() ran on the unscaled loss: with a scaler, "
     "`scaler.scale(loss).backward()` (in fp16 small gradients underflow to 0 unless the loss is scaled up)."),
    (lambda m: "NoneType" in m and "attribute" in m, "scaler is None when no scaler is given (bf16 or fp32 runs): "
     "call its methods only `if scaler is not None`."),
    (lambda m: "context manager" in m or "__enter__" in m, "autocast is a function that returns a context: "
     "`with autocast():`, with the brackets."),
    (lambda m: "'NoneType' object is not callable" in m, "autocast defaults to contextlib.nullcontext, a function "
     "whose context does nothing."),
    (lambda m: "has already been called" in m, "per step: scaler.unscale_(optimizer) once, scaler.step(optimizer) "
     "once, then scaler.update()."),
    (lambda m: "does not require grad" in m, "call backward() on the loss tensor itself (divided), not on "
     ".detach() or .item() of it."),
    (lambda m: "backward through the graph a second time" in m, "call backward() once per micro-batch, on that "
     "micro-batch's loss."),
    (lambda m: "unpack" in m, "micro_batches is a list of (x, y) pairs, and model(x, y) returns (logits, loss)."),
]  # fmt: skip
