"""Lesson 01 — From text to token ids: reference implementations.

Everything a learner writes in lesson 01 has a reference here with the same name and signature (docs/ARCHITECTURE.md,
"Exercise contract"), plus a few helpers the lesson uses around the exercises:

1. a word-level tokenizer (``split_words`` → ``build_vocab`` → ``SimpleTokenizer``),
2. byte-level BPE from scratch (``get_pair_counts``, ``merge_pair``, ``train_bpe``, ``bpe_encode``,
   ``bpe_decode``, and ``bpe_encode_steps`` which shows every merge; ``apply_merge`` is ``merge_pair``
   without its argument checks, for inner loops),
3. next-token training pairs (``sliding_window_pairs``, ``TokenWindowDataset``, ``create_dataloader``).

Shape legend: B batch, T time (= ``context_length``), N number of windows; H heads, D head size,
C/d_model channels, V vocabulary (not used in this module).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset

from course_lib import _checks

# The split pattern of the word-level tokenizer: punctuation, the double dash and whitespace become
# their own items (the capturing group keeps them in the output of re.split).
SPLIT_PATTERN = r'([,.:;?_!"()\']|--|\s)'
# Decoding joins words with single spaces; this removes the space that ends up before punctuation.
PUNCTUATION_SPACE_PATTERN = r'\s+([,.:;?!"()\'])'
UNK_TOKEN = "<|unk|>"
END_OF_TEXT_TOKEN = "<|endoftext|>"
N_BYTES = 256  # byte-level BPE starts from the 256 possible byte values as ids 0..255
_MERGES = "a dict {(id1, id2): new_id} as returned by train_bpe"  # what `merges` must be, for messages


# ----------------------------------------------------------------------------------------------
# 1. Word-level tokenizer


def split_words(text: str) -> list[str]:
    """Split ``text`` into words and punctuation; whitespace is dropped.

    Lesson 01, section "A word tokenizer". ``"Hello, world."`` → ``["Hello", ",", "world", "."]``.
    """
    _checks.string("text", text)
    items = (item.strip() for item in re.split(SPLIT_PATTERN, text))
    return [item for item in items if item]


def build_vocab(text_or_tokens: str | Iterable[str]) -> dict[str, int]:
    """Vocabulary ``{token: id}`` of the sorted unique tokens, then ``<|endoftext|>`` and ``<|unk|>``.

    Lesson 01, section "A vocabulary". Takes raw text (split with ``split_words``) or a list of tokens.
    """
    if isinstance(text_or_tokens, str):
        tokens = split_words(text_or_tokens)
    else:
        tokens = _checks.items("text_or_tokens", text_or_tokens, str, "str tokens")
    vocab = {token: index for index, token in enumerate(sorted(set(tokens)))}
    for special in (END_OF_TEXT_TOKEN, UNK_TOKEN):
        vocab.setdefault(special, len(vocab))  # appended after the words unless the text already had it
    return vocab


class SimpleTokenizer:
    """Word-level tokenizer over a fixed vocabulary; unknown words become ``<|unk|>``.

    Lesson 01, exercise ``SimpleTokenizer``. ``encode(text) -> list[int]``, ``decode(ids) -> str``.
    """

    def __init__(self, vocab: dict[str, int]):
        _checks.instance("vocab", vocab, dict, "a dict {token: id}")
        for token, index in vocab.items():
            _checks.string("each key of vocab", token)
            _checks.integer(f"vocab[{token!r}]", index)
        self.str_to_int = dict(vocab)
        self.int_to_str = {index: token for token, index in vocab.items()}
        if len(self.int_to_str) != len(self.str_to_int):
            raise ValueError("vocab maps two tokens to the same id; ids must be unique to decode")

    def encode(self, text: str) -> list[int]:
        words = split_words(text)
        unknown = [word for word in words if word not in self.str_to_int]
        if unknown and UNK_TOKEN not in self.str_to_int:
            raise ValueError(
                f"the word {unknown[0]!r} is not in the vocabulary and the vocabulary has no "
                f"{UNK_TOKEN!r} entry to map it to; add {UNK_TOKEN!r} (build_vocab does)"
            )
        words = [word if word in self.str_to_int else UNK_TOKEN for word in words]
        return [self.str_to_int[word] for word in words]

    def decode(self, ids: list[int]) -> str:
        ids = _checks.int_list("ids", ids)
        for index in ids:
            if index not in self.int_to_str:
                raise ValueError(
                    f"id {index} is not in the vocabulary (valid ids: {min(self.int_to_str, default=None)}"
                    f"..{max(self.int_to_str, default=None)})"
                )
        text = " ".join(self.int_to_str[index] for index in ids)
        return re.sub(PUNCTUATION_SPACE_PATTERN, r"\1", text)


# ----------------------------------------------------------------------------------------------
# 2. Byte-level BPE


def get_pair_counts(ids: list[int]) -> dict[tuple[int, int], int]:
    """Count adjacent pairs (overlapping); keys in order of first occurrence.

    Lesson 01, exercise ``get_pair_counts``. ``[1, 1, 1]`` → ``{(1, 1): 2}``.
    """
    ids = _checks.int_list("ids", ids)
    # Counter inserts keys in the order it first sees them, so the order of first occurrence is kept.
    return dict(Counter(pairwise(ids)))


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace non-overlapping occurrences of ``pair`` by ``new_id``, scanning left to right.

    Lesson 01, exercise ``merge_pair``. ``[1, 1, 1]``, ``(1, 1)``, 9 → ``[9, 1]``. ``ids`` is not modified.
    """
    ids = _checks.int_list("ids", ids)
    if not isinstance(pair, tuple) or len(_checks.int_list("pair", pair)) != 2:
        raise TypeError(f"pair must be a tuple of two ints, got {pair!r:.60}")
    _checks.integer("new_id", new_id)
    return apply_merge(ids, pair, new_id)


