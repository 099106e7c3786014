"""Graders of lesson 08 — A tiny decoder-only model (`statquest_dataset`, `decoder_only_forward`,
`greedy_generate`).

The exercises take and return plain data (tensors, a dict of tensors, lists of ints), so they grade the same way
in the notebook and in the trusted grader's sandbox. The model is passed as its state dict, built from a seed
here; the expected values come from `course_lib.statquest` outside the learner's call, and on a mismatch each
known mistake is recomputed on the same input and named when the answer equals it.

Shape legend: B batch, T time, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from course_lib import statquest as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, tagged_cases
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor, find_mistake
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.statquest_generate import check_greedy_generate, model_params  # exercise 3 lives there

__all__ = ["check_statquest_dataset", "check_decoder_only_forward", "check_greedy_generate"]


def _words(ids: list[int]) -> str:
    return " ".join(ref.TOKENS[i] if 0 <= i < len(ref.TOKENS) else str(i) for i in ids)


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: statquest_dataset
# ------------------------------------------------------------------------------------------------------------

# "values": the tensors themselves; "fresh": a second call is not changed by editing the first call's tensors
_DATASET_CASES: list = ["values", "fresh"]


def _dataset_variants(inputs: Tensor, labels: Tensor) -> list[Variant]:
    eos = torch.full_like(labels[:, :1], ref.EOS_ID)
    prompt_ignored = labels.clone()
    prompt_ignored[:, :3] = -100
    return [
        (
            lambda: (inputs, inputs),
            "the labels are not shifted: they equal the inputs. Position t is trained to predict the NEXT "
            "token, so labels[:, t] = inputs[:, t + 1], and the last label is <EOS>.",
        ),
        (
            lambda: (inputs, torch.cat([eos, inputs[:, :-1]], dim=1)),
            "the labels are shifted the wrong way (to the right, <EOS> first). Shift them left: labels[:, t] is "
            "the token after inputs[:, t], and <EOS> comes last.",
        ),
        (
            lambda: (labels, inputs),
            "inputs and labels are swapped: return (inputs, labels).",
        ),
        (
            lambda: (inputs.flip(0), labels.flip(0)),
            "the two sequences are in the other order: row 0 is 'what is statquest <EOS> awesome'.",
        ),
        (
            lambda: (inputs, prompt_ignored),
            "the prompt's positions were left out of the labels (-100). In this toy the prompt is also part of "
            "the labels: every position, the prompt's included, predicts its next token.",
        ),
    ]


def _relabelled(got: tuple[Tensor, Tensor], expected: tuple[Tensor, Tensor]) -> dict[int, int] | None:
    """The renaming of ids that turns `expected` into `got`, when there is one and it is not the identity."""
    mapping: dict[int, int] = {}
    for g, e in zip(got, expected, strict=True):
        for a, b in zip(e.flatten().tolist(), g.flatten().tolist(), strict=True):
            if mapping.setdefault(a, b) != b:
                return None
    if len(set(mapping.values())) != len(mapping) or all(a == b for a, b in mapping.items()):
        return None
    return mapping


@keeps_rng
def check_statquest_dataset(answer: Any, cases: list | None = None) -> Passed:
    """Check `statquest_dataset() -> (inputs, labels)`, both LongTensor[2, 5] with the contract's ids.

    A case is "values" (compare with the contract) or "fresh" (each call returns new tensors).
    """
    name = Graded(ref.statquest_dataset)
    check_definition(answer, name)
    run = tagged_cases(cases, _DATASET_CASES)
    expected = ref.statquest_dataset()
    for tag, kind in run:
        what = call_label(name, "", tag)
        got = _dataset_pair(name, call_without_grad(name, answer, what=what), what)
        if kind == "fresh":
            for tensor in got:
                tensor.fill_(0)
            again = _dataset_pair(name, call_without_grad(name, answer, what=what), what)
            if any(not torch.equal(a, e) for a, e in zip(again, expected, strict=True)):
                raise GradingError(
                    name,
                    f"{what}: after the tensors of one call were changed, the next call returned the changed "
                    "values. Build new tensors on every call (torch.tensor(...) inside the function).",
                )
            continue
        _compare_dataset(name, what, got, expected)
    return Passed(name, len(run), hidden=cases is not None)


def _same_pair(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _compare_dataset(name: str, what: str, got: tuple[Tensor, Tensor], expected: tuple[Tensor, Tensor]) -> None:
    """Pass when equal; else name the mistake: a known variant, a renaming of the ids, or the first wrong row."""
    if _same_pair(got, expected):
        return
    mistake = find_mistake(
        _dataset_variants(*expected), lambda value: _same_pair(got, value), lambda value: _same_pair(value, expected)
    )
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    mapping = _relabelled(got, expected)
    if mapping is not None:
        wrong = ", ".join(f"{ref.TOKENS[a]}: {b}" for a, b in sorted(mapping.items()) if a != b)
        raise GradingError(
            name,
            f"{what}: wrong ids — your tensors give {wrong}. The vocabulary is "
            "{what: 0, is: 1, statquest: 2, awesome: 3, <EOS>: 4}.",
        )
    for label, g, e in zip(("inputs", "labels"), got, expected, strict=True):
        for row in range(2):
            if not torch.equal(g[row], e[row]):
                raise GradingError(
                    name,
                    f"{what}: {label} row {row} is {g[row].tolist()}, expected {e[row].tolist()} "
                    f"({_words(e[row].tolist())}).",
                )


def _dataset_pair(name: str, got: Any, what: str) -> tuple[Tensor, Tensor]:
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise GradingError(name, f"{what} should return a pair (inputs, labels), got {describe(got)}.")
    for label, value in zip(("inputs", "labels"), got, strict=True):
        if not isinstance(value, Tensor):
            raise GradingError(name, f"{what}: {label} should be a tensor of shape (2, 5), got {describe(value)}.")
        if tuple(value.shape) != (2, 5):
            raise GradingError(
                name,
                f"{what}: {label} has shape {tuple(value.shape)}; both tensors are (2, 5): two sequences of five "
                "tokens, the prompt's four (with its <EOS>) and 'awesome'.",
            )
        if value.dtype != torch.long:
            raise GradingError(
                name,
                f"{what}: {label} has dtype {value.dtype}; ids are torch.long (nn.Embedding and "
                "F.cross_entropy need integer ids).",
            )
    return got[0], got[1]


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: decoder_only_forward
# ------------------------------------------------------------------------------------------------------------

# (B, T, V, C, max_len, seed): B != T and C != T, so that axes mixed up give errors or other numbers
_FORWARD_CASES: list = [(2, 5, 5, 2, 6, 0), (3, 4, 7, 4, 6, 1), (1, 6, 5, 2, 6, 2)]


def _forward(
    p: dict[str, Tensor],
    ids: Tensor,
    *,
    mask: str = "causal",
    scale: str = "sqrt",
    softmax_dim: int = -1,
    residual: bool = True,
    position: bool = True,
    transposed: bool = True,
    bias: bool = True,
) -> Tensor:
    """`decoder_only_forward` with one piece changed (each keyword names a piece), in float64."""
    p = {k: v.double() for k, v in p.items()}
    T = ids.shape[1]
    x = p["we.weight"][ids] + (p["pe.pe"][:T] if position else 0)  # (B, T, C)
    linear = (lambda z, w: z @ w.T) if transposed else (lambda z, w: z @ w)
    q, k, v = (linear(x, p[f"self_attention.W_{n}.weight"]) for n in "qkv")  # (B, T, C)
    scores = q @ k.transpose(-2, -1)  # (B, T, T)
    scores = scores / {"sqrt": math.sqrt(k.shape[-1]), "none": 1.0, "d": k.shape[-1]}[scale]
    allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T), True = may attend
    if mask == "causal":
        scores = scores.masked_fill(~allowed, float("-inf"))
    elif mask == "inverted":  # the tutorial's True = blocked mask passed where True = may attend
        scores = scores.masked_fill(allowed, -1e9)
    elif mask == "zero":
        scores = scores.masked_fill(~allowed, 0.0)
    out = x + scores.softmax(dim=softmax_dim) @ v if residual else scores.softmax(dim=softmax_dim) @ v
    return out @ p["fc_layer.weight"].T + (p["fc_layer.bias"] if bias else 0)  # (B, T, V)


_FORWARD_MISTAKES: list[tuple[dict, str]] = [
    (
        dict(mask="inverted"),
        "the mask is inverted: each position attended to the LATER tokens and not to itself or the earlier "
        "ones. The original tutorial's mask is True = blocked (filled with a large negative number); this "
        "course's causal mask is True = may attend: scores.masked_fill(~mask, float('-inf')).",
    ),
    (
        dict(mask="none"),
        "there is no causal mask: every position attended to the tokens after it, which a decoder must not "
        "see. Fill the scores above the diagonal with -inf before the softmax.",
    ),
    (
        dict(mask="zero"),
        "the masked scores were set to 0, not -inf: exp(0) = 1, so the future still gets weight. Use float('-inf').",
    ),
    (dict(scale="none"), "the scores were not scaled: divide q @ kᵀ by sqrt(d_model)."),
    (dict(scale="d"), "the scores were divided by d_model; divide by its square root, sqrt(d_model)."),
    (
        dict(softmax_dim=-2),
        "the softmax ran over the queries (dim -2). The tutorial's col_dim=1 is the key axis only for one "
        "unbatched (T, T) matrix; batch-first, normalise over the last dimension, dim=-1.",
    ),
    (
        dict(residual=False),
        "the residual connection is missing: the output layer reads x + attention(x), not attention(x) alone.",
    ),
    (dict(position=False), "the position encoding was not added: x = we.weight[ids] + pe.pe[:T]."),
    (
        dict(transposed=False),
        "the attention weights were used untransposed. An nn.Linear's weight is (out, in) and computes "
        "x @ W.T: q = x @ params['self_attention.W_q.weight'].T.",
    ),
    (dict(bias=False), "the output layer's bias is missing: logits = x @ fc_layer.weight.T + fc_layer.bias."),
]


def _forward_variants(params: dict[str, Tensor], ids: Tensor) -> list[Variant]:
    return [(lambda kw=kw: _forward(params, ids, **kw), message) for kw, message in _FORWARD_MISTAKES]


@keeps_rng
def check_decoder_only_forward(answer: Any, cases: list | None = None) -> Passed:
    """Check `decoder_only_forward(params, token_ids) -> logits (B, T, V)` on seeded state dicts.

    A case is `(B, T, V, C, max_len, seed)`.
    """
    name = Graded(ref.decoder_only_forward)
    check_definition(answer, name)
    run = tagged_cases(cases, _FORWARD_CASES)
    for tag, (B, T, V, C, max_len, seed) in run:
        params = model_params(V, C, max_len, seed)
        ids = torch.randint(0, V, (B, T), generator=core.generator(seed + 10))  # (B, T)
        expected = ref.decoder_only_forward(params, ids)
        shown = f"params of a model with V={V}, d_model={C}, max_len={max_len}; token_ids {describe(ids)}"
        what = call_label(name, shown, tag)
        given = {k: v.clone() for k, v in params.items()}
        given_ids = ids.clone()
        got = call_without_grad(name, answer, given, given_ids, what=what)
        changed = [k for k in params if not torch.equal(given[k], params[k])]
        if changed or not torch.equal(given_ids, ids):
            argument = f"params[{changed[0]!r}]" if changed else "token_ids"
            raise GradingError(name, f"{what} changed {argument} in place; compute new tensors.")
        if not isinstance(got, Tensor):
            raise GradingError(name, f"{what} should return the logits, a tensor of shape {(B, T, V)}.")
        if got.is_floating_point() and tuple(got.shape) == (B, T, V) and torch.isnan(got).any():
            rows = sorted({int(t) for t in torch.isnan(got).nonzero()[:, 1]})
            raise GradingError(
                name,
                f"{what}: the logits hold NaN at positions {rows}: a query whose every key was masked with -inf "
                "gets a softmax of 0/0. Is the mask inverted? The original tutorial's mask is True = blocked; "
                "this course's is True = may attend, and the blocked scores are filled: masked_fill(~mask, -inf).",
            )
        got = got.double() if got.is_floating_point() else got
        diagnose_tensor(name, what, got, expected.double(), _forward_variants(params, ids))
    return Passed(name, len(run), hidden=cases is not None)
