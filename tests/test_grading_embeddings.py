"""Lesson 02 graders: the lesson's answers pass; each common mistake is named; the reference earns nothing."""

from __future__ import annotations

import re

import pytest

from course_lib import embeddings
from course_lib.grading import GradingError
from course_lib.grading.embeddings import check_cosine_similarity, check_most_similar, check_one_hot_embed
from tests.answers import assert_passes, define, hidden_cases

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

# The hidden cases of the lesson notebook, as its hidden test cells pass them.
HIDDEN = hidden_cases("02_embeddings")

CHECKS = {
    "one_hot_embed": (check_one_hot_embed, ONE_HOT_EMBED),
    "cosine_similarity": (check_cosine_similarity, COSINE_SIMILARITY),
    "most_similar": (check_most_similar, MOST_SIMILAR),
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_lesson_answers_pass_visible_and_hidden_cases(name):
    check, code = CHECKS[name]
    answer = define(code, name)
    assert "visible checks passed" in repr(check(answer))
    assert "hidden checks passed" in repr(check(answer, cases=HIDDEN[name]))


@pytest.mark.parametrize("name", list(CHECKS))
def test_reference_agrees_with_its_grader_when_the_guard_is_off(name, no_guard):
    # Only the guard stops the reference itself: the grader's cases are within its contract.
    assert set(HIDDEN) == set(CHECKS)
    check, _ = CHECKS[name]
    assert_passes(check, getattr(embeddings, name), HIDDEN[name])


ONE_HOT = "import torch.nn.functional as F\n\ndef f(ids, weight):\n    return {}\n"
COSINE = "import torch\n\ndef f(a, b):\n    return {}\n"
SIMILAR = (
    "import torch\n\ndef f(query, matrix, k):\n"
    "    scores = (matrix @ query) / (matrix.norm(dim=-1) * query.norm())\n"
    "    return {}\n"
)


@pytest.mark.parametrize(
    "check, code, words",
    [
        # one_hot_embed
        (check_one_hot_embed, ONE_HOT.format("F.one_hot(ids, weight.shape[0]).float()"), "one-hot matrix itself"),
        (check_one_hot_embed, ONE_HOT.format("F.one_hot(ids, weight.shape[0]).float() @ weight.T"), "transposed"),
        (check_one_hot_embed, ONE_HOT.format("weight.T @ F.one_hot(ids, weight.shape[0]).float().T"), "transposed"),
        (check_one_hot_embed, ONE_HOT.format("F.one_hot(ids).float() @ weight"), "num_classes=V"),
        (check_one_hot_embed, ONE_HOT.format("F.one_hot(ids, weight.shape[0]) @ weight"), "dtype"),
        (check_one_hot_embed, "def f(ids, weight):\n    raise NotImplementedError()", "not written yet"),
        (check_one_hot_embed, ONE_HOT.format("None"), "forget the `return`"),
        # cosine_similarity
        (check_cosine_similarity, COSINE.format("(a * b).sum(-1)"), "plain dot product"),
        (check_cosine_similarity, COSINE.format("torch.dot(a, b) / (a.norm() * b.norm())"), "must work on any shapes"),
        (check_cosine_similarity, COSINE.format("a @ b / (a.norm(dim=-1) * b.norm(dim=-1))"), "broadcast"),
        (check_cosine_similarity, COSINE.format("(a * b).sum(-1) / (a.norm() * b.norm())"), "over the whole tensor"),
        (check_cosine_similarity, COSINE.format("(a * b).sum(-1) / a.norm(dim=-1)"), "divided by |a| only"),
        (check_cosine_similarity, COSINE.format("(a * b).sum(-1) / ((a * a).sum(-1) * (b * b).sum(-1))"), "squared"),
        (
            check_cosine_similarity,
            COSINE.format(
                "(a @ b.T) / (a.norm(dim=-1)[:, None] * b.norm(dim=-1)) if a.dim() == 2 "
                "else (a * b).sum(-1) / (a.norm() * b.norm())"
            ),
            "all pairs of rows",
        ),
        (check_cosine_similarity, COSINE.format("(a * b).sum(0) / (a.norm(dim=0) * b.norm(dim=0))"), "dim=-1"),
        # most_similar
        (check_most_similar, SIMILAR.format("torch.argsort(scores)[:k]"), "lowest"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k).indices.flip(0)"), "ascending order"),
        (check_most_similar, SIMILAR.format("torch.topk(matrix @ query, k).indices"), "dot product"),
        (check_most_similar, SIMILAR.format("torch.argsort((matrix - query).norm(dim=-1))[:k]"), "Euclidean distance"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k + 1).indices"), "k + 1"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k)"), "only the indices"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k).values"), "similarity values"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k).indices.tolist()"), "LongTensor"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k).indices.int()"), "LongTensor"),
    ],
)
def test_common_mistakes_are_named(check, code, words):
    with pytest.raises(GradingError, match=re.escape(words)):
        check(define(code, "f"))


