"""Character-level language models: the data, the bigram baseline, sampling, and an LSTM to race (lesson 09).

    build_char_vocab     text -> (stoi, itos) over sorted(set(text))           (exercise)
    encode_chars, decode_chars   str <-> LongTensor of ids with that vocabulary
    train_val_split      the first `fraction` of the ids for training, the rest for validation
    get_batch            random windows of `block_size` ids and the same windows shifted by one (exercise)
    BigramLanguageModel  next character from the current one only: one (V, V) table of logits (exercise)
    sample_next_token    temperature, optional top-k, then one draw per row (exercise)
    generate             append `max_new_tokens` sampled ids to a prompt, cropping the context to block_size
    estimate_loss        mean loss over a few random batches of each split, in eval mode, without gradients
    CharLSTM             the recurrent baseline: embedding -> nn.LSTM -> linear head, same (logits, loss) API

Every model here has the interface of lesson 09's `course_lib.gpt.GPT`: forward(idx, targets=None) returns
(logits (B, T, V), mean cross-entropy or None), so one training loop and one `generate` serve all three.

Shape legend: B batch, T time (T <= block_size), C channels, V vocab_size, N length of the id sequence.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks

__all__ = [
    "BigramLanguageModel",
    "CharLSTM",
    "build_char_vocab",
    "decode_chars",
    "encode_chars",
    "estimate_loss",
    "generate",
    "get_batch",
    "sample_next_token",
    "train_val_split",
]


# ------------------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------------------


def build_char_vocab(text: str) -> tuple[dict[str, int], dict[int, str]]:
    """Lesson 09, exercise `build_char_vocab`: every distinct character of `text`, in sorted order, gets an id.

    Returns (stoi, itos): character -> id and id -> character, ids 0..V-1.
    """
    _checks.string("text", text)
    chars = sorted(set(text))  # sorted: the same text always gives the same ids
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    return stoi, itos


def encode_chars(text: str, stoi: dict[str, int]) -> Tensor:
    """`text` as a LongTensor (N,) of ids; a character outside the vocabulary is a ValueError naming it."""
    missing = sorted(set(text) - stoi.keys())
    if missing:
        raise ValueError(f"`text` has characters outside the vocabulary: {''.join(missing)!r}")
    return torch.tensor([stoi[ch] for ch in text], dtype=torch.long)


def decode_chars(ids: Tensor | list[int], itos: dict[int, str]) -> str:
    """Ids (a 1-D tensor or a list) back to the string they encode."""
    values = ids.tolist() if isinstance(ids, Tensor) else list(ids)
    return "".join(itos[i] for i in values)


def train_val_split(data: Tensor, fraction: float = 0.9) -> tuple[Tensor, Tensor]:
    """(first `fraction` of `data`, the rest): a split by position, so no window of the validation text was
    trained on (a random split of windows would put overlapping copies of the same text on both sides)."""
    _checks.tensor("data", data, "N", integer=True)
    _checks.probability("fraction", fraction)
    n = int(fraction * len(data))
    return data[:n], data[n:]


def get_batch(data: Tensor, block_size: int, batch_size: int, generator: torch.Generator | None = None):
    """Lesson 09, exercise `get_batch`: `batch_size` random windows of `data` (N,) -> x, y both (B, block_size).

    Window b starts at ix[b], drawn uniformly from 0..N - block_size - 1, so that its target, shifted by one,
    still fits: x[b] = data[ix[b] : ix[b] + block_size], y[b] = data[ix[b] + 1 : ix[b] + block_size + 1].
    """
    _checks.tensor("data", data, "N", integer=True)
    _checks.positive_ints(block_size=block_size, batch_size=batch_size)
    if len(data) <= block_size:
        raise ValueError(f"`data` has {len(data)} ids; windows of block_size={block_size} need at least one more")
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,) window starts
    x = torch.stack([data[i : i + block_size] for i in ix.tolist()])  # (B, T)
    y = torch.stack([data[i + 1 : i + block_size + 1] for i in ix.tolist()])  # (B, T), one step ahead
    return x, y


# ------------------------------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------------------------------


def _loss(logits: Tensor, targets: Tensor | None) -> Tensor | None:
    """Mean cross-entropy over every position; F.cross_entropy wants the classes in dim 1, so flatten B and T."""
    if targets is None:
        return None
    B, T, V = logits.shape
    _checks.tensor("targets", targets, "B, T", integer=True, B=B, T=T)
    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))


class BigramLanguageModel(nn.Module):
    """Lesson 09, exercise `BigramLanguageModel`: row i of `token_embedding_table` (V, V) holds the logits of
    the character that follows character i. Nothing before the current character is read.

    forward(idx (B, T), targets (B, T) or None) -> (logits (B, T, V), mean cross-entropy or None).
    """

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        _checks.positive_int("vocab_size", vocab_size)
        self.vocab_size = vocab_size
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        _checks.tensor("idx", idx, "B, T", integer=True)
        logits = self.token_embedding_table(idx)  # (B, T) -> (B, T, V)
        return logits, _loss(logits, targets)


class CharLSTM(nn.Module):
    """The recurrent baseline of lesson 09: embedding -> `n_layers` nn.LSTM of width `hidden` -> linear head.

    Position t sees characters 0..t through the recurrent state, which has to be computed one step after the
    other — what the transformer removes. forward(idx (B, T), targets) -> (logits (B, T, V), loss or None).
    `block_size` only limits the context `generate` keeps, as for the GPT.
    """

    def __init__(self, vocab_size: int, block_size: int, d_embed: int = 64, hidden: int = 256, n_layers: int = 1):
        super().__init__()
        _checks.positive_ints(vocab_size=vocab_size, block_size=block_size, d_embed=d_embed, hidden=hidden)
        _checks.positive_int("n_layers", n_layers)
        self.vocab_size, self.block_size = vocab_size, block_size
        self.embedding = nn.Embedding(vocab_size, d_embed)
        self.lstm = nn.LSTM(d_embed, hidden, num_layers=n_layers, batch_first=True)
        self.lm_head = nn.Linear(hidden, vocab_size)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        _checks.tensor("idx", idx, "B, T", integer=True)
        h, _ = self.lstm(self.embedding(idx))  # (B, T, d_embed) -> (B, T, hidden); steps run in order of t
        logits = self.lm_head(h)  # (B, T, V)
        return logits, _loss(logits, targets)


# ------------------------------------------------------------------------------------------------------------
# Sampling and evaluation
# ------------------------------------------------------------------------------------------------------------


def sample_next_token(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """Lesson 09, exercise `sample_next_token`: logits (B, V) -> one sampled id per row, (B, 1).

    Divide by `temperature` (< 1 sharpens, > 1 flattens); with `top_k`, logits below the k-th largest of their
    row become -inf (ties with the k-th stay); softmax; one draw with torch.multinomial.
    """
    _checks.tensor("logits", logits, "B, V")
    _checks.positive_number("temperature", temperature)
    logits = logits / temperature  # a new tensor: the caller's logits stay as they were
    if top_k is not None:
        _checks.int_between("top_k", top_k, 1, logits.shape[-1])
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1), the k-th largest of each row
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = F.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


@torch.no_grad()
def generate(
    model: nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    block_size: int | None = None,
) -> Tensor:
    """Append `max_new_tokens` sampled ids to `idx` (B, T0) -> (B, T0 + max_new_tokens), in eval mode.

    Each step feeds the last `block_size` ids (the model's own `block_size` when not given; the bigram model
    needs only the last one but is happy with more) and samples from the last position's logits.
    """
    _checks.tensor("idx", idx, "B, T", integer=True)
    _checks.integer("max_new_tokens", max_new_tokens, minimum=0)
    block_size = block_size or getattr(model, "block_size", None) or idx.shape[1] + max_new_tokens
    was_training = model.training
    model.eval()
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -block_size:])  # (B, T, V)
        next_id = sample_next_token(logits[:, -1, :], temperature, top_k, generator)  # (B, 1)
        idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
    model.train(was_training)
    return idx


@torch.no_grad()
def estimate_loss(
    model: nn.Module,
    splits: dict[str, Tensor],
    block_size: int,
    batch_size: int,
    eval_iters: int,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """{split name: mean loss over `eval_iters` random batches of it}, in eval mode, without gradients.

    One batch's loss is noisy (a few hundred characters); the mean of many is what a curve should show.
    """
    _checks.positive_int("eval_iters", eval_iters)
    was_training = model.training
    model.eval()
    result = {}
    for name, data in splits.items():
        losses = torch.empty(eval_iters)
        for i in range(eval_iters):
            x, y = get_batch(data, block_size, batch_size, generator)
            losses[i] = model(x, y)[1]
        result[name] = losses.mean().item()
    model.train(was_training)
    return result
