"""The ladder: GPT-2 turned into a modern model one change at a time, each rung trained on the same task (Lesson 12).

    Rung              one row: what it adds, the architecture (a ModernConfig), the optimizer ("adamw" | "muon")
    Run, RungResult   one run's two measurements; a rung's runs (one per seed), their means and its pace
    Pace              a rung's CPU time a training step, from short timings interleaved with the other rungs'
    Paired            a rung's per-seed differences from another rung's runs with the same seeds
    modern_ladder     the lesson's rungs: GPT-2, + RMSNorm, + RoPE, + SwiGLU, + GQA, + no biases, + QK-norm, + Muon
    token_ladder      four of them for GPT-2's tokens: GPT-2, + RoPE, the modern block (every change), + Muon
    compact_ids       token ids renumbered over the tokens that occur (a small corpus in GPT-2's 50,257 tokens)
    LadderSettings    the task's sizes and the training recipe every rung shares
    eval_batches      fixed validation windows, drawn once with their own seed (lesson 09's get_batch)
    estimate_loss     mean loss over those windows, in eval mode, without gradients
    bigram_floor      the loss of the bigram table counted from the training ids, on the same windows
    lr_factor         the schedule: linear warm-up, then 1 / sqrt(step), the same whenever a run stops
    build_rung        a rung's model, its weights drawn from a fixed seed
    rung_optimizers   its optimizers: AdamW, or Muon for the blocks' matrices and AdamW for the rest
    measure_paces     every rung's Pace; equal_seconds_steps: the steps each rung gets in GPT-2's CPU seconds
    train_rung        one run, measured after `steps` steps and after its equal-seconds steps
    run_ladder        every rung once per seed
    ladder_table      the results as text; ladder_chart: the same as a picture (fig, axes)

**Equal steps.** Every rung takes `settings.steps` optimizer steps, once per seed: a seed draws the initial
weights and the batches, the same for every rung, and every run is evaluated on the same validation windows. So
the runs of two rungs with the same seed are a pair — the same batches in the same order, the same initial draws
as far as the two models' shapes allow — and the difference between them is the change plus what is left of luck.
`Paired` reads them that way: the per-seed differences and how many seeds they point the same way in
(tests/benchmarks/bench_ladder_seeds.py runs eight seeds).

**Equal seconds.** Before training, `measure_paces` times a few steps of every rung, in this process's CPU time on
one thread, as the training then runs (the work a step does, whatever else the machine is running), round after
round with the rungs interleaved, so that a change in the machine's load falls on every rung alike; a rung's Pace is
the median and the middle half of its rounds. GPT-2's pace times `steps` is the budget, and a rung gets the steps
that fit in it at its own pace (a faster rung trains on past `steps`, up to `seconds_cap` times as many) — but only
where its range does not overlap GPT-2's: a difference in pace smaller than the measurement's own spread is no
difference, and such a rung gets GPT-2's steps. The learning rate follows a schedule that does not depend on where a
run stops, so both measurements come from one run. The paces are this machine's at this moment, so that column is
measured, never promised.

Shape legend: B batch, T time (block_size), V vocabulary, N length of an id sequence, E evaluation windows.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator
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
    "Pace",
    "Paired",
    "Rung",
    "Run",
    "RungResult",
    "TOKEN_SETTINGS",
    "bigram_floor",
    "build_rung",
    "compact_ids",
    "equal_seconds_steps",
    "estimate_loss",
    "eval_batches",
    "ladder_chart",
    "ladder_table",
    "lr_factor",
    "measure_paces",
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
    """The lesson's rungs, each adding one change to the one before, from `gpt2` (every switch at GPT-2's). From
    "+ no biases" on every switch is modern: those rungs are built from ModernBlocks (`modern_gpt.ModernGPT`)."""
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
    """The task and the recipe every rung shares. AdamW's betas (0.9, 0.99), weight decay 0.1 and clipping at 1.0
    are nanoGPT's for Tiny Shakespeare (its config/train_shakespeare_char.py sets β2; weight decay and clipping are
    its train.py's defaults, which that config keeps); its peak rate and schedule are not (nanoGPT: 1e-3 for a
    6-layer model, 100 warm-up steps, a cosine to 1e-4 over 5,000 steps). Neither rate was tuned for any rung."""

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
    pace_rounds: int = 7  # rounds of `measure_paces` (each times a few steps of every rung); 0: no equal seconds
    pace_steps: int = 3  # steps a rung is timed for in each round
    # torch's intra-op threads while the ladder times and trains (the caller's number is restored afterwards); None:
    # as the caller has them — the lesson's choice: a learner's machine has cores to spare, and a lesson never pins
    # them. The benchmarks pass one: on a busy machine a second thread spins while it waits for a core (a step then
    # measured 10 to 25 times its CPU time here), so the paces would be noise and the training slow. Timing and
    # training on the same threads make the equal-seconds budget the seconds the training takes.
    threads: int | None = None

    def __post_init__(self) -> None:
        _checks.positive_ints(steps=self.steps, batch_size=self.batch_size, eval_windows=self.eval_windows)
        _checks.positive_ints(eval_points=self.eval_points, pace_steps=self.pace_steps)
        _checks.int_between("warmup_steps", self.warmup_steps, 0, self.steps - 1, "fewer than `steps`")
        _checks.int_between("pace_rounds", self.pace_rounds, 0)
        if self.threads is not None:
            _checks.positive_int("threads", self.threads)
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


def bigram_floor(train_ids: Tensor, x: Tensor, y: Tensor, vocab_size: int) -> float:
    """The mean cross-entropy on windows x, y (E, T) of the bigram table counted from `train_ids` (N,), with
    add-one smoothing, as lesson 09 counts it: a model that sees only the previous token. A transformer that does not
    get below it has learned nothing a table of pairs could not hold."""
    _checks.tensor("train_ids", train_ids, "N", integer=True)
    _checks.tensors(x=(x, "E, T"), y=(y, "E, T"))
    _checks.positive_int("vocab_size", vocab_size)
    counts = torch.ones(vocab_size, vocab_size, dtype=torch.float64)  # add-one: every pair seen once more
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64), True)
    table = counts / counts.sum(dim=1, keepdim=True)  # (V, V): row a, the next token's frequencies after a
    return -table[x, y].log().mean().item()


@dataclass(frozen=True)
class Pace:
    """A rung's cost of a training step: this process's CPU milliseconds a step in each round of `measure_paces`;
    its median, and the middle half of the rounds (the quartiles) as its range."""

    rounds: tuple[float, ...]
    threads: int = 1  # torch's intra-op threads while it was timed

    @property
    def ms(self) -> float:
        """The median over the rounds."""
        return statistics.median(self.rounds)

    @property
    def low(self) -> float:
        return self._quartiles[0]

    @property
    def high(self) -> float:
        return self._quartiles[1]

    @property
    def _quartiles(self) -> tuple[float, float]:
        if len(self.rounds) == 1:
            return self.rounds[0], self.rounds[0]
        q1, _, q3 = statistics.quantiles(self.rounds, n=4, method="inclusive")
        return q1, q3

    def overlaps(self, other: Pace) -> bool:
        """Whether the two ranges overlap: then the two paces are not measurably different."""
        return self.low <= other.high and other.low <= self.high


@dataclass
class Run:
    """One run of one rung with one seed, measured after `steps` steps and after its equal-seconds steps."""

    seed: int
    steps: int  # the equal-steps measurement's steps
    val_loss: float = float("nan")  # validation loss after them
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, validation loss) up to `steps`
    seconds_steps: int | None = None  # the steps of the equal-seconds measurement (None: not measured)
    seconds_val_loss: float = float("nan")  # validation loss after them


@dataclass
class RungResult:
    """A rung's runs, one per seed, their means, and its pace (None when the paces were not measured)."""

    label: str
    n_params: int
    runs: list[Run] = field(default_factory=list)
    pace: Pace | None = None

    @property
    def val_loss(self) -> float:
        return statistics.fmean(r.val_loss for r in self.runs)

    @property
    def seconds_val_loss(self) -> float:
        return statistics.fmean(r.seconds_val_loss for r in self.runs)

    @property
    def seconds_steps(self) -> int | None:
        return self.runs[0].seconds_steps  # the same for every seed: it comes from the rung's pace

    @property
    def curve(self) -> list[tuple[int, float]]:
        """The validation curve, averaged over the seeds (every run is evaluated at the same steps)."""
        return [
            (step, statistics.fmean(r.curve[i][1] for r in self.runs)) for i, (step, _) in enumerate(self.runs[0].curve)
        ]


