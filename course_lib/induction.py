"""What a trained transformer learned: previous-token heads and induction heads (Lesson 13).

    repeated_tokens       random token sequences whose second half repeats the first: where induction shows
    prev_token_scores     each head's mean weight from a position to the one before it                 (exercise)
    induction_scores      each head's mean weight from a repeated token to the token after its first copy (exercise)
    ablate_head           a context manager that switches one head off (zeros) or flattens it (its mean)  (exercise)

Measuring a model with GPT's module names (`blocks[i].attn`, `ln1`: lesson 09's GPT, the attention-only model of
`course_lib.repeat_task`, yours too):

    head_scores           both scores of every layer and head, on repeated sequences
    ablation_losses       the loss on the repeated half with each head switched off, one at a time
    scores_with_head_ablated   every head's scores while one head of an earlier layer is switched off
    track_checkpoints     scores and losses at each checkpoint of a training run
    phase_change_step     the step at which a curve has covered a given fraction of its way
    phase_change_plot     induction score and in-context loss against the training step

Shape legend: B batch, T time, H heads, D head size (d_head), C / d_model channels (= H * D), V vocabulary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from course_lib import _checks
from course_lib.gpt import attention_maps
from course_lib.repeat_task import Checkpoint, loss_per_position

__all__ = [
    "ablate_head",
    "ablation_losses",
    "head_scores",
    "induction_scores",
    "phase_change_plot",
    "phase_change_step",
    "prev_token_scores",
    "repeated_tokens",
    "scores_with_head_ablated",
    "track_checkpoints",
]


def repeated_tokens(n: int, period: int, vocab_size: int, generator: torch.Generator | None = None) -> Tensor:
    """`n` sequences of `period` random tokens followed by the same `period` tokens again: (n, 2 * period) long.

    Lesson 13. On such a sequence nothing in the first half can be predicted (every token is a fresh draw), and
    everything in the second half can, by a model that looks back for the earlier copy of the current token.
    """
    _checks.positive_ints(n=n, period=period, vocab_size=vocab_size)
    first = torch.randint(vocab_size, (n, period), generator=generator)  # (n, period)
    return torch.cat([first, first], dim=1)  # (n, 2 * period)


def prev_token_scores(attn: Tensor) -> Tensor:
    """How much each head attends from every position to the position just before it.

    Lesson 13, exercise `prev_token_scores`. attn (..., H, T, T), rows the queries and columns the keys, T >= 2 ->
    (..., H): for each head the mean over the query positions t = 1..T-1 of attn[..., t, t-1] (position 0 has no
    previous position and is left out). A perfect previous-token head scores 1.
    """
    _checks.tensor("attn", attn, "..., H, T, T")
    if attn.shape[-1] < 2:
        raise ValueError(f"`attn` must have T >= 2 positions (a previous position), got T={attn.shape[-1]}")
    # The diagonal one below the main one holds attn[t, t-1] for t = 1..T-1.
    return attn.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)  # (..., H, T-1) -> (..., H)


def induction_scores(attn: Tensor, period: int) -> Tensor:
    """How much each head attends from a repeated token to the token that followed its earlier copy.

    Lesson 13, exercise `induction_scores`. attn (..., H, T, T) on a sequence whose token t equals token t - period
    for every t >= period -> (..., H): for each head the mean over t = period..T-1 of attn[..., t, t - period + 1],
    the weight on the position just after the earlier occurrence of the current token (what came next last time).
    The first `period` queries have no earlier copy and are left out. `ValueError` unless 1 <= period < T.
    """
    _checks.tensor("attn", attn, "..., H, T, T")
    T = attn.shape[-1]
    _checks.int_between("period", period, 1, T - 1, note=f"the sequence has T={T} positions")
    # The diagonal period-1 below the main one holds attn[t, t - period + 1] for t = period-1..T-1; its first entry
    # (t = period - 1, the last query of the first copy) has no earlier copy yet.
    stripe = attn.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)  # (..., H, T - period + 1)
    return stripe[..., 1:].mean(dim=-1)  # t = period..T-1 -> (..., H)


@contextlib.contextmanager
def ablate_head(attention: nn.Module, head: int, mode: str = "zero") -> Iterator[nn.Module]:
    """Inside the `with` block, head `head` of `attention` is switched off; on leaving, the module is as before.

    Lesson 13, exercise `ablate_head`. `attention` is a MultiHeadAttention-shaped module (lesson 05): the heads'
    outputs are concatenated, head h in channels h*D:(h+1)*D with D = out_proj.in_features // n_heads, and mixed by
    `out_proj`. A forward pre-hook on `out_proj` replaces head `head`'s channels of that input: by zeros
    (`mode="zero"`), or by their mean over the batch and the positions of the same call (`"mean"`, recomputed at
    every call: the head still adds its average output, but no longer anything that depends on the input). The
    parameters are never touched, and the hook is removed when the block ends, also when it raises. Yields
    `attention`.
    """
    n_heads = getattr(attention, "n_heads", None)
    out_proj = getattr(attention, "out_proj", None)
    if not isinstance(n_heads, int) or not isinstance(out_proj, nn.Linear):
        raise TypeError(
            "`attention` must be a MultiHeadAttention-shaped module with an int `n_heads` and an nn.Linear "
            f"`out_proj`, got {type(attention).__name__}"
        )
    _checks.int_between("head", head, 0, n_heads - 1, note=f"the module has n_heads={n_heads}")
    _checks.one_of("mode", mode, ("zero", "mean"))
    D = out_proj.in_features // n_heads
    channels = slice(head * D, (head + 1) * D)

    def replace_head(module: nn.Module, inputs: tuple) -> tuple:
        merged, *rest = inputs  # (..., T, H*D): the heads' outputs side by side
        merged = merged.clone()  # a new tensor: the attention's own output is left as it was
        if mode == "zero":
            merged[..., channels] = 0.0
        else:  # the mean over every dimension but the channels: batch and positions of this call
            leading = tuple(range(merged.dim() - 1))
            merged[..., channels] = merged[..., channels].mean(dim=leading, keepdim=True)  # (1, 1, D) broadcast
        return (merged, *rest)

    handle = out_proj.register_forward_pre_hook(replace_head)
    try:
        yield attention
    finally:
        handle.remove()


# ------------------------------------------------------------------------------------------------------------
# Measuring a trained model
# ------------------------------------------------------------------------------------------------------------


def head_scores(model: nn.Module, sequences: Tensor, period: int) -> list[dict]:
    """Each head's previous-token and induction score on `sequences` (B, T), whose token t equals token t - period,
    and its mean weight on the query's own position ("itself"): one dict per head, {"layer", "head", "itself",
    "previous token", "induction"}, averaged over the batch. Lesson 13."""
    was_training = model.training
    model.eval()
    try:
        maps = attention_maps(model, sequences)  # (L, B, H, T, T)
    finally:
        model.train(was_training)
    itself = maps.diagonal(dim1=-2, dim2=-1).mean(dim=(1, 3))  # (L, B, H, T) -> (L, H)
    previous = prev_token_scores(maps).mean(dim=1)  # (L, B, H) -> (L, H)
    repeated = induction_scores(maps, period).mean(dim=1)  # (L, H)
    return [
        {"layer": layer, "head": head, "itself": float(itself[layer, head]),
         "previous token": float(previous[layer, head]), "induction": float(repeated[layer, head])}
        for layer in range(maps.shape[0])
        for head in range(maps.shape[2])
    ]  # fmt: skip


def _halves(model: nn.Module, sequences: Tensor, period: int) -> tuple[float, float]:
    """Mean loss over the first copy (predicting tokens 1..period-1) and over the second (tokens period+1..T-1).

    The first token of the second copy is left out of both: it repeats token 0, which nothing before announced."""
    losses = loss_per_position(model, sequences)  # (T-1,): entry t predicts token t + 1
    return float(losses[: period - 1].mean()), float(losses[period:].mean())


def ablation_losses(
    model: nn.Module, sequences: Tensor, period: int, modes: Sequence[str] = ("zero", "mean")
) -> list[dict]:
    """The loss on the repeated half of `sequences` (B, T) with each head switched off alone, in each of `modes`.

    Lesson 13. One dict per head, {"layer", "head", "<mode> ablated", ...}, and first one with layer and head None
    and the model as it is under every mode ("none ablated"). The model is back as it was afterwards."""
    model.eval()
    _, baseline = _halves(model, sequences, period)
    rows = [{"layer": None, "head": None, **{f"{mode} ablated": baseline for mode in modes}}]
    for layer, block in enumerate(model.blocks):
        for head in range(block.attn.n_heads):
            row = {"layer": layer, "head": head}
            for mode in modes:
                with ablate_head(block.attn, head, mode):
                    row[f"{mode} ablated"] = _halves(model, sequences, period)[1]
            rows.append(row)
    return rows


def scores_with_head_ablated(model: nn.Module, sequences: Tensor, period: int, layer: int, mode: str = "zero"):
    """Every head's scores while one head of `layer` is switched off: {head of `layer` ablated: head_scores(...)},
    and {None: the scores of the model as it is}. Lesson 13: an induction head of a later layer reads what a
    previous-token head wrote; switch the writer off and the reader's induction score falls."""
    results = {None: head_scores(model, sequences, period)}
    attention = model.blocks[layer].attn
    for head in range(attention.n_heads):
        with ablate_head(attention, head, mode):
            results[head] = head_scores(model, sequences, period)
    return results


