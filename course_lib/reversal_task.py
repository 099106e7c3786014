"""The toy translation task of lesson 07: reverse a string of digits ("4071" -> "1704").

Reversal is a good first task for an encoder-decoder: the answer is known exactly, the data are generated in
code (no download), it trains on a CPU in about a minute, and the alignment the model must learn is easy to
see — output position t reads source position n-1-t, an anti-diagonal in the cross-attention weights.

    vocabulary      <pad> <bos> <eos> and the ten digits: 13 ids, shared by the source and the target side
    reversal_batch  strings -> (src, labels): src = digits + <eos>, labels = reversed digits + <eos>, padded
    ReversalTask    which lengths train, which test; held-out test strings that training never samples
    exact_match     a prediction is right only if every token up to and including <eos> is right
    mirror_attention  how much cross-attention weight each head puts on the mirrored source position

Shape legend: B batch, S source positions, T target positions, V vocabulary.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from course_lib import _checks

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "TOKENS",
    "VOCAB_SIZE",
    "encode_digits",
    "decode_ids",
    "reversal_batch",
    "random_digit_strings",
    "ReversalTask",
    "exact_match",
    "mirror_attention",
]

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # padding, beginning of the decoder's input, end of a sequence
TOKENS = ("<pad>", "<bos>", "<eos>", *"0123456789")  # id -> token; digit d has id d + 3
VOCAB_SIZE = len(TOKENS)
_FIRST_DIGIT = 3


def encode_digits(text: str) -> list[int]:
    """ "407" -> [7, 3, 10]: one id per digit (no <eos>; `reversal_batch` adds it)."""
    _checks.string("text", text)
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"`text` must be a non-empty string of digits 0-9, got {text!r}")
    return [_FIRST_DIGIT + int(c) for c in text]


def decode_ids(ids: Iterable[int] | Tensor) -> str:
    """The digits of a token sequence, up to its first <eos>; <pad> and <bos> are skipped. Lesson 07."""
    out = []
    for i in ids.tolist() if isinstance(ids, Tensor) else ids:
        if i == EOS_ID:
            break
        if i >= _FIRST_DIGIT:
            out.append(TOKENS[i])
    return "".join(out)


def reversal_batch(strings: Sequence[str]) -> tuple[Tensor, Tensor]:
    """A padded batch for the reversal task: src (B, S) and labels (B, S), S = longest string + 1.

    src[b] is the digits of strings[b] then <eos>; labels[b] the same digits reversed, then <eos>; both padded
    with <pad> on the right. The decoder's input is `shift_right(labels, BOS_ID)`.
    """
    if isinstance(strings, str) or not strings:
        raise ValueError(f"`strings` must be a non-empty list of digit strings, got {strings!r:.60}")
    rows = [encode_digits(s) for s in strings]
    S = max(len(r) for r in rows) + 1
    src = [[*r, EOS_ID] + [PAD_ID] * (S - 1 - len(r)) for r in rows]
    labels = [[*reversed(r), EOS_ID] + [PAD_ID] * (S - 1 - len(r)) for r in rows]
    return torch.tensor(src), torch.tensor(labels)  # (B, S) each, int64


def random_digit_strings(
    n: int, lengths: Sequence[int], generator: torch.Generator, exclude: frozenset[str] | set[str] = frozenset()
) -> list[str]:
    """n random digit strings, each of a length drawn uniformly from `lengths`, none of them in `exclude`."""
    _checks.positive_int("n", n)
    out: list[str] = []
    while len(out) < n:
        need = n - len(out)
        picks = torch.randint(len(lengths), (need,), generator=generator).tolist()
        digits = torch.randint(10, (need, max(lengths)), generator=generator).tolist()
        for pick, row in zip(picks, digits, strict=True):
            s = "".join(map(str, row[: lengths[pick]]))
            if s not in exclude:
                out.append(s)
    return out


@dataclass(frozen=True)
class ReversalTask:
    """Which lengths the model trains on and which it is tested on.

    Test strings are drawn once from `seed` and never sampled for training: every test string is one the model
    has not seen. Lengths in `test_lengths` but not in `train_lengths` are lengths it has never seen at all.
    """

    train_lengths: tuple[int, ...] = (1, 2, 3, 5, 6, 8, 9, 10)  # 4 and 7 are left out on purpose
    test_lengths: tuple[int, ...] = tuple(range(3, 13))  # 3..10: inside the training range; 11, 12: longer
    test_per_length: int = 200  # held-out strings per test length (at most a fifth of all strings of it)
    seed: int = 0  # draws the held-out strings

    def __post_init__(self) -> None:
        for name in ("train_lengths", "test_lengths"):
            lengths = getattr(self, name)
            if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
                raise ValueError(f"`{name}` must be a non-empty tuple of ints >= 1, got {lengths!r}")
        _checks.positive_int("test_per_length", self.test_per_length)

    @classmethod
    def tiny(cls) -> ReversalTask:
        """Short strings, for a training run of seconds (what the lesson runs while it is autograded)."""
        return cls(train_lengths=(1, 2, 3, 5), test_lengths=(3, 4, 5), test_per_length=50)

    @property
    def max_len(self) -> int:
        """The longest string of the task (train or test)."""
        return max(*self.train_lengths, *self.test_lengths)

    @functools.cached_property
    def held_out(self) -> dict[int, list[str]]:
        """{length: distinct test strings}, drawn from `seed`."""
        generator = torch.Generator().manual_seed(self.seed)
        held: dict[int, list[str]] = {}
        for n in self.test_lengths:
            want = min(self.test_per_length, 10**n // 5)  # leave most short strings to training
            found: dict[str, None] = {}  # an ordered set
            while len(found) < want:
                found.update(dict.fromkeys(random_digit_strings(want - len(found), [n], generator)))
            held[n] = list(found)
        return held

    @functools.cached_property
    def _excluded(self) -> frozenset[str]:
        return frozenset(s for strings in self.held_out.values() for s in strings)

    def sample(self, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """A training batch (src, labels), both (batch_size, S), of strings that are not held out."""
        return reversal_batch(random_digit_strings(batch_size, self.train_lengths, generator, self._excluded))


def exact_match(predictions: Tensor, labels: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Per sequence, whether the prediction equals the labels up to and including the labels' last real token.

    Lesson 07. predictions: (B, T1) token ids (padded after <eos>, any length), labels: (B, T2) with <pad> after
    <eos> -> (B,) bool. What the prediction does after that point does not count; stopping early does.
    """
    _checks.tensors(predictions=(predictions, "B, T1"), labels=(labels, "B, T2"))
    T = labels.shape[1]
    if predictions.shape[1] < T:  # too short: pad, so the missing tokens count as wrong
        fill = torch.full((predictions.shape[0], T - predictions.shape[1]), pad_id, dtype=predictions.dtype)
        predictions = torch.cat([predictions, fill], dim=1)
    real = labels != pad_id  # (B, T): the tokens that must match
    return ((predictions[:, :T] == labels) | ~real).all(dim=1)  # (B,)