@dataclass(frozen=True)
class Paired:
    """`after`'s equal-steps losses minus `before`'s, seed by seed (both run with the same seeds, in one order)."""

    differences: tuple[float, ...]

    @classmethod
    def of(cls, after: RungResult, before: RungResult) -> Paired:
        if [r.seed for r in after.runs] != [r.seed for r in before.runs]:
            raise ValueError(f"{after.label!r} and {before.label!r} were not run with the same seeds")
        return cls(tuple(a.val_loss - b.val_loss for a, b in zip(after.runs, before.runs, strict=True)))

    @property
    def mean(self) -> float:
        return statistics.fmean(self.differences)

    @property
    def lower(self) -> int:
        """In how many seeds `after` is lower than `before`."""
        return sum(d < 0 for d in self.differences)

    @property
    def n(self) -> int:
        return len(self.differences)


def build_rung(
    rung: Rung, seed: int, baseline: Callable[[], nn.Module] | None = None, parts: ModernParts = COURSE_PARTS
) -> nn.Module:
    """The rung's model, its weights drawn after seeding torch with `seed`: `baseline()` when given, else
    ModernGPT(rung.config, parts) with GPT-2's initialisation (`gpt.init_gpt2`)."""
    torch.manual_seed(seed)  # the same initial draws for every rung
    if baseline is not None:
        return baseline()
    return init_gpt2(ModernGPT(rung.config, parts))


