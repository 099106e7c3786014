"""Lesson 02 graders: the lesson's answers pass; each common mistake is named; the reference earns nothing.

The tests every lesson gets, and the tables below, run through tests/grader_kit.py.
"""

from __future__ import annotations

import pytest

from course_lib.grading import embeddings as grading
from tests.grader_kit import GraderKit, LessonGraderTests, wrong_answer

# The answers of the lesson notebook (notebooks/source/02_embeddings), as a learner would write them.
ONE_HOT_EMBED = """
import torch
import torch.nn.functional as F

def one_hot_embed(token_ids, weight):
    one_hot = F.one_hot(token_ids, num_classes=weight.shape[0]).to(weight.dtype)  # (..., V)
    return one_hot @ weight  # (..., V) @ (V, C) -> (..., C)
"""
COSINE_SIMILARITY = """
def cosine_similarity(a, b):
    dot = (a * b).sum(dim=-1)  # (...)
    return dot / (a.norm(dim=-1) * b.norm(dim=-1))
"""
MOST_SIMILAR = """
import torch

def most_similar(query, matrix, k):
    scores = (matrix @ query) / (matrix.norm(dim=-1) * query.norm())  # (V,)
    return torch.argsort(scores, descending=True, stable=True)[:k]
"""

KIT = GraderKit(
    "02_embeddings",
    grading,
    {"one_hot_embed": ONE_HOT_EMBED, "cosine_similarity": COSINE_SIMILARITY, "most_similar": MOST_SIMILAR},
)


ONE_HOT = "import torch.nn.functional as F\n\ndef f(ids, weight):\n    return {}\n"
COSINE = "import torch\n\ndef f(a, b):\n    return {}\n"
SIMILAR = (
    "import torch\n\ndef f(query, matrix, k):\n"
    "    scores = (matrix @ query) / (matrix.norm(dim=-1) * query.norm())\n"
    "    return {}\n"
)

_COSINE_IN_PLACE = """
def f(a, b):
    a /= a.norm(dim=-1, keepdim=True)
    return (a * b).sum(-1) / b.norm(dim=-1)
"""
_SIMILAR_AT_RUN_TIME = """
import course_lib.embeddings

def f(q, m, k):
    return getattr(course_lib.embeddings, "most_" + "similar")(q, m, k)
"""

