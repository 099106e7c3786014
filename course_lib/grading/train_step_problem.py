"""What lesson 11's `training_step` check hands the answer: a training step's objects that report what is done to them.

`step_problem(seed, scale)` builds, where the answer lives (`core.make`), the objects a training step receives —
each a real one, watched:

- `WatchedGPT`: a tiny GPT-2 (`course_lib.gpt2`) that reports each forward pass (inside `autocast()` or not,
  and its loss) and, through a hook on its loss, the factor each backward pass applied to that loss (1/n for n
  micro-batches, S/n when the loss went through a scaler of scale S). It arrives with stale gradients in `.grad`,
  as a model does in the middle of a run;
- `WatchedSGD`: plain SGD (a step is weights - lr * gradient: every mistake leaves its own weights) that reports
  `zero_grad` and `step`, with the gradients' global norm at the step;
- `WatchedScaler`: a real `torch.amp.GradScaler` on the CPU that reports `scale`, `unscale_` (with the norm of the
  gradients it is about to unscale, and whether `scaler.step` called it itself), `scaler.step` and `update`;
- `Autocast`: stands in for `functools.partial(torch.autocast, ...)`: `autocast()` is a context the model can
  see it runs in (the CPU has no fp16 kernels to autocast to, and a real bf16 autocast would blur the comparison).

Everything is reported to one `StepLog`, in order; the check reads `log.events` (plain data) after each call.

Shape legend: B micro-batch rows, T time, V vocabulary.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch._dynamo  # noqa: F401  (see below)
from torch import Tensor, nn

from course_lib.gpt2 import GPT2, GPT2Config
from course_lib.grading.kit import core

# An optimizer's constructor imports torch._dynamo on its first use, and that import looks for a writable temporary
# folder. A graded answer's sandbox may write nowhere, so the import happens here, in the grader, before any sandbox
# is forked from it.

__all__ = ["LR", "VOCAB", "Autocast", "StepLog", "WatchedGPT", "WatchedSGD", "WatchedScaler", "step_problem"]

VOCAB = 64  # ln 64 = 4.2: an untrained model's loss, so 2**127 times it overflows fp32 (the scaler's test)
CONTEXT = 8
LR = 0.1


class StepLog:
    """What happened to a step's objects, in order: a list of events, each a list [kind, details...]."""

    def __init__(self) -> None:
        self.events: list[list] = []
        self.in_scaler_step = False  # True while scaler.step(optimizer) runs: its optimizer.step is the scaler's

    def add(self, *event) -> None:
        self.events.append(list(event))


def _grad_norm(parameters) -> float:
    """The global L2 norm of the gradients (float64; inf or nan when a gradient is)."""
    grads = [p.grad.detach().double() for p in parameters if p.grad is not None]
    return math.sqrt(sum(float(g.pow(2).sum()) for g in grads)) if grads else 0.0


class Autocast:
    """`autocast()` -> a context that does nothing but let the model see it is inside one."""

    def __init__(self) -> None:
        self.depth = 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


class WatchedGPT(nn.Module):
    """A tiny GPT-2, `forward(idx, targets) -> (logits, loss)`, reporting forward and backward passes."""

    def __init__(self, config: GPT2Config, log: StepLog, autocast: Autocast):
        super().__init__()
        self.gpt = GPT2(config)
        self._log, self._autocast = log, autocast  # plain attributes: not part of the state dict

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        logits, loss = self.gpt(idx, targets)  # (B, T, V), ()
        self._log.add("forward", self._autocast.depth > 0, None if loss is None else loss.item())
        if loss is not None and loss.requires_grad:
            # the gradient arriving at the loss is the factor backward applied to it: 1/n, or S/n through a scaler
            loss.register_hook(lambda grad: self._log.add("backward", grad.item()))
        return logits, loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._log.add("zero_grad")
        super().zero_grad(set_to_none)


class WatchedSGD(torch.optim.SGD):
    """SGD reporting `zero_grad` and `step` (with the gradient norm it steps with)."""

    def __init__(self, params, log: StepLog):
        super().__init__(params, lr=LR)
        self._log = log

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._log.add("zero_grad")
        super().zero_grad(set_to_none)

    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]]
        self._log.add("step", _grad_norm(params), self._log.in_scaler_step)
        return super().step(closure)


class WatchedScaler(torch.amp.GradScaler):
    """A CPU GradScaler reporting its calls: scale, unscale_ (norm before, called by step?), scaler.step, update."""

    def __init__(self, log: StepLog, init_scale: float):
        super().__init__("cpu", init_scale=init_scale)
        self._log = log

    def scale(self, outputs):
        self._log.add("scale")
        return super().scale(outputs)

    def unscale_(self, optimizer) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self._log.add("unscale_", _grad_norm(params), self._log.in_scaler_step)
        return super().unscale_(optimizer)

    def step(self, optimizer, *args, **kwargs):
        self._log.add("scaler.step")
        self._log.in_scaler_step = True
        try:
            return super().step(optimizer, *args, **kwargs)
        finally:
            self._log.in_scaler_step = False

    def update(self, new_scale=None) -> None:
        self._log.add("update")
        return super().update(new_scale)


Problem = tuple[WatchedGPT, WatchedSGD, "WatchedScaler | None", Autocast, StepLog]


def step_problem(seed: int, scale: float | None) -> Problem:
    """A tiny GPT-2 with stale gradients, SGD over it, a GradScaler of initial scale `scale` (None: no scaler),
    an autocast stand-in, and the log they all report to."""
    log, autocast = StepLog(), Autocast()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = WatchedGPT(GPT2Config(VOCAB, CONTEXT, n_layers=1, n_heads=2, d_model=16, use_sdpa=True), log, autocast)
    stale = core.generator(seed + 500)
    for p in model.parameters():  # what an earlier step's backward() left behind
        p.grad = torch.randn(p.shape, generator=stale)
    scaler = None if scale is None else WatchedScaler(log, scale)
    return model, WatchedSGD(model.parameters(), log), scaler, autocast, log


def micro_batches(n: int, B: int, T: int, seed: int) -> list[tuple[Tensor, Tensor]]:
    """n micro-batches of (B, T) inputs and targets, from a fixed seed."""
    g = core.generator(seed)
    return [(torch.randint(VOCAB, (B, T), generator=g), torch.randint(VOCAB, (B, T), generator=g)) for _ in range(n)]