def rung_optimizers(
    model: nn.Module, rung: Rung, settings: LadderSettings, parts: ModernParts = COURSE_PARTS
) -> list[torch.optim.Optimizer]:
    """The rung's optimizers: one AdamW (decay on matrices and embeddings only), or Muon for the blocks' matrices
    (orthogonalised by `parts.newton_schulz`) and AdamW for the rest (`optimizers.muon_and_adamw`). Step every one
    of them each iteration."""
    if rung.optimizer == "muon":
        return muon_and_adamw(
            model, settings.muon_lr, settings.lr, settings.weight_decay, settings.betas, parts.newton_schulz
        )
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


class _Trainer:
    """One model's training step: the schedule applied to every optimizer's peak rates, a batch, the loss, the
    backward pass, clipping, the optimizers' steps."""

    def __init__(self, model: nn.Module, rung: Rung, settings: LadderSettings, parts: ModernParts) -> None:
        self.model, self.settings = model, settings
        self.optimizers = rung_optimizers(model, rung, settings, parts)
        self.peaks = [[group["lr"] for group in opt.param_groups] for opt in self.optimizers]

    def step(self, step: int, train_ids: Tensor, block_size: int, generator: torch.Generator) -> None:
        for opt, peak in zip(self.optimizers, self.peaks, strict=True):
            for group, lr in zip(opt.param_groups, peak, strict=True):
                group["lr"] = lr * lr_factor(step, self.settings.warmup_steps)
        x, y = get_batch(train_ids, block_size, self.settings.batch_size, generator)  # (B, T) each
        _, loss = self.model(x, y)
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.grad_clip)
        for opt in self.optimizers:
            opt.step()


