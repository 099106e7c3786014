"""Lesson 00 — How this course works: the warm-up exercises' references.

Three small functions that practise the exercise workflow and preview ideas of later lessons:
counting symbols (lesson 01 builds vocabularies), next-token pairs (every language model's training data),
and rows that sum to one (what softmax produces in lesson 04).

Shape legend: N rows, C columns.
"""

from __future__ import annotations

from numbers import Integral

import torch

__all__ = ["count_characters", "next_token_pairs", "normalize_rows"]


def count_characters(text: str) -> dict[str, int]:
    """How often each character occurs, keys in order of first appearance.

    Lesson 00, exercise `count_characters`. `count_characters("abca") == {"a": 2, "b": 1, "c": 1}`.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return counts


def next_token_pairs(ids: list[int]) -> list[tuple[int, int]]:
    """Each token with the token that follows it: `[5, 7, 9]` -> `[(5, 7), (7, 9)]`.

    Lesson 00, exercise `next_token_pairs`. A list of n ids gives n - 1 pairs (none for n < 2).
    """
    if isinstance(ids, str | bytes) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a list of ints, got {type(ids).__name__}")
    ids = list(ids)
    for i, item in enumerate(ids):
        if isinstance(item, bool) or not isinstance(item, Integral):
            raise TypeError(f"ids[{i}] must be an int, got {type(item).__name__}: {item!r}")
    return list(zip(ids[:-1], ids[1:], strict=True))


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Divide each row of a non-negative (N, C) tensor by its sum, so every row sums to 1.

    Lesson 00, exercise `normalize_rows`. Rows that sum to zero are a ValueError (nothing to normalise).
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"x must be a 2-D tensor (N, C), got {getattr(x, 'shape', type(x).__name__)}")
    totals = x.sum(dim=1, keepdim=True)  # (N, 1)
    if bool((totals == 0).any()):
        raise ValueError("x has a row that sums to 0; it cannot be normalised")
    return x / totals  # (N, C) / (N, 1) broadcasts over columns
