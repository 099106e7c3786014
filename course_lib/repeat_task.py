"""Lesson 13's task and model: text in which a stretch repeats, and a transformer made of attention alone.

A window of Tiny Shakespeare in which the first `period` characters come twice before the text carries on: the
first copy can be guessed only as well as English allows, the second can be copied, by a model that finds where
the current character stood before and reads what came after it there. The period is drawn per window, so no
fixed look-back distance does the job: the model has to find the earlier copy by what it holds. Half the windows
(`random_fraction`) are random characters instead of text, with the same repeat: there nothing but the repeat can
be predicted, and that is what makes the copying heads form in a short stretch of training (see lesson 13 and
tests/benchmarks/RESULTS_induction_seeds.md).

    repeat_batch          (x, y) training windows, each with its own period (lesson 09's get_batch, repeated)
    repeated_text         windows of text whose second half repeats the first, for measuring
    AttentionOnlyBlock    x + attn(ln1(x)): a block without the feed-forward, so every step is an attention head
    attention_only_gpt    lesson 09's GPT with those blocks, built on any MultiHeadAttention class (yours too)
    RepeatSettings        the lesson's sizes and training settings, in one frozen object (its benchmark's too)
    Checkpoint, train_with_checkpoints   AdamW on repeat_batch, the weights copied every few steps
    loss_per_position     the mean loss at each position of a batch of sequences

Shape legend: B batch, T time, C d_model channels, V vocabulary.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.gpt import GPT, init_gpt2
from course_lib.multihead import MultiHeadAttention

__all__ = [
    "AttentionOnlyBlock",
    "Checkpoint",
    "RepeatSettings",
    "attention_only_gpt",
    "loss_per_position",
    "repeat_batch",
    "repeated_text",
    "train_with_checkpoints",
]


def repeat_batch(
    data: Tensor,
    batch_size: int,
    context_length: int,
    periods: tuple[int, int],
    generator: torch.Generator | None = None,
    random_fraction: float = 0.0,
    vocab_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Training windows in which a stretch repeats: x, y (batch_size, context_length), y shifted by one.

    Lesson 13. Each row starts at a random place of `data` (N,); its first `period` ids (a period drawn per row from
    periods[0]..periods[1]) are followed by themselves once more, and then the text carries on from there. With
    `random_fraction` > 0, each row is, with that probability, ids drawn uniformly from 0..vocab_size-1 instead of
    text (repeated the same way).
    """
    _checks.tensor("data", data, "N", integer=True)
    _checks.positive_ints(batch_size=batch_size, context_length=context_length)
    low, high = periods
    _checks.int_between("periods[0]", low, 1, note="at least one character repeats")
    _checks.int_between("periods[1]", high, low, (context_length + 1) // 2, note="two copies fit in a window")
    _checks.probability("random_fraction", random_fraction)
    n = context_length + 1  # one more for the targets
    starts = torch.randint(len(data) - n, (batch_size,), generator=generator)  # (B,)
    windows = data[starts[:, None] + torch.arange(n)]  # (B, n)
    period = torch.randint(low, high + 1, (batch_size, 1), generator=generator)  # (B, 1)
    if random_fraction > 0:
        _checks.positive_int("vocab_size", vocab_size)
        noise = torch.randint(vocab_size, (batch_size, n), generator=generator)  # (B, n)
        chosen = torch.rand(batch_size, 1, generator=generator) < random_fraction  # (B, 1)
        windows = torch.where(chosen, noise, windows)
    t = torch.arange(n)  # (n,)
    # Position t reads the window at t until the first copy ends, then at t - period: the copy, and after it the
    # text that followed the first copy.
    rows = windows.gather(1, torch.where(t < period, t, t - period))  # (B, n)
    return rows[:, :-1], rows[:, 1:]


def repeated_text(data: Tensor, n: int, period: int, generator: torch.Generator | None = None) -> Tensor:
    """`n` windows of `period` ids of `data`, each followed by itself: (n, 2 * period). Lesson 13."""
    _checks.tensor("data", data, "N", integer=True)
    _checks.positive_ints(n=n, period=period)
    starts = torch.randint(len(data) - period, (n,), generator=generator)  # (n,)
    first = data[starts[:, None] + torch.arange(period)]  # (n, period)
    return torch.cat([first, first], dim=1)  # (n, 2 * period)


class AttentionOnlyBlock(nn.Module):
    """A transformer block without its feed-forward layer: x + attn(ln1(x)) (pre-LN, as GPT-2's block).

    Lesson 13. `attention` is the attention class, called as `attention(d_model, n_heads, dropout=dropout,
    causal=True)`: lesson 05's MultiHeadAttention, yours or the course's. With no feed-forward anywhere, everything
    the model computes beyond its embeddings passes through an attention head, which is what makes each head's job
    findable. x: (B, T, C) -> (B, T, C).
    """

    def __init__(
        self, d_model: int, n_heads: int, dropout: float = 0.0, attention: Callable[..., nn.Module] = MultiHeadAttention
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = attention(d_model, n_heads, dropout=dropout, causal=True)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.attn(self.ln1(x))


def attention_only_gpt(
    vocab_size: int,
    context_length: int,
    d_model: int,
    n_heads: int,
    n_layers: int = 2,
    attention: Callable[..., nn.Module] = MultiHeadAttention,
    seed: int = 0,
) -> GPT:
    """Lesson 09's GPT with `AttentionOnlyBlock`s of `attention`, GPT-2's initialisation from `seed`. Lesson 13."""
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(seed)
        block = functools.partial(AttentionOnlyBlock, attention=attention)
        model = GPT(vocab_size, context_length, d_model, n_heads, n_layers, block=block)
        return init_gpt2(model, n_layers)


@dataclass(frozen=True)
class RepeatSettings:
    """What lesson 13 trains, and how: the attention-only model's sizes and the run's settings."""

    vocab_size: int = 65  # Tiny Shakespeare's characters
    context_length: int = 32  # characters a training window holds
    periods: tuple[int, int] = field(default=(4, 16))  # the shortest and the longest repeated stretch
    random_fraction: float = 0.5  # the share of windows made of random characters instead of text
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    batch_size: int = 32
    lr: float = 3e-3  # AdamW, no weight decay, no schedule
    steps: int = 2500
    every: int = 50  # a checkpoint every this many steps

    def __post_init__(self) -> None:
        _checks.positive_ints(vocab_size=self.vocab_size, context_length=self.context_length,
                              batch_size=self.batch_size, steps=self.steps, every=self.every,
                              n_layers=self.n_layers)  # fmt: skip
        _checks.probability("random_fraction", self.random_fraction)
        _checks.divisible("d_model", self.d_model, "n_heads", self.n_heads)
        _checks.positive_number("lr", self.lr)
        low, high = self.periods
        _checks.int_between("periods[0]", low, 1, note="at least one character repeats")
        _checks.int_between("periods[1]", high, low, (self.context_length + 1) // 2, note="two copies fit a window")


@dataclass(frozen=True)
class Checkpoint:
    """The model's weights after `step` steps (a copy), the training loss of that step, CPU seconds so far."""

    step: int
    state: dict[str, Tensor]
    loss: float
    seconds: float


def train_with_checkpoints(
    model: nn.Module,
    data: Tensor,
    settings: RepeatSettings = RepeatSettings(),
    seed: int = 0,
    progress: Callable[[int, float], None] | None = None,
) -> list[Checkpoint]:
    """Train `model` (forward(x, y) -> (logits, loss)) with AdamW on `repeat_batch` windows of `data` for
    `settings.steps` steps, copying its weights before the first step and every `settings.every` steps after.

    Lesson 13. The windows are drawn from `seed`; `progress(step, loss)` is called after each step (a progress
    bar). Seconds are CPU time (`time.process_time`). The model is left in eval mode, with its last weights.
    """
    context_length = model.context_length
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0)
    checkpoints = [Checkpoint(0, copy.deepcopy(model.state_dict()), float("nan"), 0.0)]
    start = time.process_time()
    model.train()
    for step in range(1, settings.steps + 1):
        x, y = repeat_batch(data, settings.batch_size, context_length, settings.periods, generator,
                            settings.random_fraction, settings.vocab_size)  # fmt: skip
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if progress is not None:
            progress(step, loss.item())
        if step % settings.every == 0 or step == settings.steps:
            seconds = time.process_time() - start
            checkpoints.append(Checkpoint(step, copy.deepcopy(model.state_dict()), loss.item(), seconds))
    model.eval()
    return checkpoints


@torch.no_grad()
def loss_per_position(model: nn.Module, sequences: Tensor) -> Tensor:
    """The model's mean cross-entropy at each position of `sequences` (B, T): (T - 1,), entry t for predicting token
    t + 1 from tokens 0..t. Lesson 13."""
    logits, _ = model(sequences[:, :-1])  # (B, T-1, V)
    losses = F.cross_entropy(logits.transpose(1, 2), sequences[:, 1:], reduction="none")  # (B, T-1)
    return losses.mean(dim=0)