def measure_paces(
    rungs: list[Rung],
    train_ids: Tensor,
    block_size: int,
    settings: LadderSettings,
    *,
    baseline: Callable[[], nn.Module] | None = None,
    parts: ModernParts = COURSE_PARTS,
    clock: Callable[[], float] = time.process_time,
) -> list[Pace]:
    """Every rung's Pace: `settings.pace_rounds` rounds, each timing `settings.pace_steps` training steps of every
    rung in turn (after one step each that is not timed: first calls allocate), in `clock`'s seconds — this
    process's CPU time, which counts the work done and not the time spent waiting for a core on a busy machine —
    on `settings.threads` threads (the caller's number is restored afterwards). The models are built as
    `run_ladder` builds them (seed 0) and thrown away afterwards."""
    _checks.positive_int("settings.pace_rounds", settings.pace_rounds)
    trainers = [
        _Trainer(build_rung(rung, 0, baseline if i == 0 else None, parts), rung, settings, parts)
        for i, rung in enumerate(rungs)
    ]
    generator = torch.Generator().manual_seed(0)
    rounds: list[list[float]] = [[] for _ in rungs]
    with _threads(settings.threads) as used:
        for trainer in trainers:
            trainer.step(0, train_ids, block_size, generator)
        for _ in range(settings.pace_rounds):
            for trainer, times in zip(trainers, rounds, strict=True):
                started = clock()
                for step in range(settings.pace_steps):
                    trainer.step(step, train_ids, block_size, generator)
                times.append(1000 * (clock() - started) / settings.pace_steps)
    return [Pace(tuple(times), used) for times in rounds]


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[int]:
    """torch's intra-op threads set to `n` (None: left as they are) inside, the caller's number restored after,
    also on an exception; yields the number in use."""
    before = torch.get_num_threads()
    try:
        if n is not None:
            torch.set_num_threads(n)
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def equal_seconds_steps(paces: list[Pace], settings: LadderSettings) -> list[int]:
    """The steps of each rung's equal-seconds measurement: those that fit, at its median pace, in the CPU time the
    first rung needs for `settings.steps` (at most `seconds_cap` times `steps`, at least 1) — or exactly `steps`
    when its pace's range overlaps the first rung's, where the measurement cannot tell the two apart."""
    first = paces[0]
    budget_ms = settings.steps * first.ms
    most = int(settings.seconds_cap * settings.steps)
    # + 1e-9: a step that fits exactly must not be lost to the rounding of clock readings
    fits = [max(1, min(most, math.floor(budget_ms / pace.ms + 1e-9))) for pace in paces]
    return [settings.steps if pace.overlaps(first) else n for pace, n in zip(paces, fits, strict=True)]


def train_rung(
    model: nn.Module,
    rung: Rung,
    train_ids: Tensor,
    val_windows: tuple[Tensor, Tensor],
    settings: LadderSettings,
    seed: int = 0,
    seconds_steps: int | None = None,
    parts: ModernParts = COURSE_PARTS,
) -> Run:
    """Train `model` for `settings.steps` steps, and on to `seconds_steps` when that is more; the run holds the
    validation loss after `steps` (and the curve up to there, `settings.eval_points` evaluations) and after
    `seconds_steps` (None: not measured).

    Batches come from a generator seeded with `seed` (every rung run with that seed sees the same windows in the
    same order); the learning rate follows `lr_factor` (each optimizer's peak scaled by the same factor); the
    gradient norm is clipped."""
    n, block_size = settings.steps, val_windows[0].shape[1]
    last = n if seconds_steps is None else max(n, seconds_steps)
    eval_at = {round(n * (k + 1) / settings.eval_points) for k in range(settings.eval_points)}
    generator = torch.Generator().manual_seed(seed)
    trainer = _Trainer(model, rung, settings, parts)
    run = Run(seed, n, seconds_steps=seconds_steps)
    model.train()
    for step in range(last + 1):
        loss = estimate_loss(model, *val_windows) if step in eval_at or step == seconds_steps else None
        if step in eval_at:
            run.curve.append((step, loss))
        if step == n:
            run.val_loss = loss
        if step == seconds_steps:
            run.seconds_val_loss = loss
        if step < last:
            trainer.step(step, train_ids, block_size, generator)
    return run