def apply_merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``merge_pair`` without the argument checks: the inner loop of ``train_bpe``, ``bpe_encode`` and
    ``text_viz.compression_table``, which would otherwise check the same ids again at every merge."""
    first, second = pair
    merged = []
    i = 0
    n = len(ids)
    while i < n:
        if i < n - 1 and ids[i] == first and ids[i + 1] == second:
            merged.append(new_id)
            i += 2  # skip both halves: occurrences never overlap
        else:
            merged.append(ids[i])
            i += 1
    return merged


def train_bpe(text: str, vocab_size: int) -> dict[tuple[int, int], int]:
    """Learn ``vocab_size - 256`` byte-pair merges on ``text``; returns ``{(id1, id2): new_id}``.

    Lesson 01, exercise ``train_bpe``. Merge ``i`` gets id ``256 + i``; each step merges the most frequent
    pair, ties going to the pair that occurs first in the current sequence. Stops early when fewer than
    two tokens are left.
    """
    _checks.string("text", text)
    _checks.integer("vocab_size", vocab_size, minimum=N_BYTES)  # one id for each of the 256 byte values
    ids = list(text.encode("utf-8"))
    merges: dict[tuple[int, int], int] = {}
    for new_id in range(N_BYTES, vocab_size):
        if len(ids) < 2:
            break  # nothing left to pair up
        counts = Counter(pairwise(ids))  # keys in order of first occurrence
        # max() returns the first maximal key it meets, so ties go to the earliest first occurrence.
        best = max(counts, key=counts.__getitem__)
        ids = apply_merge(ids, best, new_id)
        merges[best] = new_id
    return merges


def _applicable_merge(ids: list[int], merges: dict[tuple[int, int], int]) -> tuple[int, int] | None:
    """The adjacent pair of ``ids`` with the lowest merge id, or None if no pair has a merge."""
    candidates = [pair for pair in set(pairwise(ids)) if pair in merges]
    return min(candidates, key=merges.__getitem__) if candidates else None


def bpe_encode(text: str, merges: dict[tuple[int, int], int]) -> list[int]:
    """Encode ``text`` with learned merges, earliest-learned (lowest id) merge first.

    Lesson 01, exercise ``bpe_encode``.
    """
    _checks.string("text", text)
    _checks.instance("merges", merges, dict, _MERGES)
    ids = list(text.encode("utf-8"))
    while (pair := _applicable_merge(ids, merges)) is not None:
        ids = apply_merge(ids, pair, merges[pair])
    return ids


class BPEStep(NamedTuple):
    """One merge of ``bpe_encode_steps``: the pair merged, its new id and the whole sequence after."""

    pair: tuple[int, int]
    new_id: int
    ids: list[int]


def bpe_encode_steps(text: str, merges: dict[tuple[int, int], int]) -> list[BPEStep]:
    """Show-your-work version of ``bpe_encode``: every merge applied, in order.

    Lesson 01, section "Encoding with merges". ``steps[-1].ids == bpe_encode(text, merges)`` when at least
    one merge applies; with no steps the encoding is just the utf-8 bytes.
    """
    _checks.string("text", text)
    _checks.instance("merges", merges, dict, _MERGES)
    ids = list(text.encode("utf-8"))
    steps = []
    while (pair := _applicable_merge(ids, merges)) is not None:
        ids = apply_merge(ids, pair, merges[pair])
        steps.append(BPEStep(pair, merges[pair], ids))
    return steps


def bpe_vocab(merges: dict[tuple[int, int], int]) -> dict[int, bytes]:
    """Bytes of every token: ids 0..255 are single bytes, a merged id is its two halves joined.

    Lesson 01, exercise ``bpe_decode`` (the table it builds first).
    """
    _checks.instance("merges", merges, dict, _MERGES)
    vocab = {index: bytes([index]) for index in range(N_BYTES)}
    for (first, second), new_id in sorted(merges.items(), key=lambda item: item[1]):
        if first not in vocab or second not in vocab:
            raise ValueError(
                f"merges is inconsistent: pair {(first, second)} -> {new_id} uses an id that no earlier merge creates"
            )
        vocab[new_id] = vocab[first] + vocab[second]
    return vocab


def bpe_decode(ids: list[int], merges: dict[tuple[int, int], int]) -> str:
    """Expand ids back to bytes and decode them as utf-8 (invalid bytes become U+FFFD).

    Lesson 01, exercise ``bpe_decode``.
    """
    ids = _checks.int_list("ids", ids)
    vocab = bpe_vocab(merges)
    for index in ids:
        if index not in vocab:
            raise ValueError(
                f"id {index} is neither a byte (0..255) nor created by merges (ids {N_BYTES}..{max(vocab)})"
            )
    return b"".join(vocab[index] for index in ids).decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------------------------
# 3. Training pairs for next-token prediction


def sliding_window_pairs(
    token_ids: Sequence[int] | torch.Tensor, context_length: int, stride: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Input/target windows for next-token prediction; targets are the inputs shifted by one.

    Lesson 01, exercise ``sliding_window_pairs``. Window ``s`` starts at ``s * stride`` for every start
    ``< len(token_ids) - context_length``. Returns two LongTensors of shape (N, T).
    """
    _checks.integer("context_length", context_length, minimum=1)
    _checks.integer("stride", stride, minimum=1)
    if isinstance(token_ids, torch.Tensor):
        if token_ids.dim() != 1 or token_ids.dtype.is_floating_point or token_ids.dtype == torch.bool:
            got = f"dtype {token_ids.dtype} and shape {tuple(token_ids.shape)}"
            raise TypeError(f"token_ids must be a 1-D integer tensor, got {got}")
        ids = token_ids.to(torch.long)
    else:
        ids = torch.tensor(_checks.int_list("token_ids", token_ids), dtype=torch.long)
    if len(ids) <= context_length:
        # range(0, len - T, stride) is empty: no window fits (the contract returns zero windows, not an error).
        empty = torch.empty(0, context_length, dtype=torch.long)  # (0, T)
        return empty, empty.clone()
    # unfold(0, T, stride) takes every window of T tokens whose last index fits; dropping the final
    # token for the inputs (and the first for the targets) gives exactly the starts s < len - T.
    inputs = ids[:-1].unfold(0, context_length, stride).clone()  # (N, T)
    targets = ids[1:].unfold(0, context_length, stride).clone()  # (N, T)
    return inputs, targets


