"""Lesson 00 — How this course works: the warm-up exercises' references.

Three small functions that practise the exercise workflow and preview ideas of later lessons:
counting symbols (lesson 01 builds vocabularies), next-token pairs (every language model's training data),
and rows that sum to one (what softmax produces in lesson 04). Two more belong to the lesson's PyTorch primer:
distances between every pair of points, batched (broadcasting, the shape of attention scores in lesson 04), and
gradient descent written by hand with autograd (what every training loop from lesson 07 on does).

Shape legend: N rows / points, M points, C columns / channels; `...` any leading (batch) dimensions.
"""

from __future__ import annotations

from numbers import Integral

import torch
from torch import Tensor

from course_lib import _checks

__all__ = ["count_characters", "gradient_descent", "next_token_pairs", "normalize_rows", "pairwise_distances"]


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


def pairwise_distances(a: Tensor, b: Tensor) -> Tensor:
    """Euclidean distance from every point of `a` to every point of `b`, in every batch.

    Lesson 00, exercise `pairwise_distances`. a (..., N, C), b (..., M, C) -> (..., N, M) with
    out[..., i, j] = ||a[..., i, :] - b[..., j, :]||. The leading dimensions broadcast.
    """
    _checks.tensors(a=(a, "..., N, C"), b=(b, "..., M, C"))
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)  # (..., N, 1, C) - (..., 1, M, C) -> (..., N, M, C)
    return diff.pow(2).sum(dim=-1).sqrt()  # (..., N, M): sum over the coordinates only


def gradient_descent(w: Tensor, x: Tensor, y: Tensor, lr: float, steps: int) -> tuple[Tensor, list[float]]:
    """Fit y ≈ x @ w by `steps` steps of gradient descent on the mean squared error, gradients from autograd.

    Lesson 00, exercise `gradient_descent`. w (C,), x (N, C), y (N,). Returns the weights after the last step
    (a new tensor: `w` itself is not changed) and the loss before each step's update, as Python floats.
    """
    _checks.tensors(w=(w, "C"), x=(x, "N, C"), y=(y, "N"))
    _checks.positive_number("lr", lr)
    _checks.int_between("steps", steps, 0)
    w = w.detach().clone().requires_grad_(True)  # a leaf tensor of our own: backward() fills its .grad
    losses = []
    with torch.enable_grad():  # works even where the caller switched gradients off
        for _ in range(steps):
            loss = ((x @ w - y) ** 2).mean()  # (N, C) @ (C,) -> (N,) -> a scalar
            loss.backward()  # w.grad = d loss / d w, shape (C,)
            with torch.no_grad():  # the update is not part of the model: autograd must not record it
                w -= lr * w.grad
            w.grad.zero_()  # backward() adds to .grad: without this the next step would use both gradients
            losses.append(loss.item())
    return w.detach(), losses