def run_ladder(
    rungs: list[Rung],
    train_ids: Tensor,
    val_ids: Tensor,
    settings: LadderSettings = LadderSettings(),
    *,
    baseline: Callable[[], nn.Module] | None = None,
    parts: ModernParts = COURSE_PARTS,
    progress: Callable[[RungResult], None] | None = None,
    clock: Callable[[], float] = time.process_time,
) -> list[RungResult]:
    """Measure every rung's pace (`measure_paces`, unless `settings.pace_rounds` is 0), then train every rung once
    per seed, measuring each run after `settings.steps` steps and after its equal-seconds steps (see the module's
    docstring). `baseline()`, if given, builds the first rung's model instead of ModernGPT(its config) (the
    learner's own GPT: it must compute what that config describes); `parts`: whose rms_norm, rope_attention,
    SwiGLU, repeat_kv, ModernBlock and newton_schulz the other rungs run (the learner's, in the lesson).
    `progress(result)` hears of every rung as it finishes. All of it runs on `settings.threads` threads."""
    if not rungs:
        raise ValueError("`rungs` is empty: the ladder needs at least its first rung")
    with _threads(settings.threads):
        return _run_ladder(rungs, train_ids, val_ids, settings, baseline, parts, progress, clock)


def _run_ladder(rungs, train_ids, val_ids, settings, baseline, parts, progress, clock) -> list[RungResult]:
    block_size = rungs[0].config.context_length
    val_windows = eval_batches(val_ids, block_size, settings.eval_windows, seed=0)  # (E, T)
    paces: list[Pace | None] = [None] * len(rungs)
    budgets: list[int | None] = [None] * len(rungs)
    if settings.pace_rounds:
        paces = measure_paces(rungs, train_ids, block_size, settings, baseline=baseline, parts=parts, clock=clock)
        budgets = equal_seconds_steps(paces, settings)
    results: list[RungResult] = []
    for number, (rung, pace, seconds_steps) in enumerate(zip(rungs, paces, budgets, strict=True)):
        result = None
        for seed in settings.seeds:
            model = build_rung(rung, seed, baseline if number == 0 else None, parts)
            if result is None:
                result = RungResult(rung.label, sum(p.numel() for p in model.parameters()), pace=pace)
            result.runs.append(train_rung(model, rung, train_ids, val_windows, settings, seed, seconds_steps, parts))
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def ladder_table(results: list[RungResult], floor: float | None = None) -> str:
    """The ladder as text: one row per rung — its parameters; its pace (CPU ms a step: median, range); each seed's
    equal-steps loss, their mean, and the change from the rung above paired by seed (the mean of the per-seed
    differences, and in how many seeds the rung is lower); its equal-seconds steps and loss (the mean over the
    seeds) and that loss's change from the first rung — then what the columns mean, and `floor` (the bigram
    table's loss, `bigram_floor`) when given."""
    first, seeds = results[0], [r.seed for r in results[0].runs]
    one_seed = len(seeds) == 1
    timed = first.pace is not None
    per_seed = " ".join(f"{f'seed {s}':>7}" for s in seeds)
    pace_head = f" {'CPU ms/step':>16}" if timed else ""
    seconds_head = f" | equal CPU seconds: {'steps':>5} {'mean':>6} {'change':>7}" if timed else ""
    lines = [
        f"{'rung':<12} {'params':>7}{pace_head} | equal steps: {per_seed} {'mean':>6} {'vs above':>8} "
        f"{'lower in':>8}{seconds_head}"
    ]
    for above, r in zip([None, *results], results, strict=False):
        losses = " ".join(f"{run.val_loss:>7.3f}" for run in r.runs)
        pace = f" {r.pace.ms:>6.1f} ({r.pace.low:.0f}-{r.pace.high:.0f})".ljust(17) if timed else ""
        paired = Paired.of(r, above) if above is not None else None
        change = f"{paired.mean:>+8.3f}" if paired else f"{'':>8}"
        lower = f"{'':>8}" if paired is None or one_seed else f"{f'{paired.lower} of {paired.n}':>8}"
        seconds = ""
        if timed:
            mark = "~" if r is not first and r.pace.overlaps(first.pace) else " "
            seconds = (
                f" | {'':>18} {r.seconds_steps:>5}{mark}{r.seconds_val_loss:>6.3f} "
                f"{r.seconds_val_loss - first.seconds_val_loss:>+7.3f}"
            )
        lines.append(
            f"{r.label:<12} {r.n_params:>7,}{pace} | {'':>12} {losses} {r.val_loss:>6.3f} {change} {lower}{seconds}"
        )
    if one_seed:
        lines.append(f"one seed ({seeds[0]}): vs above is that seed's difference; nothing here says how large luck is")
    else:
        lines.append(
            f"vs above: the mean over the {len(seeds)} seeds of (this rung's run - the run above with the same seed: "
            "the same batches, the same initial draws where the shapes allow); lower in: the seeds where it is lower"
        )
    if timed:
        lines.append(
            f"CPU ms/step: this process's CPU time a step on {_thread_count(first.pace.threads)}, the median (and the "
            f"middle half) of {len(first.pace.rounds)} rounds interleaved with the other rungs; ~: that range overlaps "
            f"{first.label}'s, so the rung is not measurably faster or slower here, and its equal-seconds run is its "
            "equal-steps run"
        )
    if floor is not None:
        lines.append(
            f"bigram floor (the bigram table counted from the training text, on these windows): {floor:.3f}; "
            f"{first.label}'s mean minus the floor: {first.val_loss - floor:+.3f}"
        )
    return "\n".join(lines)


