"""Graders of lesson 02 — Embeddings (one `check_<exercise>` per exercise; docs/ARCHITECTURE.md,
Exercise contract).

Every check follows the same recipe: `check_definition` first (the from-scratch guard); then, for each case,
seeded random inputs, the expected value from the reference in `course_lib.embeddings` computed *outside* the
learner's call, and the learner's answer through `call_answer`. When the two differ, the check computes each
known wrong variant on the same input and, if the learner's output equals one of them, names that mistake;
otherwise it reports the shapes and the largest difference (`course_lib.grading.kit.diagnose`).

With `cases=None` a check runs its visible cases; a hidden test cell passes its own `cases` (the format is in
each check's docstring) and only those run. Messages about a hidden case call it "<hidden case k>" and never show
its input, so hidden test text stays hidden.

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import embeddings as ref
from course_lib.grading.kit.core import (
    Graded,
    GradingError,
    Hint,
    Passed,
    call_answer,
    call_label,
    expect_unchanged,
    generator,
    random_tensor,
    tagged_cases,
)
from course_lib.grading.kit.diagnose import Variant, close, diagnose_tensor, find_mistake, tensor_result
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_cosine_similarity", "check_most_similar", "check_one_hot_embed"]


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: one_hot_embed

# (ids, V, C, seed): ids is a shape (random ids in 0..V-1) or an explicit list of ids. The first case has
# V == C, so a product with weight.T has the right shape and only its values give it away; the second uses
# only small ids, so a one-hot without num_classes=V has too few columns.
_ONE_HOT_CASES: list[tuple[Any, int, int, int]] = [
    ((5,), 6, 6, 0),
    ([0, 3, 3, 1], 7, 2, 1),
    ((2, 4), 10, 3, 2),
    ((3, 2, 5), 12, 4, 3),
]

_ONE_HOT_HINTS: list[Hint] = [
    (
        lambda m: "dtype" in m or "scalar type" in m,
        "F.one_hot returns integers (torch.long): convert the one-hot matrix to the weight's dtype "
        "(`.to(weight.dtype)` or `.float()`) before the product.",
    ),
    (
        lambda m: "shape" in m or "size" in m,
        "the one-hot matrix must have V = weight.shape[0] columns (pass num_classes=V to F.one_hot, or the "
        "width is only max(id) + 1), and the product is one_hot @ weight with weight (V, C) as it is — no "
        "transpose.",
    ),
]


def check_one_hot_embed(answer: Any, cases: list | None = None) -> Passed:
    """Check `one_hot_embed(token_ids, weight)` against weight[token_ids] (graded on its output).

    A case is `(ids, V, C, seed)`: `ids` a shape (random ids in 0..V-1 drawn with `seed`) or a list of ids;
    `weight` is a seeded random (V, C) matrix.
    """
    name = Graded(ref.one_hot_embed)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _ONE_HOT_CASES)
    for tag, (ids_spec, V, C, seed) in chosen:
        if isinstance(ids_spec, list):
            ids = torch.tensor(ids_spec, dtype=torch.long)
        else:
            ids = torch.randint(0, V, tuple(ids_spec), generator=generator(seed))
        _one_hot_case(name, answer, ids, random_tensor(V, C, seed=seed + 100), tag)
    return Passed(name, len(chosen), hidden=cases is not None)


def _one_hot_case(name: str, answer: Any, ids: Tensor, weight: Tensor, tag: str | None) -> None:
    V, C = weight.shape
    expected = ref.one_hot_embed(ids, weight)  # (..., C)
    ids_in, weight_in = ids.clone(), weight.clone()
    what = call_label(name, f"ids of shape {tuple(ids.shape)}, weight of shape ({V}, {C})", tag)
    got = call_answer(name, answer, ids_in, weight_in, what=what, hints=_ONE_HOT_HINTS)
    got = tensor_result(name, got, what)
    expect_unchanged(name, {"token_ids": (ids_in, ids), "weight": (weight_in, weight)}, what)
    if not got.is_floating_point() and tuple(got.shape) == tuple(expected.shape):
        raise GradingError(
            name,
            f"{what} returned integers ({got.dtype}); convert the one-hot matrix to the weight's dtype "
            "before the product, so that the result has the weight's float values.",
        )
    one_hot = F.one_hot(ids, V).float()  # (..., V)
    variants: list[Variant] = [
        (
            lambda: one_hot,
            "you returned the one-hot matrix itself, shape (..., V) with one column per vocabulary entry. "
            "Multiply it by `weight` (V, C) to get the embeddings, shape (..., C).",
        ),
        (
            lambda: one_hot @ weight.T,
            "these are the rows of the transposed weight (one_hot @ weight.T): weight is already (V, C), "
            "with one row per token id, so multiply one_hot @ weight without transposing.",
        ),
        (
            lambda: expected.movedim(-1, 0),
            "the result is transposed (as from weight.T @ one_hot.T), one column per token. One row per "
            "token: one_hot (..., V) @ weight (V, C) gives (..., C).",
        ),
    ]
    diagnose_tensor(name, what, got, expected, variants)


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: cosine_similarity

# (shape of a, shape of b, seed): equal shapes, then shapes that only broadcast.
_COSINE_CASES: list[tuple[tuple[int, ...], tuple[int, ...], int]] = [
    ((6,), (6,), 0),
    ((4, 8), (4, 8), 1),
    ((5,), (7, 5), 2),
    ((3, 1, 6), (1, 4, 6), 3),
]

_BROADCAST_HINT = (
    "cosine_similarity must work on any shapes (..., C) that broadcast, e.g. a (C,) against b (V, C) giving "
    "(V,). Reduce over the last dimension only: (a * b).sum(dim=-1) divided by a.norm(dim=-1) * "
    "b.norm(dim=-1). torch.dot and a @ b only work for single vectors."
)


def check_cosine_similarity(answer: Any, cases: list | None = None) -> Passed:
    """Check `cosine_similarity(a, b)` over the last dimension, with broadcasting.

    A case is `(a_shape, b_shape, seed)`; both end in the same C, the other dimensions broadcast.
    """
    name = Graded(ref.cosine_similarity)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _COSINE_CASES)
    for tag, (a_shape, b_shape, seed) in chosen:
        a = random_tensor(*a_shape, seed=seed)
        b = random_tensor(*b_shape, seed=seed + 100, scale=3.0)  # other lengths than a, so the norms matter
        _cosine_case(name, answer, a, b, tag)
    return Passed(name, len(chosen), hidden=cases is not None)


def _cosine_case(name: str, answer: Any, a: Tensor, b: Tensor, tag: str | None) -> None:
    expected = ref.cosine_similarity(a, b)  # (...)
    a_in, b_in = a.clone(), b.clone()
    what = call_label(name, f"a of shape {tuple(a.shape)}, b of shape {tuple(b.shape)}", tag)
    broadcasts = a.dim() > 1 or b.dim() > 1
    hints: list[Hint] = [(lambda m: "RuntimeError" in m or "IndexError" in m, _BROADCAST_HINT)] if broadcasts else []
    got = tensor_result(name, call_answer(name, answer, a_in, b_in, what=what, hints=hints), what)
    expect_unchanged(name, {"a": (a_in, a), "b": (b_in, b)}, what)
    dot = (a * b).sum(-1)  # (...)
    norm_a, norm_b = a.norm(dim=-1), b.norm(dim=-1)  # (...) each
    variants: list[Variant] = [
        (
            lambda: dot,
            "this is the plain dot product a · b. Cosine similarity divides it by both lengths, "
            "|a| |b|, so that only the angle counts and the result lies in [-1, 1].",
        ),
        (lambda: dot / norm_a, "you divided by |a| only; divide the dot product by |a| * |b|."),
        (lambda: dot / norm_b, "you divided by |b| only; divide the dot product by |a| * |b|."),
        (
            lambda: dot / (norm_a**2 * norm_b**2),
            "you divided by the squared lengths (a · a)(b · b); divide by the lengths themselves, "
            "|a| = sqrt(a · a) (a.norm(dim=-1)).",
        ),
        (
            lambda: dot / (a.norm() * b.norm()),
            "the lengths were taken over the whole tensor (a.norm()); take them over the last dimension, "
            "a.norm(dim=-1), so that every vector is divided by its own length.",
        ),
    ]
    if a.dim() == 2 and b.dim() == 2:
        all_pairs = ref.cosine_similarity(a[:, None, :], b[None, :, :])  # (rows of a, rows of b)
        variants.append(
            (
                lambda: all_pairs,
                "you returned the similarities of all pairs of rows (as from a @ b.T). The contract pairs "
                "a[..., i, :] with b[..., i, :] by broadcasting: the result has the broadcast shape of a and b "
                "without their last dimension.",
            )
        )
    diagnose_tensor(name, what, got, expected, variants, hint="Reduce over the last dimension (dim=-1).")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: most_similar

# A small case where the three usual measures disagree (with k = 3):
#   cosine (right)      rows [1, 2, 3]  — the best directions
#   dot product         rows [0, 2, 3]  — row 0 is long, so it wins without pointing the right way
#   Euclidean distance  rows [1, 3, 4]  — short rows are close to everything
#   ascending cosine    rows [4, 0, 3]
_DISAGREE_QUERY = [1.0, 0.0]
_DISAGREE_MATRIX = [[10.0, 10.0], [0.5, 0.1], [3.0, 1.0], [1.2, -0.6], [-1.0, 0.2]]

# (V, C, k, seed, query_row): query_row None draws a random query, an int uses that row of the matrix as
# the query (then the best match is the query itself). Or ("explicit", query, matrix, k).
_SIMILAR_CASES: list[tuple] = [
    ("explicit", _DISAGREE_QUERY, _DISAGREE_MATRIX, 3),
    (12, 4, 3, 0, None),
    (20, 8, 5, 1, 7),
    (6, 3, 6, 2, None),
]


def _similar_inputs(case: tuple) -> tuple[Tensor, Tensor, int, int | None]:
    if case[0] == "explicit":
        _, query, matrix, k = case
        return torch.tensor(query), torch.tensor(matrix), k, None
    V, C, k, seed, query_row = case
    # Rows of very different lengths: ranking by dot product or by distance then differs from cosine.
    lengths = torch.exp(random_tensor(V, 1, seed=seed + 200))  # (V, 1)
    matrix = random_tensor(V, C, seed=seed) * lengths  # (V, C)
    query = matrix[query_row].clone() if query_row is not None else random_tensor(C, seed=seed + 100)
    return query, matrix, k, query_row


def check_most_similar(answer: Any, cases: list | None = None) -> Passed:
    """Check `most_similar(query, matrix, k)`: the k row indices of highest cosine similarity, best first.

    A case is `(V, C, k, seed, query_row)` (random rows of varied lengths; `query_row` None for a random query,
    or the row used as the query) or `("explicit", query, matrix, k)` with nested lists.
    """
    name = Graded(ref.most_similar)
    check_definition(answer, name)
    chosen = tagged_cases(cases, _SIMILAR_CASES)
    for tag, case in chosen:
        query, matrix, k, query_row = _similar_inputs(case)
        expected = ref.most_similar(query, matrix, k)  # (k,)
        scores = ref.cosine_similarity(query, matrix)  # (V,)
        query_in, matrix_in = query.clone(), matrix.clone()
        V, C = matrix.shape
        what = call_label(name, f"query of shape ({C},), matrix of shape ({V}, {C}), k={k}", tag)
        got = call_answer(name, answer, query_in, matrix_in, k, what=what)
        expect_unchanged(name, {"query": (query_in, query), "matrix": (matrix_in, matrix)}, what)
        _check_ranking(name, what, got, expected, scores, query, matrix, k, query_row, shown=tag is None)
    return Passed(name, len(chosen), hidden=cases is not None)


def _check_ranking(
    name: str,
    what: str,
    got: Any,
    expected: Tensor,
    scores: Tensor,
    query: Tensor,
    matrix: Tensor,
    k: int,
    query_row: int | None,
    shown: bool,
) -> None:
    """Name the mistake behind a wrong ranking; `shown` False (a hidden case) leaves out indices and values."""
    if isinstance(got, tuple) and len(got) == 2 and all(isinstance(g, Tensor) for g in got):
        raise GradingError(
            name,
            f"{what} returned a pair of tensors (torch.topk gives (values, indices)); return only the indices, "
            "e.g. torch.topk(similarities, k).indices.",
        )
    if isinstance(got, list):
        raise GradingError(name, f"{what} returned a list; return a LongTensor (e.g. torch.tensor(your_list)).")
    got = tensor_result(name, got, what)
    if got.is_floating_point():
        top_values = torch.sort(scores, descending=True).values[:k]
        if close(got, top_values, 1e-5, 1e-4):
            raise GradingError(
                name, f"{what} returned the similarity values; return the row indices of those rows instead."
            )
        raise GradingError(name, f"{what} should return row indices (torch.long), got dtype {got.dtype}.")
    if got.dtype != torch.long:
        raise GradingError(name, f"{what} should return a LongTensor of row indices, got dtype {got.dtype}.")
    if torch.equal(got, expected):
        return
    got_list, want = got.tolist(), expected.tolist()
    order = torch.sort(scores, descending=True, stable=True).indices  # (V,) best first
    variants: list[Variant] = [
        (
            lambda: order[: k + 1],
            "you returned k + 1 indices; return exactly k.",
        ),
        (
            lambda: order[1 : k + 1],
            "you left out the best match"
            + (f", row {want[0]}" if shown else "")
            + (
                " — here the query is itself a row of the matrix, so it is its own nearest neighbour "
                "(similarity 1). The contract ranks every row; leaving out the query word is the caller's job "
                "(the lesson's analogy code does it)."
                if query_row is not None
                else "."
            ),
        ),
        (
            lambda: torch.sort(scores, descending=False, stable=True).indices[:k],
            "these are the rows with the *lowest* similarity: sort in descending order (descending=True, or "
            "torch.topk, which returns the largest values first).",
        ),
        (
            lambda: expected.flip(0),
            "the right rows, but in ascending order: the most similar row comes first.",
        ),
        (
            lambda: torch.sort(matrix @ query, descending=True, stable=True).indices[:k],
            "you ranked the rows by their dot product with the query. A long row then wins without pointing in "
            "the same direction: divide by both lengths (cosine similarity) before ranking.",
        ),
        (
            lambda: torch.sort((matrix - query).norm(dim=-1), stable=True).indices[:k],
            "you ranked the rows by Euclidean distance to the query. Short rows are close to everything that "
            "way: rank by cosine similarity (the angle) instead.",
        ),
    ]
    mistake = find_mistake(variants, lambda value: value.tolist() == got_list, lambda value: value.tolist() == want)
    if mistake is not None:
        raise GradingError(name, f"{what} returned {got_list}: {mistake}" if shown else f"{what}: {mistake}")
    if len(got_list) != k:
        raise GradingError(name, f"{what} returned {len(got_list)} indices; return exactly k.")
    if not shown:
        raise GradingError(name, f"{what} returned the wrong rows: rank every row by descending cosine similarity.")
    raise GradingError(
        name,
        f"{what} returned {got_list}, expected {want} (rows by descending cosine similarity; the best has "
        f"similarity {float(scores[want[0]]):.3f}).",
    )