def test_leaving_out_the_query_itself_is_named_when_the_query_is_a_row():
    # When the query is row 3 of the matrix, it is its own best match: skipping the top result drops it.
    code = SIMILAR.format("torch.topk(scores, k + 1).indices[1:]")
    with pytest.raises(GradingError, match="the query is itself a row of the matrix"):
        check_most_similar(define(code, "f"), cases=[(30, 6, 4, 10, 3)])


def test_changing_an_input_in_place_is_named():
    code = """
def f(a, b):
    a /= a.norm(dim=-1, keepdim=True)
    return (a * b).sum(-1) / b.norm(dim=-1)
"""
    with pytest.raises(GradingError, match="changed its argument `a` in place"):
        check_cosine_similarity(define(code, "f"))


@pytest.mark.parametrize(
    "name, answer",
    [
        ("one_hot_embed", embeddings.one_hot_embed),
        ("cosine_similarity", embeddings.cosine_similarity),
        ("most_similar", embeddings.most_similar),
        (
            "one_hot_embed",
            define(
                "from course_lib import embeddings as ref\n\ndef f(ids, w):\n    return ref.one_hot_embed(ids, w)", "f"
            ),
        ),
        (
            "most_similar",
            define(
                "from course_lib.embeddings import most_similar as ms\n\ndef f(q, m, k):\n    return ms(q, m, k)", "f"
            ),
        ),
    ],
)
def test_the_reference_earns_nothing(name, answer):
    check, _ = CHECKS[name]
    with pytest.raises(GradingError, match=f"write `{name}` yourself"):
        check(answer)


def test_calling_the_reference_at_run_time_earns_nothing():
    # Reached through an attribute at call time only, so only the call-time guard can see it.
    code = """
import importlib

def f(q, m, k):
    module = importlib.import_module("course_lib.embeddings")
    return getattr(module, "most_" + "similar")(q, m, k)
"""
    with pytest.raises(GradingError, match="write `most_similar` yourself"):
        check_most_similar(define(code, "f"))


@pytest.mark.parametrize(
    "check, code, words",
    [
        (check_one_hot_embed, ONE_HOT.format("F.one_hot(ids, weight.shape[0]).float()"), "one-hot matrix itself"),
        (check_cosine_similarity, COSINE.format("(a * b).sum(-1)"), "plain dot product"),
        (check_most_similar, SIMILAR.format("torch.topk(matrix @ query, k).indices"), "dot product"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k + 1).indices[1:]"), "left out the best match"),
        (check_most_similar, SIMILAR.format("torch.topk(scores, k).indices[torch.randperm(k)]"), "wrong rows"),
    ],
)
def test_hidden_cases_are_named_by_number_and_their_inputs_stay_hidden(check, code, words):
    name = check.__name__.removeprefix("check_")
    with pytest.raises(GradingError) as failure:
        check(define(code, "f"), cases=HIDDEN[name])
    message = failure.value.message
    assert "<hidden case " in message and words in message
    assert "of shape (" not in message and "returned [" not in message
