"""The training loop of the CPU-recipe benchmark (bench_char_recipe.py) and its tests: nanoGPT's character
recipe, run on the course's model (a script's helper, not a lesson's code).

    CharTrainConfig     batch/block size, AdamW settings, warm-up + cosine schedule, evaluation, stopping rules
    NANOGPT_CPU         nanoGPT's README configuration for Tiny Shakespeare on a CPU (2,000 steps of 12 x 64)
    FAST_CPU            the faster CPU recipe the benchmark measured (see its comment for what it was measured to buy)
    lr_at               nanoGPT's get_lr, reproduced as nanoGPT writes it: a warm-up of (step + 1) / (warmup + 1),
                        a cosine decay to min_lr, then min_lr. (The course's schedule, lesson 10's
                        `course_lib.train.cosine_lr`, warms up over (step + 1) / warmup; this copy keeps nanoGPT's
                        own rule so that the benchmark compares recipes, not two warm-ups.)
    train_char_model    AdamW + schedule + clipping on random training windows; stops at max_iters, at a
                        target validation loss, or when a time budget is spent; returns a History
    History             what happened: per step (loss, lr, seconds, tokens) and per evaluation (val loss)

Batches are drawn as lesson 09's `get_batch` draws them: ix = randint(len(data) - block_size, (batch,))
with a seeded torch.Generator, x = data[ix : ix + block], y the same windows shifted by one; the same seed
therefore gives the same batches, and on one machine with one thread count, the same losses. Evaluation is lesson
12's: `course_lib.ladder.eval_batches` (fixed windows) and `estimate_loss`.

Clocks: `History.train_s` counts the training steps only (evaluation is paused out of it, so a frequent
evaluation does not slow the run it measures); `History.wall_s` counts everything. The time budget is on the
wall clock, so a run that asks for 20 seconds gets about 20 seconds.

Typical use: the recipe with a budget, a callback per event:

    model = CharGPT(vocab_size, FAST_CPU.block_size, **FAST_CPU_MODEL)   # tests/char_gpt.py
    history = train_char_model(model, train_ids, FAST_CPU.replace(time_budget_s=60), val_data=val_ids,
                               callback=lambda event: print(event) if event.kind == "eval" else None)

Shape legend: B batch, T time (block_size), V vocabulary, N length of an id sequence, E evaluation windows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.ladder import estimate_loss, eval_batches

__all__ = [
    "FAST_CPU",
    "FAST_CPU_MODEL",
    "NANOGPT_CPU",
    "CharTrainConfig",
    "History",
    "TrainEvent",
    "lr_at",
    "train_char_model",
]


@dataclass(frozen=True)
class CharTrainConfig:
    """How to train; the defaults are nanoGPT's CPU run on Tiny Shakespeare (README + train_shakespeare_char)."""

    batch_size: int = 12  # windows per step
    block_size: int = 64  # characters per window
    lr: float = 1e-3  # peak learning rate, reached at the end of the warm-up
    min_lr: float = 1e-4  # the floor of the cosine decay
    warmup_iters: int = 100  # steps of linear warm-up
    lr_decay_iters: int = 2000  # step at which the cosine reaches min_lr
    max_iters: int = 2000  # optimizer steps at most
    weight_decay: float = 0.1  # AdamW decay of the matrices and embeddings (not of biases or norms)
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = 1.0  # clip the global gradient norm to this (0: no clipping)
    eval_interval: int = 250  # steps between two evaluations (and one after the last step)
    first_eval: int = 0  # step of the first evaluation (0: before training; evaluation never changes training)
    eval_iters: int = 200  # evaluation windows = eval_iters * batch_size (used when no windows are given)
    time_budget_s: float | None = None  # stop once the wall clock passes this (None: no budget)
    target_val_loss: float | None = None  # stop at the first evaluation at or below this (None: never)
    seed: int = 1337  # seeds the generator that draws the training windows (not the initial weights)
    num_threads: int | None = None  # intra-op threads while training; None (recipes): leave as is; benchmarks pin
    compile: bool = False  # torch.compile the model for the training steps

    def __post_init__(self) -> None:
        _checks.positive_ints(
            batch_size=self.batch_size,
            block_size=self.block_size,
            max_iters=self.max_iters,
            lr_decay_iters=self.lr_decay_iters,
            eval_interval=self.eval_interval,
            eval_iters=self.eval_iters,
        )
        _checks.positive_number("lr", self.lr)
        _checks.integer("warmup_iters", self.warmup_iters, minimum=0)
        _checks.integer("seed", self.seed, minimum=0)
        _checks.integer("first_eval", self.first_eval, minimum=0)
        if self.warmup_iters >= self.lr_decay_iters:
            raise ValueError(
                f"`warmup_iters` ({self.warmup_iters}) must be smaller than `lr_decay_iters` ({self.lr_decay_iters})"
            )
        if (
            isinstance(self.min_lr, bool)
            or not isinstance(self.min_lr, (int, float))
            or not 0 <= self.min_lr <= self.lr
        ):
            raise ValueError(f"`min_lr` must be a number in [0, lr={self.lr}], got {self.min_lr!r}")
        if (
            isinstance(self.weight_decay, bool)
            or not isinstance(self.weight_decay, (int, float))
            or self.weight_decay < 0
        ):
            raise ValueError(f"`weight_decay` must be a number >= 0, got {self.weight_decay!r}")
        if isinstance(self.grad_clip, bool) or not isinstance(self.grad_clip, (int, float)) or self.grad_clip < 0:
            raise ValueError(f"`grad_clip` must be a number >= 0 (0 turns clipping off), got {self.grad_clip!r}")
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"`betas` must be two numbers in [0, 1), got {self.betas!r}")
        if self.time_budget_s is not None:
            _checks.positive_number("time_budget_s", self.time_budget_s)
        if self.target_val_loss is not None:
            _checks.positive_number("target_val_loss", self.target_val_loss)
        if self.num_threads is not None:
            _checks.positive_int("num_threads", self.num_threads)

    def replace(self, **changes: object) -> CharTrainConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