def track_checkpoints(
    model: nn.Module, checkpoints: Sequence[Checkpoint], scoring: Tensor, text: Tensor, period: int
) -> list[dict]:
    """Load each checkpoint into `model` and measure it: one dict per checkpoint with its "step", the strongest
    "induction" and "previous token" scores on `scoring` (random repeated tokens) in each layer ("induction L1", ...),
    the mean loss on the "first copy" and the "second copy" of `text` (repeated windows), and the "in-context"
    difference second - first (Olsson et al. 2022's in-context learning score: how much lower the loss is where the
    model can use what came before). The model keeps the last checkpoint's weights. Lesson 13."""
    records = []
    for checkpoint in checkpoints:
        model.load_state_dict(checkpoint.state)
        scores = head_scores(model, scoring, period)
        first, second = _halves(model, text, period)
        record = {"step": checkpoint.step, "first copy": first, "second copy": second, "in-context": second - first}
        for layer in sorted({row["layer"] for row in scores}):
            of_layer = [row for row in scores if row["layer"] == layer]
            record[f"previous token L{layer}"] = max(row["previous token"] for row in of_layer)
            record[f"induction L{layer}"] = max(row["induction"] for row in of_layer)
        records.append(record)
    return records


def phase_change_step(steps: Sequence[int], values: Sequence[float], fraction: float = 0.5) -> int:
    """The first step at which `values` has covered `fraction` of its way from its first value to its last (a
    rising or a falling curve). Lesson 13 and its benchmark: where the induction score jumps."""
    if len(steps) != len(values) or len(steps) < 2:
        raise ValueError(
            f"`steps` and `values` must be two lists of the same length >= 2, got {len(steps)} and {len(values)}"
        )
    _checks.probability("fraction", fraction)
    start, end = values[0], values[-1]
    target = start + fraction * (end - start)
    for step, value in zip(steps, values, strict=True):
        if (end >= start and value >= target) or (end < start and value <= target):
            return step
    return steps[-1]


def phase_change_plot(records: Sequence[dict], layer: int = 1) -> tuple[Figure, plt.Axes]:
    """The strongest induction score of `layer` (left axis) and the in-context loss (right axis) against the training
    step, from `track_checkpoints`. Lesson 13. Returns (fig, ax) of the left axis."""
    steps = [r["step"] for r in records]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(
        steps, [r[f"induction L{layer}"] for r in records], color="#c0392b", label=f"induction score, layer {layer}"
    )
    ax.set_xlabel("training step")
    ax.set_ylabel("induction score (strongest head)", color="#c0392b")
    ax.set_ylim(0, 1)
    right = ax.twinx()
    right.plot(steps, [r["in-context"] for r in records], color="#2e75b6", label="in-context loss")
    right.set_ylabel("loss(second copy) - loss(first copy)", color="#2e75b6")
    ax.set_title("An induction head forms, and the repeated half becomes predictable")
    return fig, ax
