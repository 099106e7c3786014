"""The ladder: GPT-2 turned into a modern model one change at a time, each rung trained on the same task (Lesson 12).

    Rung              one row: what it adds, the architecture (a ModernConfig), the optimizer ("adamw" | "muon")
    Run, RungResult   one run's two measurements; a rung's runs (one per seed) and their means
    modern_ladder     the lesson's rungs: GPT-2, + RMSNorm, + RoPE, + SwiGLU, + GQA, + no biases, + QK-norm, + Muon
    token_ladder      four of them for GPT-2's tokens: GPT-2, + RoPE, the modern block (every change), + Muon
    compact_ids       token ids renumbered over the tokens that occur (a small corpus in GPT-2's 50,257 tokens)
    LadderSettings    the task's sizes and the training recipe every rung shares
    eval_batches      fixed validation windows, drawn once with their own seed (lesson 09's get_batch)
    estimate_loss     mean loss over those windows, in eval mode, without gradients
    lr_factor         the schedule: linear warm-up, then 1 / sqrt(step), the same whenever a run stops
    build_rung        a rung's model, its weights drawn from a fixed seed
    rung_optimizers   its optimizers: AdamW, or Muon for the blocks' matrices and AdamW for the rest
    train_rung        one run, measured after `steps` steps and after a budget of training seconds
    run_ladder        every rung once per seed, the first rung's seconds being everyone's budget
    ladder_table      the results as text; ladder_chart: the same as a picture (fig, axes)

**Equal steps.** Every rung takes `settings.steps` optimizer steps, once per seed: a seed draws the initial
weights and the batches, the same for every rung, and every run is evaluated on the same validation windows. The
difference between two rungs is the change plus the luck of the draw; the runs with other seeds show how large
that luck is (tests/benchmarks/bench_ladder_seeds.py runs more seeds).

**Equal seconds.** The first rung (GPT-2) needs S seconds of training for its steps. Every other rung is measured
again after the last step that fits in S seconds of its own training (a faster rung trains on past `steps`, up to
`seconds_cap` times as many). The learning rate follows a schedule that does not depend on where a run stops, so both
measurements come from one run. The seconds are this machine's, at this moment: another machine, or this one
busier, gives other step counts, so that column is measured, never promised.

Shape legend: B batch, T time (block_size), V vocabulary, N length of an id sequence, E evaluation windows.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.char_lm import get_batch
from course_lib.gpt import init_gpt2
from course_lib.modern_gpt import COURSE_PARTS, ModernConfig, ModernGPT, ModernParts
from course_lib.optimizers import muon_and_adamw

__all__ = [
    "LadderSettings",
    "Rung",
    "Run",
    "RungResult",
    "TOKEN_SETTINGS",
    "build_rung",
    "compact_ids",
    "estimate_loss",
    "eval_batches",
    "ladder_chart",
    "ladder_table",
    "lr_factor",
    "modern_ladder",
    "run_ladder",
    "rung_optimizers",
    "token_ladder",
    "train_rung",
]


@dataclass(frozen=True)
class Rung:
    """One row of the ladder: what it adds to the row above, its architecture and its optimizer."""

    label: str
    config: ModernConfig
    optimizer: str = "adamw"  # "adamw", or "muon": Muon for the blocks' matrices and AdamW for the rest

    def __post_init__(self) -> None:
        _checks.one_of("optimizer", self.optimizer, ("adamw", "muon"))


def modern_ladder(gpt2: ModernConfig) -> list[Rung]:
    """The lesson's rungs, each adding one change to the one before, from `gpt2` (every switch at GPT-2's)."""
    rms = gpt2.replace(norm="rms")
    rope = rms.replace(position="rope")
    swiglu = rope.replace(mlp="swiglu")
    gqa = swiglu.replace(n_kv_heads=max(1, gpt2.n_heads // 2))  # two query heads per key/value head
    no_bias = gqa.replace(bias=False)
    qk_norm = no_bias.replace(qk_norm=True)
    return [
        Rung("GPT-2", gpt2),
        Rung("+ RMSNorm", rms),
        Rung("+ RoPE", rope),
        Rung("+ SwiGLU", swiglu),
        Rung("+ GQA", gqa),
        Rung("+ no biases", no_bias),
        Rung("+ QK-norm", qk_norm),
        Rung("+ Muon", qk_norm, optimizer="muon"),
    ]


def token_ladder(gpt2: ModernConfig) -> list[Rung]:
    """Four rungs of `modern_ladder`, for a task where a step costs more (GPT-2's tokens): GPT-2; + RoPE (with
    RMSNorm, as in the full ladder); the modern block (every change, trained with AdamW: the "+ QK-norm" rung); and
    that block trained with Muon."""
    full = modern_ladder(gpt2)
    return [full[0], full[2], Rung("modern block", full[-2].config), full[-1]]


def compact_ids(ids: Tensor) -> tuple[Tensor, Tensor]:
    """(`ids` renumbered 0..K-1 over the K distinct ids that occur, in the order of the original ids; those K
    original ids, so that `kept[compact] == ids`). A model of a small text in GPT-2's tokens then needs an embedding
    row (and an output) for K tokens, not 50,257: the rows of tokens that never occur would only learn never to be
    predicted. ids: (N,) integers -> ((N,) long, (K,) long)."""
    _checks.tensor("ids", ids, "N", integer=True)
    kept, compact = torch.unique(ids, sorted=True, return_inverse=True)
    return compact.long(), kept.long()


@dataclass(frozen=True)
class LadderSettings:
    """The task and the recipe every rung shares (AdamW's settings are nanoGPT's for Tiny Shakespeare)."""

    steps: int = 300  # optimizer steps of the equal-steps measurement
    batch_size: int = 16  # windows per step
    lr: float = 3e-3  # AdamW's peak learning rate
    warmup_steps: int = 30  # then the rate falls like 1 / sqrt(step): a third of the peak at 300 steps
    weight_decay: float = 0.1  # AdamW, on matrices and embeddings only
    betas: tuple[float, float] = (0.9, 0.99)
    muon_lr: float = 0.02  # Muon's peak learning rate (Jordan's default), on the same schedule
    grad_clip: float = 1.0
    eval_windows: int = 256  # validation windows, drawn once (seed 0): the same for every rung and evaluation
    eval_points: int = 4  # evaluations up to `steps` (for the curves), the last one after step `steps`
    seeds: tuple[int, ...] = (0, 1)  # one run per seed; a seed fixes a run's initial weights and its batches
    seconds_cap: float = 2.0  # in the equal-seconds budget a faster rung trains on to at most this many x `steps`

    def __post_init__(self) -> None:
        _checks.positive_ints(steps=self.steps, batch_size=self.batch_size, eval_windows=self.eval_windows)
        _checks.positive_ints(eval_points=self.eval_points)
        _checks.int_between("warmup_steps", self.warmup_steps, 0, self.steps - 1, "fewer than `steps`")
        if not self.seconds_cap >= 1:
            raise ValueError(f"`seconds_cap` must be 1 or more (x `steps`), got {self.seconds_cap!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"`seeds` must be one or more different ints, got {self.seeds!r}")


# The lesson's ladder on GPT-2's tokens (2 layers of 64, 32 tokens of context): a step costs more than a character
# step (the output layer scores 11,706 tokens, not 65 characters), so one seed, 200 steps, and no training on past
# them in the equal-seconds budget.
TOKEN_SETTINGS = LadderSettings(steps=200, warmup_steps=20, eval_windows=128, seeds=(0,), seconds_cap=1.0)


def eval_batches(data: Tensor, block_size: int, n_windows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """`n_windows` random windows of `data` (N,) drawn once with their own seed -> x, y both (E, T): lesson 09's
    `get_batch` with a generator seeded `seed`.

    Evaluating on the same windows at every evaluation (and for every rung) removes the batch-to-batch noise from
    the comparison; only the model changes."""
    return get_batch(data, block_size, n_windows, torch.Generator().manual_seed(seed))


@torch.no_grad()
def estimate_loss(model: nn.Module, x: Tensor, y: Tensor, chunk: int = 256) -> float:
    """Mean cross-entropy per token of `model` on windows x, y (E, T), in eval mode, without gradients.

    The windows are run `chunk` at a time (fewer, larger matrix products than the training batch size)."""
    _checks.tensors(x=(x, "E, T"), y=(y, "E, T"))
    _checks.positive_int("chunk", chunk)
    was_training = model.training
    model.eval()
    total = 0.0
    try:
        for start in range(0, len(x), chunk):
            logits, _ = model(x[start : start + chunk])  # (e, T, V)
            total += F.cross_entropy(logits.flatten(0, 1), y[start : start + chunk].flatten(), reduction="sum").item()
    finally:
        model.train(was_training)
    return total / y.numel()


@dataclass
class Run:
    """One run of one rung with one seed, measured after `steps` steps and after a budget of seconds."""

    seed: int
    steps: int  # the equal-steps measurement's steps
    val_loss: float = float("nan")  # validation loss after them
    train_s: float = float("nan")  # training seconds they took (evaluation excluded)
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, validation loss) up to `steps`
    seconds_steps: int | None = None  # steps that fit in the budget, at this run's pace
    seconds_val_loss: float = float("nan")  # validation loss after them
    seconds_train_s: float = float("nan")  # the training seconds they took (at most the budget)


@dataclass
class RungResult:
    """A rung's runs, one per seed, and their means."""

    label: str
    n_params: int
    runs: list[Run] = field(default_factory=list)

    @property
    def val_loss(self) -> float:
        return statistics.fmean(r.val_loss for r in self.runs)

    @property
    def seconds_val_loss(self) -> float:
        return statistics.fmean(r.seconds_val_loss for r in self.runs)

    @property
    def spread(self) -> float:
        """Largest minus smallest equal-steps loss over the seeds: how far luck alone moved this rung."""
        losses = [r.val_loss for r in self.runs]
        return max(losses) - min(losses)

    @property
    def ms_per_step(self) -> float:
        return 1000 * sum(r.train_s for r in self.runs) / sum(r.steps for r in self.runs)

    @property
    def seconds_steps(self) -> float:
        return statistics.fmean(r.seconds_steps for r in self.runs)

    @property
    def curve(self) -> list[tuple[int, float]]:
        """The validation curve, averaged over the seeds (every run is evaluated at the same steps)."""
        return [
            (step, statistics.fmean(r.curve[i][1] for r in self.runs)) for i, (step, _) in enumerate(self.runs[0].curve)
        ]