# nanoGPT's README CPU run: config/train_shakespeare_char.py with --block_size=64 --batch_size=12 --n_layer=4
# --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0; the config file sets lr 1e-3,
# min_lr 1e-4, beta2 0.99, warm-up 100; train.py's defaults add weight decay 0.1, beta1 0.9, clipping at 1.0.
NANOGPT_CPU = CharTrainConfig()

# The course's CPU recipe: nanoGPT's model with fused attention (use_sdpa), 3x the peak learning rate and a
# 1,000-step schedule. Like every recipe and lesson of the course it leaves torch's thread count alone: the
# fastest count depends on the machine and on what else runs there, so the benchmark measures each candidate.
# tests/benchmarks/bench_char_recipe.py times it against nanoGPT's own train.py (its README's CPU run); the
# figures, the machine and its load are in tests/benchmarks/RESULTS_char_recipe.md. With the same model code
# and nanoGPT's settings (one thread, pinned by that benchmark), the recipe's schedule reaches val <= 1.88 on
# 2,400 fixed validation windows after 850 steps instead of 1,750.
FAST_CPU_MODEL = {"d_model": 128, "n_layers": 4, "n_heads": 4, "dropout": 0.0, "use_sdpa": True}  # CharGPT kwargs
FAST_CPU = CharTrainConfig(lr=3e-3, min_lr=3e-4, warmup_iters=50, lr_decay_iters=1000, max_iters=1000, eval_interval=50)


def lr_at(config: CharTrainConfig, step: int) -> float:
    """nanoGPT's get_lr: lr * (step+1)/(warmup+1) during the warm-up, then a cosine from lr down to min_lr at
    lr_decay_iters, then min_lr."""
    if step < config.warmup_iters:
        return config.lr * (step + 1) / (config.warmup_iters + 1)
    if step > config.lr_decay_iters:
        return config.min_lr
    progress = (step - config.warmup_iters) / (config.lr_decay_iters - config.warmup_iters)  # 0 -> 1
    return config.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (config.lr - config.min_lr)


def _check_ids(name: str, data: object, block_size: int) -> None:
    _checks.tensor(name, data, "N", integer=True)
    if len(data) <= block_size:  # type: ignore[arg-type]
        raise ValueError(f"`{name}` has {len(data)} ids; windows of block_size={block_size} need at least one more")


