"""Grader of lesson 04's training exercise, `train_step` (re-exported by `course_lib.grading.attention`).

The check hands the answer a small model of the lesson's toy kind (`course_lib.attention_toys`) and a plain SGD
optimizer, built by `training_problem` where the answer lives (in its sandbox when graded: `core.make`), and
calls the answer twice on two batches. The model arrives with the gradients of an earlier backward() still in
`.grad`, as a model does in the middle of a training loop. After each call the check compares the returned loss
and the model's new weights with one step of the reference on an identical model, built here. On a mismatch it
recomputes the step with each classic mistake — no zero_grad, no backward() or step(), a softmax before the
cross-entropy, the wrong flattening, a summed loss, the loss measured after the step, ... — and names the one
whose loss and weights the answer's equal.

Shape legend: B batch, T time, V vocabulary (classes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import attention as ref
from course_lib.attention_toys import ToyTask, build_toy
from course_lib.grading.attention_common import keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, tagged_cases
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_train_step", "training_problem"]

_LR = 0.5  # plain SGD: a step is weights - lr * gradient, so each mistake leaves its own fingerprint
_D_MODEL = 8

# (B, T, V, seed); T != V except in one hidden case, where F.cross_entropy(logits, targets) runs without an error
_CASES: list = [(3, 5, 7, 0), (2, 6, 4, 1)]


def training_problem(B: int, T: int, V: int, seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A toy attention model (ids (B, T) -> logits (B, T, V)) with stale gradients, and SGD over its weights."""
    model = build_toy(ToyTask.mirror(V, T), d_model=_D_MODEL, seed=seed)
    generator = core.generator(seed + 500)
    for p in model.parameters():  # what an earlier loss.backward() left behind
        p.grad = torch.randn(p.shape, generator=generator) * 0.1
    return model, torch.optim.SGD(model.parameters(), lr=_LR)


def _batch(B: int, T: int, V: int, seed: int) -> tuple[Tensor, Tensor]:
    g = core.generator(seed)
    return torch.randint(V, (B, T), generator=g), torch.randint(V, (B, T), generator=g)  # inputs, targets (B, T)


Loss = Callable[[Tensor, Tensor], Tensor]  # (logits (B, T, V), targets (B, T)) -> a 0-dim loss


def _mean_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))  # (B*T, V), (B*T,)


def _step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: Tensor,
    targets: Tensor,
    *,
    loss_fn: Loss = _mean_cross_entropy,
    clear: bool = True,
    backward: bool = True,
    update: bool = True,
    measure_after: bool = False,
) -> float:
    """One training step, right or with one classic mistake switched on."""
    if clear:
        optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    if backward:
        loss.backward()
    if update:
        optimizer.step()
    if measure_after:
        with torch.no_grad():
            return loss_fn(model(inputs), targets).item()
    return loss.item()


_FLAT = "flatten logits to (B*T, V) and targets to (B*T,): logits.reshape(-1, V), targets.reshape(-1)"
_MISTAKES: list[tuple[dict[str, Any], str]] = [
    (
        {"clear": False},
        "the gradients an earlier backward() left in .grad were added to this step's: gradients accumulate until "
        "they are cleared. Call optimizer.zero_grad() at the start of the step, before loss.backward().",
    ),
    (
        {"update": False},
        "the weights did not change: after clearing the gradients, call loss.backward() and then "
        "optimizer.step() (clear them before backward, not between backward and step).",
    ),
    (
        {"loss_fn": lambda logits, targets: _mean_cross_entropy(torch.softmax(logits, dim=-1), targets)},
        "a softmax was applied before F.cross_entropy. F.cross_entropy takes the raw logits and applies "
        "log-softmax itself; a softmax first squashes them into 0..1 and the model learns much more slowly.",
    ),
    (
        {"loss_fn": lambda logits, targets: F.nll_loss(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))},
        "F.nll_loss was given raw logits: it expects log-probabilities. Use F.cross_entropy on the logits (it "
        "applies log-softmax for you).",
    ),
    (
        {"loss_fn": lambda logits, targets: _mean_cross_entropy(logits, targets) * targets.numel()},
        "the loss is summed over the B*T positions instead of averaged: use the mean (F.cross_entropy's default "
        "reduction), so the step size does not grow with the batch.",
    ),
    (
        {"loss_fn": lambda logits, targets: F.cross_entropy(logits, targets)},
        f"F.cross_entropy got (B, T, V) logits: it reads the classes from dimension 1, which is T here: {_FLAT}.",
    ),
    (
        {"loss_fn": lambda logits, targets: _mean_cross_entropy(logits.transpose(1, 2).reshape(logits.shape), targets)},
        f"the logits were transposed to (B, V, T) before being flattened, which mixes positions and classes: {_FLAT}.",
    ),
    (
        {"loss_fn": lambda logits, targets: _mean_cross_entropy(logits, targets.transpose(0, 1))},
        f"the targets were flattened in another order than the logits (time first), so each prediction is scored "
        f"against another position's target: {_FLAT}.",
    ),
    (
        {"measure_after": True},
        "the loss returned was measured after optimizer.step(), with the new weights. Return the loss the step "
        "was computed from: loss.item() of the loss you called backward() on.",
    ),
]