def build_rung(
    rung: Rung, seed: int, baseline: Callable[[], nn.Module] | None = None, parts: ModernParts = COURSE_PARTS
) -> nn.Module:
    """The rung's model, its weights drawn after seeding torch with `seed`: `baseline()` when given, else
    ModernGPT(rung.config, parts) with GPT-2's initialisation (`gpt.init_gpt2`)."""
    torch.manual_seed(seed)  # the same initial draws for every rung
    if baseline is not None:
        return baseline()
    return init_gpt2(ModernGPT(rung.config, parts))


def rung_optimizers(model: nn.Module, rung: Rung, settings: LadderSettings) -> list[torch.optim.Optimizer]:
    """The rung's optimizers: one AdamW (decay on matrices and embeddings only), or Muon for the blocks' matrices
    and AdamW for the rest (`optimizers.muon_and_adamw`). Step every one of them each iteration."""
    if rung.optimizer == "muon":
        return muon_and_adamw(model, settings.muon_lr, settings.lr, settings.weight_decay, settings.betas)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": settings.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return [torch.optim.AdamW(groups, lr=settings.lr, betas=settings.betas)]


def lr_factor(step: int, warmup_steps: int) -> float:
    """The schedule every rung follows, as a fraction of the peak: a linear warm-up, then 1 / sqrt(step).

    It does not depend on when the run ends (an "anytime" schedule), so the loss a run shows after any step is
    the loss of a run that was meant to stop there: the equal-seconds point of a slower rung is not penalised
    for a decay it never reached, as it would be under a cosine planned for more steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return (max(warmup_steps, 1) / (step + 1)) ** 0.5


@dataclass
class _Clock:
    seconds: float = 0.0  # training only: evaluation is paused out
    last_step: float = 0.0  # how long the latest step took: will the next one fit in a budget?


def train_rung(
    model: nn.Module,
    rung: Rung,
    train_ids: Tensor,
    val_windows: tuple[Tensor, Tensor],
    settings: LadderSettings,
    seed: int = 0,
    budget_s: float | None = None,
) -> Run:
    """Train `model` for `settings.steps` steps and, with `budget_s`, for as many steps as fit in that many
    training seconds (at most `settings.seconds_cap` times `steps`); the run holds the validation loss at both
    points.

    Batches come from a generator seeded with `seed` (every rung run with that seed sees the same windows); the
    learning rate follows `lr_factor` (each optimizer's peak scaled by the same factor); the gradient norm is
    clipped. Evaluations (at `settings.eval_points` points up to `steps`) are paused out of the clock."""
    n, block_size = settings.steps, val_windows[0].shape[1]
    eval_at = {round(n * (k + 1) / settings.eval_points) for k in range(settings.eval_points)}
    generator = torch.Generator().manual_seed(seed)
    optimizers = rung_optimizers(model, rung, settings)
    peaks = [[group["lr"] for group in opt.param_groups] for opt in optimizers]
    run, clock, step = Run(seed, n), _Clock(), 0
    model.train()
    while True:
        if step in eval_at:
            run.curve.append((step, estimate_loss(model, *val_windows)))
        if step == n:
            run.val_loss, run.train_s = run.curve[-1][1], clock.seconds
        # without a budget, the budget is this run's own time for `steps` steps
        most = n if budget_s is None else int(settings.seconds_cap * n)
        fits = step < most and (budget_s is None or clock.seconds + clock.last_step <= budget_s)
        if not fits and run.seconds_steps is None:  # the next step would not fit in the budget: measure here
            loss = run.val_loss if step == n else estimate_loss(model, *val_windows)
            run.seconds_steps, run.seconds_val_loss, run.seconds_train_s = step, loss, clock.seconds
        if step >= n and run.seconds_steps is not None:
            return run
        started = time.perf_counter()
        for opt, peak in zip(optimizers, peaks, strict=True):
            for group, lr in zip(opt.param_groups, peak, strict=True):
                group["lr"] = lr * lr_factor(step, settings.warmup_steps)
        x, y = get_batch(train_ids, block_size, settings.batch_size, generator)  # (B, T) each
        _, loss = model(x, y)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        for opt in optimizers:
            opt.step()
        clock.last_step = time.perf_counter() - started
        clock.seconds += clock.last_step
        step += 1


def run_ladder(
    rungs: list[Rung],
    train_ids: Tensor,
    val_ids: Tensor,
    settings: LadderSettings = LadderSettings(),
    *,
    baseline: Callable[[], nn.Module] | None = None,
    parts: ModernParts = COURSE_PARTS,
    progress: Callable[[RungResult], None] | None = None,
) -> list[RungResult]:
    """Train every rung once per seed, measuring each run after `settings.steps` steps and after the training
    seconds the first rung's run with the same seed needed for them (see the module's docstring). `baseline()`, if
    given, builds the first rung's model instead of ModernGPT(its config) (the learner's own GPT: it must compute
    what that config describes); `parts`, whose rms_norm, rope_attention, SwiGLU and repeat_kv the other rungs are
    built from (the learner's, in the lesson). `progress(result)` hears of every rung as it finishes."""
    if not rungs:
        raise ValueError("`rungs` is empty: the ladder needs at least its first rung")
    val_windows = eval_batches(val_ids, rungs[0].config.context_length, settings.eval_windows, seed=0)  # (E, T)
    results: list[RungResult] = []
    for number, rung in enumerate(rungs):
        result = None
        for k, seed in enumerate(settings.seeds):
            model = build_rung(rung, seed, baseline if number == 0 else None, parts)
            if result is None:
                result = RungResult(rung.label, sum(p.numel() for p in model.parameters()))
            budget = results[0].runs[k].train_s if results else None  # the first rung's seconds with this seed
            result.runs.append(train_rung(model, rung, train_ids, val_windows, settings, seed, budget))
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def ladder_table(results: list[RungResult]) -> str:
    """The ladder as text: one row per rung (each seed's equal-steps loss, their mean, its change from the first
    rung; the equal-seconds steps and loss, both means over the seeds, and that change), then the largest spread
    between the seeds of one rung."""
    first, seeds = results[0], [r.seed for r in results[0].runs]
    per_seed = " ".join(f"{f'seed {s}':>7}" for s in seeds)
    lines = [
        f"{'rung':<12} {'params':>7} {'ms/step':>7} | equal steps: {per_seed} {'mean':>6} {'change':>7} | "
        f"equal seconds: {'steps':>5} {'mean':>6} {'change':>7}"
    ]
    for r in results:
        losses = " ".join(f"{run.val_loss:>7.3f}" for run in r.runs)
        lines.append(
            f"{r.label:<12} {r.n_params:>7,} {r.ms_per_step:>7.1f} | {'':>12} {losses} {r.val_loss:>6.3f} "
            f"{r.val_loss - first.val_loss:>+7.3f} | {'':>14} {r.seconds_steps:>5.0f} {r.seconds_val_loss:>6.3f} "
            f"{r.seconds_val_loss - first.seconds_val_loss:>+7.3f}"
        )
    widest = max(results, key=lambda r: r.spread)
    lines.append(f"largest difference between the seeds of one rung: {widest.spread:.3f} ({widest.label})")
    return "\n".join(lines)


def ladder_chart(
    results: list[RungResult], title: str = "", unit: str = "character"
) -> tuple[plt.Figure, list[plt.Axes]]:
    """Left: validation loss during each rung's equal-steps runs (the mean over the seeds). Right: each rung's
    final loss at equal steps and at equal seconds (bars: the means; dots: the seeds), the first rung's as a dashed
    line. `unit`: what the loss is per (the y label). Returns (fig, [ax_curves, ax_bars])."""
    fig, (ax_curves, ax_bars) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    for r in results:
        steps, losses = zip(*r.curve, strict=True)
        ax_curves.plot(steps, losses, "o-", markersize=3, label=r.label)
    ax_curves.set(xlabel="optimizer step", ylabel=f"validation loss (nats per {unit})", title="Equal steps: curves")
    ax_curves.legend(fontsize=8)
    height = 0.38
    for offset, label, mean, each in (
        (-height / 2, "equal steps", lambda r: r.val_loss, lambda run: run.val_loss),
        (height / 2, "equal seconds", lambda r: r.seconds_val_loss, lambda run: run.seconds_val_loss),
    ):
        rows = [i + offset for i in range(len(results))]
        ax_bars.barh(rows, [mean(r) for r in results], height, label=label, zorder=1)
        for row, r in zip(rows, results, strict=True):
            ax_bars.plot([each(run) for run in r.runs], [row] * len(r.runs), "o", color="black", markersize=2.5)
    ax_bars.axvline(results[0].val_loss, color="gray", linestyle="--", linewidth=1)
    ax_bars.set_yticks(list(range(len(results))), labels=[r.label for r in results])
    ax_bars.invert_yaxis()  # the first rung on top, as in the table
    every = [run.val_loss for r in results for run in r.runs] + [
        run.seconds_val_loss for r in results for run in r.runs
    ]
    low, high = min(every), max(every)
    ax_bars.set_xlim(low - 0.1 * (high - low) - 0.02, high + 0.1 * (high - low) + 0.02)
    ax_bars.set(xlabel="validation loss after the run (lower is better); dots: each seed", title="Both budgets")
    ax_bars.legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    return fig, [ax_curves, ax_bars]