def _windows(data: Tensor, ix: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """x[b] = data[ix[b] : ix[b] + block_size] and y[b] = the same window one step later: (B, T) each."""
    offsets = ix[:, None] + torch.arange(block_size)  # (B, T)
    return data[offsets], data[offsets + 1]


def _get_batch(data: Tensor, block_size: int, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Lesson 09's get_batch (same draws, same windows), with one gather instead of a Python loop."""
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,) window starts
    return _windows(data, ix, block_size)


@dataclass(frozen=True)
class TrainEvent:
    """What a callback sees: kind "step" after each optimizer step, "eval" after each evaluation."""

    kind: str
    step: int  # optimizer steps done so far
    train_s: float  # training clock (evaluation excluded)
    wall_s: float  # wall clock since the start
    tokens: int  # training characters seen (steps * batch * block)
    loss: float  # the step's training loss, or the validation loss
    lr: float  # learning rate of the last step


@dataclass
class History:
    """A training run, step by step and evaluation by evaluation."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    train_s: list[float] = field(default_factory=list)  # training clock after each step
    eval_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    eval_train_s: list[float] = field(default_factory=list)  # training clock at each evaluation
    eval_tokens: list[int] = field(default_factory=list)
    stop_reason: str = ""  # "max_iters", "target", "time_budget"
    wall_s: float = 0.0  # everything, evaluation and compilation included
    tokens_per_step: int = 0

    @property
    def tokens(self) -> int:
        return len(self.steps) * self.tokens_per_step

    def time_to(self, target: float) -> float | None:
        """Training seconds at the first evaluation with val loss <= target (None if none reached it)."""
        return next((t for t, v in zip(self.eval_train_s, self.val_loss, strict=True) if v <= target), None)

    def tokens_per_s(self) -> float:
        """Training characters per training second."""
        return self.tokens / self.train_s[-1] if self.train_s else float("nan")


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """n intra-op threads inside the block, the previous number after it (None: unchanged)."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _optimizer(model: nn.Module, config: CharTrainConfig) -> torch.optim.AdamW:
    """AdamW that decays the matrices and embeddings (dim >= 2) but not biases and norm gains (as nanoGPT)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas)


def train_char_model(
    model: nn.Module,
    train_data: Tensor,
    config: CharTrainConfig = NANOGPT_CPU,
    *,
    val_data: Tensor | None = None,
    val_windows: tuple[Tensor, Tensor] | None = None,
    callback: Callable[[TrainEvent], None] | None = None,
) -> History:
    """Train `model` (forward(idx, targets) -> (logits, loss)) on random windows of `train_data` (N,).

    Evaluation uses `val_windows` (x, y) if given, else `config.eval_iters * batch_size` windows of `val_data`
    drawn once (seed 0); with neither, there is no evaluation. It runs at step `first_eval`, every
    `eval_interval` steps after it, and after the last step. Stops after `max_iters` steps, at the first
    evaluation with val loss <= `target_val_loss`, or once the wall clock passes `time_budget_s` (checked
    after every step).
    """
    _check_ids("train_data", train_data, config.block_size)
    if val_windows is None and val_data is not None:
        val_windows = eval_batches(val_data, config.block_size, config.eval_iters * config.batch_size)
    if val_windows is None and config.target_val_loss is not None:
        raise ValueError("`target_val_loss` needs validation data: pass `val_data` or `val_windows`")
    if val_windows is not None:
        _checks.tensors(val_x=(val_windows[0], "E, T"), val_y=(val_windows[1], "E, T"))
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = _optimizer(model, config)
    step_fn = torch.compile(model) if config.compile else model
    history = History(tokens_per_step=config.batch_size * config.block_size)
    start = time.perf_counter()
    paused = 0.0  # seconds spent evaluating, taken off the training clock
    lr = lr_at(config, 0)

    def evaluate(step: int) -> bool:
        nonlocal paused
        t0 = time.perf_counter()
        loss = estimate_loss(model, *val_windows)
        train_s = t0 - start - paused
        history.eval_steps.append(step)
        history.val_loss.append(loss)
        history.eval_train_s.append(train_s)
        history.eval_tokens.append(step * history.tokens_per_step)
        paused += time.perf_counter() - t0
        if callback is not None:
            wall = time.perf_counter() - start
            callback(TrainEvent("eval", step, train_s, wall, step * history.tokens_per_step, loss, lr))
        return config.target_val_loss is not None and loss <= config.target_val_loss

    model.train()
    with _threads(config.num_threads):
        if val_windows is not None and config.first_eval == 0 and evaluate(0):
            history.stop_reason = "target"
        step = 0
        while not history.stop_reason:
            lr = lr_at(config, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = _get_batch(train_data, config.block_size, config.batch_size, generator)
            _, loss = step_fn(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            step += 1
            now = time.perf_counter()
            history.steps.append(step)
            history.train_loss.append(loss.item())
            history.lr.append(lr)
            history.train_s.append(now - start - paused)
            if callback is not None:
                tokens = step * history.tokens_per_step
                callback(TrainEvent("step", step, history.train_s[-1], now - start, tokens, loss.item(), lr))
            last = step >= config.max_iters
            over = config.time_budget_s is not None and time.perf_counter() - start >= config.time_budget_s
            due = step >= config.first_eval and (step - config.first_eval) % config.eval_interval == 0
            if val_windows is not None and (due or last or over) and evaluate(step):
                history.stop_reason = "target"
            elif last:
                history.stop_reason = "max_iters"
            elif over:
                history.stop_reason = "time_budget"
    history.wall_s = time.perf_counter() - start
    return history