class TokenWindowDataset(Dataset):
    """A ``Dataset`` of the windows of ``sliding_window_pairs``; item ``i`` is ``(input, target)``, each (T,).

    Lesson 01, section "A DataLoader".
    """

    def __init__(self, token_ids: Sequence[int] | torch.Tensor, context_length: int, stride: int):
        self.inputs, self.targets = sliding_window_pairs(token_ids, context_length, stride)  # (N, T) each
        if len(self.inputs) == 0:
            raise ValueError(
                f"token_ids has {len(token_ids)} tokens; at least context_length + 1 = {context_length + 1} "
                "are needed for one input/target pair"
            )

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]  # (T,), (T,)


def create_dataloader(
    text: str,
    tokenizer: Any = None,
    batch_size: int = 4,
    context_length: int = 256,
    stride: int = 128,
    shuffle: bool = True,
    drop_last: bool = True,
    num_workers: int = 0,
    seed: int | torch.Generator = 0,
) -> DataLoader:
    """Tokenize ``text`` and batch its sliding windows; batches are ``(inputs, targets)``, each (B, T).

    Lesson 01, section "A DataLoader". ``tokenizer`` needs an ``encode(text)`` method; by default GPT-2's
    (``course_lib.data.gpt2_encoding()``, with ``<|endoftext|>`` allowed in the text). The shuffle order
    depends only on ``seed`` (an int or a ``torch.Generator``).
    """
    _checks.string("text", text)
    _checks.integer("batch_size", batch_size, minimum=1)
    _checks.integer("num_workers", num_workers, minimum=0)
    if tokenizer is None:
        from course_lib.data import gpt2_encoding  # lazy: the data module is only needed for the default

        token_ids = gpt2_encoding().encode(text, allowed_special={END_OF_TEXT_TOKEN})
    elif callable(getattr(tokenizer, "encode", None)):
        token_ids = tokenizer.encode(text)
    else:
        raise TypeError(f"tokenizer must have an encode(text) method, got {type(tokenizer).__name__}")
    if isinstance(seed, torch.Generator):
        generator = seed
    else:
        _checks.integer("seed", seed)
        generator = torch.Generator().manual_seed(int(seed))
    dataset = TokenWindowDataset(token_ids, context_length, stride)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        num_workers=num_workers,
        generator=generator,
    )