def _thread_count(n: int) -> str:
    return "one thread" if n == 1 else f"{n} threads"


def ladder_chart(
    results: list[RungResult], title: str = "", unit: str = "character", floor: float | None = None
) -> tuple[plt.Figure, list[plt.Axes]]:
    """Left: validation loss during each rung's equal-steps runs (the mean over the seeds). Right: each rung's
    final loss at equal steps and at equal seconds (bars: the means; dots: the seeds), the first rung's as a dashed
    line, and `floor` (the bigram table's loss) as a dotted one on both sides when given. `unit`: what the loss is
    per (the y label). Returns (fig, [ax_curves, ax_bars])."""
    fig, (ax_curves, ax_bars) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    for r in results:
        steps, losses = zip(*r.curve, strict=True)
        ax_curves.plot(steps, losses, "o-", markersize=3, label=r.label)
    if floor is not None:
        ax_curves.axhline(floor, color="black", linestyle=":", linewidth=1.2, label=f"bigram floor {floor:.3f}")
    ax_curves.set(xlabel="optimizer step", ylabel=f"validation loss (nats per {unit})", title="Equal steps: curves")
    ax_curves.legend(fontsize=8)
    timed = results[0].runs[0].seconds_steps is not None
    budgets = [("equal steps", lambda r: r.val_loss, lambda run: run.val_loss)]
    if timed:
        budgets.append(("equal CPU seconds", lambda r: r.seconds_val_loss, lambda run: run.seconds_val_loss))
    height = 0.76 / len(budgets)
    for k, (label, mean, each) in enumerate(budgets):
        offset = (k - (len(budgets) - 1) / 2) * height
        rows = [i + offset for i in range(len(results))]
        ax_bars.barh(rows, [mean(r) for r in results], height, label=label, zorder=1)
        for row, r in zip(rows, results, strict=True):
            ax_bars.plot([each(run) for run in r.runs], [row] * len(r.runs), "o", color="black", markersize=2.5)
    ax_bars.axvline(results[0].val_loss, color="gray", linestyle="--", linewidth=1)
    every = [each(run) for _, _, each in budgets for r in results for run in r.runs]
    if floor is not None:
        ax_bars.axvline(floor, color="black", linestyle=":", linewidth=1.2, label="bigram floor")
        every.append(floor)
    ax_bars.set_yticks(list(range(len(results))), labels=[r.label for r in results])
    ax_bars.invert_yaxis()  # the first rung on top, as in the table
    low, high = min(every), max(every)
    ax_bars.set_xlim(low - 0.1 * (high - low) - 0.02, high + 0.1 * (high - low) + 0.02)
    ax_bars.set(xlabel="validation loss after the run (lower is better); dots: each seed", title="Both budgets")
    ax_bars.legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    return fig, [ax_curves, ax_bars]