_HINTS: list[core.Hint] = [
    (lambda m: "Expected target size" in m or "Expected input batch_size" in m, _FLAT),
    (
        lambda m: "does not require grad" in m,
        "loss.backward() needs the loss computed from the model's output with gradients on: not under "
        "torch.no_grad(), and not from .detach() or .item().",
    ),
]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-5 + 1e-4 * abs(b)


def _state_close(got: dict, expected: dict) -> bool:
    return got.keys() == expected.keys() and all(
        isinstance(got[k], Tensor)
        and got[k].shape == expected[k].shape
        and torch.allclose(got[k], expected[k], rtol=1e-4, atol=1e-5)
        for k in expected
    )


def _worst(got: dict, expected: dict) -> tuple[str, float]:
    diffs = {k: (got[k] - expected[k]).abs().max().item() for k in expected if k in got}
    name = max(diffs, key=diffs.get)
    return name, diffs[name]


@keeps_rng
def check_train_step(answer: Any, cases: list | None = None) -> Passed:
    """Check `train_step(model, optimizer, inputs, targets) -> float`. A case is `(B, T, V, seed)`: two calls on
    two batches, with a model and an SGD optimizer from `training_problem(B, T, V, seed)`."""
    name = Graded(ref.train_step)
    check_definition(answer, name)
    run = tagged_cases(cases, _CASES)
    for tag, (B, T, V, seed) in run:
        model, optimizer = core.make(answer, training_problem, B, T, V, seed)
        mine, my_optimizer = training_problem(B, T, V, seed)
        for call in (1, 2):
            inputs, targets = _batch(B, T, V, seed + 100 * call)
            shown = f"model, optimizer, inputs {tuple(inputs.shape)}, targets {tuple(targets.shape)}; V = {V}"
            what = call_label(name, shown, tag) + (" (a second step, on a new batch)" if call == 2 else "")
            before = {k: v.detach().clone() for k, v in mine.state_dict().items()}
            with torch.enable_grad():
                got = core.call_answer(
                    name, answer, model, optimizer, inputs.clone(), targets.clone(), what=what, hints=_HINTS
                )
            expected = ref.train_step(mine, my_optimizer, inputs, targets)
            state = {k: v.detach() for k, v in mine.state_dict().items()}
            _compare(name, what, got, model.state_dict(), expected, state, before, (B, T, V, seed), call)
    return Passed(name, 2 * len(run), hidden=cases is not None)


def _compare(name, what, got, got_state, expected, state, before, case, call) -> None:
    if isinstance(got, Tensor):
        raise GradingError(
            name,
            f"{what} returned a tensor; return the loss as a Python float, loss.item(). (A list of loss tensors "
            "would keep every step's autograd graph alive.)",
        )
    if got is None or isinstance(got, bool) or not isinstance(got, int | float):
        raise GradingError(name, f"{what} returned {core.describe(got)}; return the loss as a float: loss.item().")
    got = float(got)
    if _close(got, expected) and _state_close(got_state, state):
        return
    mistake = _name_mistake(got, got_state, case, call)
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    if _state_close(got_state, before) and call == 1:
        raise GradingError(name, f"{what}: the weights did not change. Call loss.backward(), then optimizer.step().")
    if not _close(got, expected):
        raise GradingError(
            name,
            f"{what} returned the loss {got:.6g}, expected {expected:.6g}: the mean cross-entropy of the model's "
            "logits over all B*T positions, computed before the step.",
        )
    key, diff = _worst(got_state, state)
    raise GradingError(
        name,
        f"{what}: the loss is right, but after the step `{key}` differs from one SGD step on that loss by up to "
        f"{diff:.3g}. Clear the gradients, call backward() on that loss, then optimizer.step().",
    )


def _name_mistake(got: float, got_state: dict, case: tuple[int, int, int, int], call: int) -> str | None:
    """The first classic mistake whose loss and weights (replayed from the start) equal the answer's."""
    B, T, V, seed = case
    for options, message in _MISTAKES:
        model, optimizer = training_problem(B, T, V, seed)
        try:
            with torch.enable_grad():
                for step in range(1, call + 1):
                    inputs, targets = _batch(B, T, V, seed + 100 * step)
                    loss = _step(model, optimizer, inputs, targets, **options)
        except Exception:  # this mistake cannot run on this input (a shape error): it is not the answer's
            continue
        if _close(got, loss) and _state_close(got_state, model.state_dict()):
            return message
    return None