def mirror_attention(weights: Tensor, lengths: Sequence[int]) -> dict[str, Tensor]:
    """Where each cross-attention head looks while the model writes the reversed digits. Lesson 07.

    For a string of n digits, output position t (0 <= t < n) must copy source position n-1-t. Returns the mean
    weight of each (layer, head), over every digit position of every sequence, on
        "mirror"  source position n-1-t, the digit to copy (1.0 would be a perfect anti-diagonal);
        "next"    source position n-t, the source copy of the digit the decoder has just read (t >= 1);
        "eos"     the source's <eos> at position n, which marks where (and so how long) the string ends.
    weights: (L, B, H, T, S) as returned by `decode(..., need_weights=True)`; lengths: (B,) digits per string
    -> {name: (L, H)}.
    """
    _checks.tensor("weights", weights, "L, B, H, T, S")
    lengths = _checks.int_list("lengths", lengths, minimum=1, non_empty=True)
    L, B, H, T, S = weights.shape
    if len(lengths) != B or max(lengths) >= min(T, S):
        raise ValueError(f"`lengths` must give B={B} lengths below min(T, S)={min(T, S)}, got {lengths}")
    sums = {name: torch.zeros(L, H, dtype=torch.float64) for name in ("mirror", "next", "eos")}
    counts = {"mirror": 0, "next": 0, "eos": 0}
    for b, n in enumerate(lengths):
        w = weights[:, b, :, :n, :].double()  # (L, H, n, S): the digit positions of sequence b
        t = torch.arange(n)
        sums["mirror"] += w[..., t, n - 1 - t].sum(-1)  # (L, H)
        sums["eos"] += w[..., t, n].sum(-1)
        sums["next"] += w[..., t[1:], n - t[1:]].sum(-1)
        counts["mirror"] += n
        counts["eos"] += n
        counts["next"] += n - 1
    return {name: (sums[name] / max(counts[name], 1)).float() for name in sums}