# Each known mistake, as a whole answer built from one of the templates above, and what its message names.
MISTAKES = [
    # one_hot_embed
    wrong_answer(
        "one_hot_embed",
        ONE_HOT.format("F.one_hot(ids, weight.shape[0]).float()"),
        "one-hot matrix itself",
        id="one-hot-matrix-itself",
    ),
    wrong_answer(
        "one_hot_embed",
        ONE_HOT.format("F.one_hot(ids, weight.shape[0]).float() @ weight.T"),
        "transposed",
        id="one-hot-times-the-transposed-weight",
    ),
    wrong_answer(
        "one_hot_embed",
        ONE_HOT.format("weight.T @ F.one_hot(ids, weight.shape[0]).float().T"),
        "transposed",
        id="one-hot-transposed-product",
    ),
    wrong_answer(
        "one_hot_embed", ONE_HOT.format("F.one_hot(ids).float() @ weight"), "num_classes=V", id="one-hot-no-num-classes"
    ),
    wrong_answer(
        "one_hot_embed", ONE_HOT.format("F.one_hot(ids, weight.shape[0]) @ weight"), "dtype", id="one-hot-integer-dtype"
    ),
    wrong_answer(
        "one_hot_embed",
        "def f(ids, weight):\n    raise NotImplementedError()",
        "not written yet",
        id="one-hot-unwritten",
    ),
    wrong_answer("one_hot_embed", ONE_HOT.format("None"), "forget the `return`", id="one-hot-without-return"),
    # cosine_similarity
    wrong_answer(
        "cosine_similarity", COSINE.format("(a * b).sum(-1)"), "plain dot product", id="cosine-plain-dot-product"
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format("torch.dot(a, b) / (a.norm() * b.norm())"),
        "must work on any shapes",
        id="cosine-torch-dot",
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format("a @ b / (a.norm(dim=-1) * b.norm(dim=-1))"),
        "broadcast",
        id="cosine-matmul",
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format("(a * b).sum(-1) / (a.norm() * b.norm())"),
        "over the whole tensor",
        id="cosine-norms-over-the-whole-tensor",
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format("(a * b).sum(-1) / a.norm(dim=-1)"),
        "divided by |a| only",
        id="cosine-divided-by-a-only",
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format("(a * b).sum(-1) / ((a * a).sum(-1) * (b * b).sum(-1))"),
        "squared",
        id="cosine-squared-norms",
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format(
            "(a @ b.T) / (a.norm(dim=-1)[:, None] * b.norm(dim=-1)) if a.dim() == 2 "
            "else (a * b).sum(-1) / (a.norm() * b.norm())"
        ),
        "all pairs of rows",
        id="cosine-all-pairs-of-rows",
    ),
    wrong_answer(
        "cosine_similarity",
        COSINE.format("(a * b).sum(0) / (a.norm(dim=0) * b.norm(dim=0))"),
        "dim=-1",
        id="cosine-over-dim-0",
    ),
    # most_similar
    wrong_answer("most_similar", SIMILAR.format("torch.argsort(scores)[:k]"), "lowest", id="similar-lowest-first"),
    wrong_answer(
        "most_similar",
        SIMILAR.format("torch.topk(scores, k).indices.flip(0)"),
        "ascending order",
        id="similar-ascending-order",
    ),
    wrong_answer(
        "most_similar", SIMILAR.format("torch.topk(matrix @ query, k).indices"), "dot product", id="similar-dot-product"
    ),
    wrong_answer(
        "most_similar",
        SIMILAR.format("torch.argsort((matrix - query).norm(dim=-1))[:k]"),
        "Euclidean distance",
        id="similar-euclidean-distance",
    ),
    wrong_answer("most_similar", SIMILAR.format("torch.topk(scores, k + 1).indices"), "k + 1", id="similar-k-plus-1"),
    wrong_answer(
        "most_similar", SIMILAR.format("torch.topk(scores, k)"), "only the indices", id="similar-values-and-indices"
    ),
    wrong_answer(
        "most_similar", SIMILAR.format("torch.topk(scores, k).values"), "similarity values", id="similar-values"
    ),
    wrong_answer(
        "most_similar", SIMILAR.format("torch.topk(scores, k).indices.tolist()"), "LongTensor", id="similar-list"
    ),
    wrong_answer(
        "most_similar", SIMILAR.format("torch.topk(scores, k).indices.int()"), "LongTensor", id="similar-int32"
    ),
    # When the query is row 3 of the matrix, it is its own best match: skipping the top result drops it.
    wrong_answer(
        "most_similar",
        SIMILAR.format("torch.topk(scores, k + 1).indices[1:]"),
        "the query is itself a row of the matrix",
        cases=[(30, 6, 4, 10, 3)],
        id="similar-leaving-out-the-query-itself",
    ),
    wrong_answer(
        "cosine_similarity",
        _COSINE_IN_PLACE,
        "changed its argument `a` in place",
        id="cosine-changes-an-input-in-place",
    ),
]

# Answers that call the reference, by name or (at run time only) through an attribute.
BORROWED = [
    wrong_answer(
        "one_hot_embed",
        "from course_lib import embeddings as ref\n\ndef f(ids, w):\n    return ref.one_hot_embed(ids, w)",
        "write `one_hot_embed` yourself",
        id="one-hot-calling-the-reference",
    ),
    wrong_answer(
        "most_similar",
        "from course_lib.embeddings import most_similar as ms\n\ndef f(q, m, k):\n    return ms(q, m, k)",
        "write `most_similar` yourself",
        id="similar-calling-the-reference",
    ),
    # Reached through an attribute at call time only, so only the call-time guard can see it.
    wrong_answer(
        "most_similar",
        _SIMILAR_AT_RUN_TIME,
        "write `most_similar` yourself",
        id="similar-calling-the-reference-at-run-time",
    ),
]


@pytest.mark.parametrize(
    "name, code, words",
    [
        pytest.param(
            "one_hot_embed",
            ONE_HOT.format("F.one_hot(ids, weight.shape[0]).float()"),
            "one-hot matrix itself",
            id="one-hot-matrix-itself",
        ),
        pytest.param(
            "cosine_similarity", COSINE.format("(a * b).sum(-1)"), "plain dot product", id="cosine-plain-dot-product"
        ),
        pytest.param(
            "most_similar",
            SIMILAR.format("torch.topk(matrix @ query, k).indices"),
            "dot product",
            id="similar-dot-product",
        ),
        pytest.param(
            "most_similar",
            SIMILAR.format("torch.topk(scores, k + 1).indices[1:]"),
            "left out the best match",
            id="similar-leaving-out-the-best-match",
        ),
        pytest.param(
            "most_similar",
            SIMILAR.format("torch.roll(torch.topk(scores, k).indices, 1)"),
            "wrong rows",
            id="similar-shuffled",
        ),
    ],
)
def test_hidden_cases_are_named_by_number_and_their_inputs_stay_hidden(name, code, words):
    message = KIT.fails(name, code, "<hidden case ", words, cases=KIT.hidden(name))
    assert "of shape (" not in message and "returned [" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED
