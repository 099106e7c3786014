"""Attention that has learned something: tiny models that train on a CPU in about a second (Lessons 04 and 05).

An untrained attention layer spreads its weights almost evenly and means nothing. These toys learn a job whose
answer is known, so the trained weights can be read off a heat map and measured:

    ToyTask.mirror()       lesson 04: output position t names the token at position T-1-t (the sequence reversed);
                           one head learns to look at the mirrored position, an anti-diagonal
    ToyTask.neighbours()   lesson 05: output position t names the pair (left neighbour, right neighbour), wrapping
                           round at the ends; two lookups per position, so with two heads each head takes one
    ToyAttentionModel      token + learned position embeddings -> one attention layer -> a linear readout
    build_toy, train_toy   a seeded model, and a seeded training run with lesson 04's `train_step`
    accuracy               share of positions whose largest logit is the target
    weight_on              mean attention weight each head puts on the key a rule picks for each query

The model has no residual connection, no feed-forward and no normalisation: everything it outputs went through
the attention weights, so those weights are the whole story.

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.attention import SelfAttention, train_step
from course_lib.multihead import MultiHeadAttention

__all__ = ["ToyTask", "ToyAttentionModel", "build_toy", "train_toy", "accuracy", "weight_on"]

_KINDS = ("mirror", "neighbours")


@dataclass(frozen=True)
class ToyTask:
    """A task with a known answer: random token sequences in, the answer at every position out. Lessons 04-05."""

    kind: str  # "mirror" (reverse the sequence) or "neighbours" (name the left and right neighbours)
    vocab_size: int = 8  # tokens are ids 0..vocab_size-1, drawn uniformly
    length: int = 8  # T: every sequence has this many positions

    def __post_init__(self) -> None:
        _checks.one_of("kind", self.kind, _KINDS)
        _checks.int_between("vocab_size", self.vocab_size, 2)
        _checks.int_between("length", self.length, 3)

    @classmethod
    def mirror(cls, vocab_size: int = 8, length: int = 8) -> ToyTask:
        """Lesson 04: reverse the sequence."""
        return cls("mirror", vocab_size, length)

    @classmethod
    def neighbours(cls, vocab_size: int = 8, length: int = 8) -> ToyTask:
        """Lesson 05: name both neighbours of every position (position 0's left neighbour is the last one)."""
        return cls("neighbours", vocab_size, length)

    @property
    def n_classes(self) -> int:
        """How many different answers a position can have: a token, or a (left, right) pair of tokens."""
        return self.vocab_size if self.kind == "mirror" else self.vocab_size**2

    def keys(self) -> dict[str, Tensor]:
        """For each lookup the task needs, the key position each query t must read: {name: (T,) long}."""
        t = torch.arange(self.length)  # (T,)
        if self.kind == "mirror":
            return {"mirror": self.length - 1 - t}
        return {"left": (t - 1) % self.length, "right": (t + 1) % self.length}

    def answer(self, inputs: Tensor) -> Tensor:
        """The targets of a batch of token sequences: (B, T) ids -> (B, T) class ids."""
        _checks.tensor("inputs", inputs, "B, T", integer=True, T=self.length)
        if self.kind == "mirror":
            return inputs.flip(1)  # position t gets token T-1-t
        left, right = inputs.roll(1, dims=1), inputs.roll(-1, dims=1)  # (B, T): token t-1, token t+1 (wrapping)
        return left * self.vocab_size + right  # one class per (left, right) pair

    def decode(self, target: int) -> tuple[int, ...]:
        """A class id as the tokens it stands for: (token,) or (left, right)."""
        _checks.int_between("target", target, 0, self.n_classes - 1)
        return (target,) if self.kind == "mirror" else divmod(target, self.vocab_size)

    def batch(self, batch_size: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """`batch_size` random sequences and their targets: (inputs (B, T), targets (B, T))."""
        _checks.positive_int("batch_size", batch_size)
        inputs = torch.randint(self.vocab_size, (batch_size, self.length), generator=generator)  # (B, T)
        return inputs, self.answer(inputs)


class ToyAttentionModel(nn.Module):
    """Token and position embeddings, one attention layer, a linear readout. Lessons 04-05.

    `attention` is the layer under study, passed in: lesson 04's `SelfAttention(d_model, d_model)` or lesson
    05's `MultiHeadAttention(d_model, n_heads)`; it must accept `need_weights=True`.
    ids (B, T) -> logits (B, T, n_classes), or (logits, weights (B, T, T) or (B, H, T, T)).
    """

    def __init__(self, task: ToyTask, attention: nn.Module, d_model: int) -> None:
        super().__init__()
        _checks.instance("task", task, ToyTask, "a ToyTask")
        _checks.instance("attention", attention, nn.Module, "an attention nn.Module")
        _checks.positive_int("d_model", d_model)
        self.task, self.d_model = task, d_model
        self.token = nn.Embedding(task.vocab_size, d_model)  # what each token is
        self.position = nn.Embedding(task.length, d_model)  # where it is (lesson 03's learned positions)
        self.attention = attention
        self.readout = nn.Linear(d_model, task.n_classes)  # the answer, read from the attention's output

    def embed(self, ids: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, d_model): token vector plus position vector."""
        _checks.tensor("ids", ids, "B, T", integer=True, T=self.task.length)
        return self.token(ids) + self.position(torch.arange(ids.shape[1], device=ids.device))  # (B, T, C)

    def forward(self, ids: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        out, weights = self.attention(self.embed(ids), need_weights=True)  # (B, T, C), (B, [H,] T, T)
        logits = self.readout(out)  # (B, T, n_classes)
        return (logits, weights) if need_weights else logits


def build_toy(task: ToyTask, d_model: int = 16, n_heads: int | None = None, seed: int = 0) -> ToyAttentionModel:
    """A freshly initialised toy (seeded; the global random state is left as it was). Lessons 04-05.

    n_heads None: one head, lesson 04's SelfAttention(d_model, d_model); an int: lesson 05's non-causal
    MultiHeadAttention(d_model, n_heads) (the tasks look both ways, so neither is causal).
    """
    if n_heads is not None:
        _checks.divisible("d_model", d_model, "n_heads", n_heads)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        attention = SelfAttention(d_model, d_model) if n_heads is None else MultiHeadAttention(d_model, n_heads)
        return ToyAttentionModel(task, attention, d_model)


Step = Callable[[nn.Module, torch.optim.Optimizer, Tensor, Tensor], float]


def train_toy(
    model: ToyAttentionModel,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-2,
    seed: int = 0,
    step: Step = train_step,
) -> list[float]:
    """Train `model` on fresh random batches of its task with Adam; return the loss of every step. Lessons 04-05.

    `step` is lesson 04's `train_step` unless you pass another (your own answer, say): step(model, optimizer,
    inputs, targets) -> loss as a float.
    """
    _checks.instance("model", model, ToyAttentionModel, "a ToyAttentionModel")
    _checks.positive_ints(steps=steps, batch_size=batch_size)
    _checks.positive_number("lr", lr)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)  # the batches; the model's initial weights come from its seed
    model.train()
    return [step(model, optimizer, *model.task.batch(batch_size, generator)) for _ in range(steps)]


@torch.no_grad()
def accuracy(model: ToyAttentionModel, n_sequences: int = 1000, seed: int = 1234) -> float:
    """Share of the positions of `n_sequences` fresh random sequences whose largest logit is the target."""
    _checks.instance("model", model, ToyAttentionModel, "a ToyAttentionModel")
    inputs, targets = model.task.batch(n_sequences, torch.Generator().manual_seed(seed))  # (B, T) each
    return (model(inputs).argmax(dim=-1) == targets).float().mean().item()


def weight_on(weights: Tensor, keys: Tensor) -> Tensor:
    """Mean attention weight that query t puts on key `keys[t]`, over queries and batch, for each head.

    Lessons 04-05: how much of a head's attention goes where the task needs it (1.0: all of it).
    weights: (B, T, T) or (B, H, T, T); keys: (T,) key positions -> () or (H,).
    """
    _checks.tensor("weights", weights, "..., T, Tk")
    _checks.tensor("keys", keys, "T", integer=True, T=weights.shape[-2])
    _checks.indices("keys", keys, weights.shape[-1], "key positions")
    t = torch.arange(weights.shape[-2])
    picked = weights[..., t, keys]  # (B, [H,] T): the weight each query puts on its key
    return picked.mean(dim=0).mean(dim=-1)  # average over the batch, then over the queries: () or (H,)
