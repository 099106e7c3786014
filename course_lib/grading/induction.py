"""Graders of lesson 13 — What a trained transformer learned (`prev_token_scores`, `induction_scores`,
`ablate_head`).

The two scores are compared with `course_lib.induction` on attention patterns drawn here (each row a softmax over
keys, causal or over every key, so that a transposed pattern gives other numbers), and a wrong score is compared
with the known mistakes: a diagonal off by one either way, the queries and keys swapped, the first position (or
the first copy) counted in the mean, a sum instead of a mean, averages over the heads or the batch. The ablation
is checked through `AblationProbe`, built where the answer lives (`core.make`): it runs the learner's context
manager around a real attention module and reports, as plain data, what came out inside and after the `with`, and
whether the module's parameters, hooks and attributes changed; the expected outputs are computed here with the
reference, and a wrong output is compared with the known mistakes (the wrong head, the out_proj output ablated
instead of its input, every head ablated, no effect at all, the mean over the wrong dimensions or kept from an
earlier call).

Shape legend: B batch, T time, H heads, D head size (d_head), C / d_model channels (= H * D).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import induction as ref
from course_lib.grading.attention_common import call_without_grad, keeps_rng, same_values
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, catching, describe, tagged_cases
from course_lib.grading.kit.diagnose import Variant, find_mistake
from course_lib.grading.kit.guard import check_definition
from course_lib.multihead import MultiHeadAttention, MultiHeadAttentionWrapper

__all__ = ["AblationProbe", "ablation_probe", "attention_module", "check_ablate_head", "check_induction_scores",
           "check_prev_token_scores", "attention_pattern"]  # fmt: skip


# ------------------------------------------------------------------------------------------------------------
# Attention patterns to score
# ------------------------------------------------------------------------------------------------------------


def attention_pattern(leading: list[int] | tuple[int, ...], H: int, T: int, kind: str, seed: int) -> Tensor:
    """(*leading, H, T, T) attention weights: a softmax over the keys of random scores, over the keys up to the
    query ("causal") or over every key ("dense", where the pattern and its transpose differ everywhere)."""
    scores = core.random_tensor(*leading, H, T, T, seed=seed, scale=2.0)
    if kind == "causal":
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=-1)


def _shape_mistake(got: Tensor, leading: tuple[int, ...], H: int, T: int, period: int | None = None) -> str:
    """What a score tensor of the wrong shape most likely did (empty when it is none of the known shapes)."""
    shape = tuple(got.shape)
    if shape in ((*leading, H, T - 1), (*leading, H, T)) or (period and shape == (*leading, H, T - period)):
        return "it holds one number per query position: take the mean over the queries, one score per head."
    if leading and shape == (H,):
        return "the scores were averaged over the batch too: keep every leading dimension, one score per head."
    if shape == leading or shape == ():
        return "the scores were averaged over the heads: the result has one score per head, shape (..., H)."
    if shape == (*leading, T - 1) or shape == (*leading, T):
        return "the mean was taken over the heads instead of the query positions."
    return ""


def _score_result(name: Graded, got: Any, expected: Tensor, what: str, shape_mistake: str) -> Tensor:
    if not isinstance(got, Tensor):
        raise GradingError(
            name, f"{what} should return a tensor of shape {tuple(expected.shape)}, got {describe(got)}."
        )
    if tuple(got.shape) != tuple(expected.shape):
        hint = f" {shape_mistake}" if shape_mistake else ""
        raise GradingError(name, f"{what} returned shape {tuple(got.shape)}, expected {tuple(expected.shape)}:{hint}")
    return got


def _name_or_differ(name: Graded, what: str, got: Tensor, expected: Tensor, variants: list[Variant]) -> None:
    if same_values(got, expected, atol=1e-5, rtol=1e-4):
        return
    mistake = find_mistake(
        variants,
        lambda value: same_values(got, value, atol=1e-5, rtol=1e-4),
        lambda value: same_values(value, expected, atol=1e-5, rtol=1e-4),
    )
    if mistake is not None:
        raise GradingError(name, f"{what}: {mistake}")
    core.expect_close(name, got, expected, what)


def _diagonal(attn: Tensor, offset: int) -> Tensor:
    """attn[..., t, t + offset] for every query t that has such a key: (..., H, n)."""
    return attn.diagonal(offset=offset, dim1=-2, dim2=-1)


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: prev_token_scores
# ------------------------------------------------------------------------------------------------------------

# (leading dimensions, H, T, kind, seed); T = 2 is the smallest pattern with a previous position.
_PREV_CASES: list = [
    ([2], 3, 6, "dense", 0),
    ([], 4, 5, "causal", 1),
    ([2, 1], 2, 7, "dense", 2),
    ([1], 2, 2, "dense", 3),
]


@keeps_rng
def check_prev_token_scores(answer: Any, cases: list | None = None) -> Passed:
    """Check `prev_token_scores(attn)`; a case is `(leading, H, T, kind, seed)`, kind "causal" or "dense"."""
    name = Graded(ref.prev_token_scores)
    check_definition(answer, name)
    run = tagged_cases(cases, _PREV_CASES)
    for tag, (leading, H, T, kind, seed) in run:
        attn = attention_pattern(leading, H, T, kind, seed)
        expected = ref.prev_token_scores(attn)  # (..., H)
        what = call_label(name, f"attn of shape {tuple(attn.shape)}", tag)
        given = attn.clone()
        got = call_without_grad(name, answer, given, what=what)
        core.expect_unchanged(name, {"attn": (given, attn)}, what)
        got = _score_result(name, got, expected, what, _shape_mistake(got, tuple(leading), H, T))
        _name_or_differ(name, what, got, expected, _prev_token_mistakes(attn))
    return Passed(name, len(run), hidden=cases is not None)


def _prev_token_mistakes(attn: Tensor) -> list[Variant]:
    T = attn.shape[-1]
    lower = _diagonal(attn, -1)  # (..., H, T-1): attn[t, t-1]
    itself = (
        "that is each position's weight on itself (the main diagonal). The previous position of query t is "
        "key t - 1: the diagonal one below the main one (offset=-1)."
    )
    return [
        (lambda: _diagonal(attn, 0)[..., 1:].mean(-1), itself),  # queries 1..T-1, as the right answer
        (lambda: _diagonal(attn, 0).mean(-1), itself),  # every query
        (
            lambda: _diagonal(attn, -2).mean(-1),
            "that is the weight two positions back (t - 2), off by one: the previous position is t - 1.",
        ),
        (
            lambda: _diagonal(attn, 1).mean(-1),
            "that is the weight from t - 1 on t: the queries and keys are swapped. Rows (dim -2) are the "
            "queries, columns (dim -1) the keys: read attn[..., t, t - 1].",
        ),
        (
            lambda: lower.sum(-1) / T,
            f"the sum was divided by T = {T}, counting position 0 as a query. Position 0 has no previous "
            f"position: average over the T - 1 = {T - 1} queries t = 1..T-1.",
        ),
        (
            lambda: lower.sum(-1),
            "the weights were summed, not averaged: divide by the number of queries, T - 1.",
        ),
    ]


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: induction_scores
# ------------------------------------------------------------------------------------------------------------

# (leading dimensions, H, T, period, kind, seed). The third case repeats three times over and its period is not
# T // 2; the fourth has period 1 (every token equals the one before it).
_INDUCTION_CASES: list = [
    ([2], 3, 8, 4, "causal", 0),
    ([], 2, 10, 5, "dense", 1),
    ([2], 2, 11, 3, "dense", 2),
    ([1], 3, 4, 1, "dense", 3),
]


@keeps_rng
def check_induction_scores(answer: Any, cases: list | None = None) -> Passed:
    """Check `induction_scores(attn, period)`; a case is `(leading, H, T, period, kind, seed)`. Every run also checks
    the ValueError for a period of 0 and a period of T."""
    name = Graded(ref.induction_scores)
    check_definition(answer, name)
    run = tagged_cases(cases, _INDUCTION_CASES)
    for tag, (leading, H, T, period, kind, seed) in run:
        attn = attention_pattern(leading, H, T, kind, seed)
        expected = ref.induction_scores(attn, period)  # (..., H)
        what = call_label(name, f"attn of shape {tuple(attn.shape)}, period={period}", tag)
        given = attn.clone()
        got = call_without_grad(name, answer, given, period, what=what)
        core.expect_unchanged(name, {"attn": (given, attn)}, what)
        got = _score_result(name, got, expected, what, _shape_mistake(got, tuple(leading), H, T, period))
        _name_or_differ(name, what, got, expected, _induction_mistakes(attn, period))
    for bad in (0, 4):
        _expect_period_error(name, answer, bad)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _stripe_mean(attn: Tensor, period: int, back: int) -> Tensor:
    """The mean over the queries t >= period of attn[t, t - back] (a mistake's offset `back`; the key must exist)."""
    stripe = _diagonal(attn, -back)  # attn[t, t - back] for t = max(back, 0)..
    first = max(back, 0)  # the query of the stripe's first entry
    return stripe[..., max(period - first, 0) :].mean(-1)


def _indexed_mean(attn: Tensor, period: int, back: int) -> Tensor:
    """attn[..., t, t - back] averaged over t = period..T-1 as indexing with tensors reads it: a key t - back < 0
    wraps around to the end (a mistake's offset `back`)."""
    queries = torch.arange(period, attn.shape[-1])
    return attn[..., queries, queries - back].mean(-1)


def _induction_mistakes(attn: Tensor, period: int) -> list[Variant]:
    T = attn.shape[-1]
    right = _diagonal(attn, -(period - 1))  # attn[t, t - period + 1] for t = period-1..T-1
    offsets = {
        period: "that is the weight on the earlier copy of the current token itself (key t - period). An induction "
        "head looks one position further, at the token that came next last time: key t - period + 1.",
        period - 2: "that is the weight on key t - period + 2, one position too far: the token after the earlier "
        "copy is at t - period + 1.",
        period + 1: "that is the weight on key t - period - 1, the token before the earlier copy: use t - period + 1.",
    }
    variants: list[Variant] = [
        (lambda back=back, how=how: how(attn, period, back), message)
        for back, message in offsets.items()
        for how in (_indexed_mean, _stripe_mean)
    ]
    variants += [
        (
            lambda: right.mean(-1),
            "query t = period - 1 was counted too: it is the last token of the first copy, which has no earlier "
            "copy yet. Average over t = period..T-1 only.",
        ),
        (
            lambda: right[..., 1:].sum(-1) / T,
            f"the sum was divided by T = {T}, as if the queries of the first copy counted (with weight 0). Average "
            f"over the T - period = {T - period} queries t = period..T-1.",
        ),
        (
            lambda: right[..., 1:].sum(-1),
            "the weights were summed, not averaged: divide by the number of queries, T - period.",
        ),
        (
            lambda: _diagonal(attn, period - 1)[..., 1:].mean(-1),  # attn[t - period + 1, t]
            "the queries and keys are swapped. Rows (dim -2) are the queries, columns (dim -1) the keys: read "
            "attn[..., t, t - period + 1].",
        ),
    ]
    if period != T // 2 and T // 2 >= 1:
        variants.append(
            (
                lambda: ref.induction_scores(attn, T // 2),
                f"that is the score for period T // 2 = {T // 2}: use the `period` argument ({period}), not half "
                "the length (a sequence may repeat more than once).",
            )
        )
    return variants


def _expect_period_error(name: Graded, answer: Any, period: int) -> None:
    attn = attention_pattern([1], 2, 4, "causal", 9)
    what = f"{name}(attn of shape {tuple(attn.shape)}, period={period})"
    error = call_without_grad(name, catching(answer), attn, period, what=what)
    why = "The contract raises ValueError unless 1 <= period < T: with no earlier copy (or none inside the sequence) "
    why += "there is nothing to score."
    if error is None:
        raise GradingError(name, f"{what} did not raise. {why}")
    if not isinstance(error, ValueError):
        raise GradingError(name, f"{what} raised {type(error).__name__} ({error}), expected a ValueError. {why}")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: ablate_head
# ------------------------------------------------------------------------------------------------------------


def attention_module(kind: str, d_model: int, n_heads: int, bias: bool, seed: int) -> nn.Module:
    """The attention a case ablates, in eval mode: the course's MultiHeadAttention ("fused", causal) or the
    wrapper of lesson 05's single heads ("wrapper": the heads are other modules, concatenated the same way)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "wrapper":
            module: nn.Module = MultiHeadAttentionWrapper(d_model, d_model, 16, n_heads, qkv_bias=bias)
        else:
            module = MultiHeadAttention(d_model, n_heads, causal=True, bias=bias)
    return module.eval()


class _RaisedInside(Exception):
    """What the probe raises inside the `with` block, to see that it comes out and the module is restored."""


def _snapshot(module: nn.Module) -> dict[str, Any]:
    """Everything about `module` that ablating must leave as it was: parameters and buffers (values), the hooks and
    the instance attributes of every submodule."""
    return {
        "state": {k: v.detach().clone() for k, v in module.state_dict(keep_vars=True).items()},
        "hooks": {name: (len(m._forward_pre_hooks), len(m._forward_hooks)) for name, m in module.named_modules()},
        "attributes": {name: sorted(vars(m)) for name, m in module.named_modules()},
    }


def _changed(before: dict[str, Any], module: nn.Module, weights_only: bool = False) -> str:
    """The first thing about `module` that differs from `before` ("" when nothing does); only its parameters and
    buffers with `weights_only`."""
    now = module.state_dict(keep_vars=True)
    for key, value in before["state"].items():
        if key not in now or not torch.equal(now[key].detach(), value):
            return f"the module's parameter {key}"
    if weights_only:
        return ""
    after = _snapshot(module)
    for name, counts in after["hooks"].items():
        if counts != before["hooks"].get(name, (0, 0)):
            return f"the hooks of {name or 'the module'} are not as before"
    for name, attributes in after["attributes"].items():
        if attributes != before["attributes"].get(name):
            extra = sorted(set(attributes) - set(before["attributes"].get(name, ())))
            added = f" ({', '.join(extra)} added)" if extra else ""
            return f"the attributes of {name or 'the module'} are not as before{added}"
    return ""


class AblationProbe:
    """Runs an answer's `ablate_head` around one attention module and reports what it saw, as plain data.

    Built where the answer lives (`ablation_probe`, through `core.make`), so that the module, the context manager
    and the hooks stay there; a call returns only tensors, strings and bools.
    """

    def __init__(self, answer: Callable[..., Any], module: nn.Module):
        self.answer, self.module = answer, module

    @torch.no_grad()
    def __call__(self, head: int, mode: str, x: Tensor, x2: Tensor, raise_inside: bool = False) -> dict[str, Any]:
        module, report = self.module, {}
        before = _snapshot(module)
        manager = self.answer(module, head, mode)
        if not (hasattr(type(manager), "__enter__") and hasattr(type(manager), "__exit__")):
            return {"not_a_context": type(manager).__name__}
        try:
            with manager:
                report["inside"] = module(x)  # (B, T, C)
                report["inside_again"] = module(x2)  # another call: a "mean" ablation is recomputed
                report["changed_inside"] = _changed(before, module, weights_only=True)
                if raise_inside:
                    raise _RaisedInside("raised inside the with block")
            report["propagated"] = not raise_inside
        except _RaisedInside:
            report["propagated"] = True
        except Exception as exc:
            if not raise_inside:
                raise
            report["propagated"] = f"{type(exc).__name__}: {exc}"  # the exit raised something else instead
        report["changed_after"] = _changed(before, module)
        report["after"] = module(x)
        return report


def ablation_probe(answer: Callable[..., Any], kind: str, d_model: int, n_heads: int, bias: bool, seed: int):
    """An `AblationProbe` of `answer` around `attention_module(kind, ...)` (what `core.make` builds)."""
    return AblationProbe(answer, attention_module(kind, d_model, n_heads, bias, seed))


def _with_input_hook(module: nn.Module, change: Callable[[Tensor], Tensor], x: Tensor, where: str = "input") -> Tensor:
    """module(x) with out_proj's input (or output) replaced by change(it): a mistake's ablation, computed here."""
    if where == "input":
        handle = module.out_proj.register_forward_pre_hook(lambda m, args: (change(args[0]), *args[1:]))
    else:
        handle = module.out_proj.register_forward_hook(lambda m, args, out: change(out))
    try:
        with torch.no_grad():
            return module(x)
    finally:
        handle.remove()


def _set(z: Tensor, channels: slice, value: Tensor | float) -> Tensor:
    z = z.clone()
    z[..., channels] = value
    return z


def _ablation_mistakes(
    module: nn.Module, head: int, mode: str, x: Tensor, x_first: Tensor | None = None
) -> list[Variant]:
    """What the known wrong ablations give on x (x_first: the input of the call before, whose mean a wrong answer
    may have kept)."""
    H = module.n_heads
    D = module.out_proj.in_features // H
    own = slice(head * D, (head + 1) * D)
    run = lambda change, where="input": _with_input_hook(module, change, x, where)  # noqa: E731
    zero = mode == "zero"
    variants: list[Variant] = [
        (
            lambda: run(lambda z: z),
            "the output is exactly the unablated one: the ablation changed nothing. A forward pre-hook must "
            "return the changed input (as a tuple), or change a tensor the module then uses.",
        ),
        (
            lambda: run(lambda z: torch.zeros_like(z) if zero else z.mean(dim=(0, 1), keepdim=True).expand_as(z)),
            f"every head was ablated, not just head {head}: only its channels head*D:(head+1)*D of out_proj's "
            "input change.",
        ),
        (
            lambda: run(lambda z: _set(z, own, 0.0) if zero else _set(z, own, z[..., own].mean(dim=(0, 1))), "output"),
            "the output of out_proj was changed, not its input: out_proj mixes the heads, so after it no channel "
            "belongs to one head. Change the input of out_proj (a forward pre-hook).",
        ),
        (
            lambda: run(
                lambda z: _set(z, slice(head, head + D), 0.0 if zero else z[..., head : head + D].mean((0, 1)))
            ),
            f"the channels head:head+D were changed; head {head} owns channels head*D:(head+1)*D "
            f"(D = out_proj.in_features // n_heads = {D}).",
        ),
    ]
    for other, words in (((head + 1) % H, "the next head"), ((head - 1) % H, "the head before")):
        if other != head:
            theirs = slice(other * D, (other + 1) * D)
            variants.append(
                (
                    lambda theirs=theirs: run(lambda z: _set(z, theirs, 0.0 if zero else z[..., theirs].mean((0, 1)))),
                    f"{words} was ablated (head {other}), not head {head}: off by one. Head h owns channels "
                    "h*D:(h+1)*D.",
                )
            )
    if not zero:
        variants += [
            (
                lambda: run(lambda z: _set(z, own, 0.0)),
                'mode="mean" zeroed the head: replace its channels by their mean over the batch and the positions.',
            ),
            (
                lambda: run(lambda z: _set(z, own, z[..., own].mean(dim=0, keepdim=True))),
                "the mean was taken over the batch only: average over the batch and the positions (every dimension "
                "but the channels).",
            ),
            (
                lambda: run(lambda z: _set(z, own, z[..., own].mean(dim=1, keepdim=True))),
                "the mean was taken over the positions only: average over the batch and the positions (every "
                "dimension but the channels).",
            ),
            (
                lambda: run(lambda z: _set(z, own, z[..., own].mean())),
                "the mean was taken over the channels too (one number): keep one mean per channel, averaged over "
                "the batch and the positions.",
            ),
        ]
    if not zero and x_first is not None:

        def kept_mean() -> Tensor:
            earlier = _merged_heads(module, x_first)[..., own].mean(dim=(0, 1))  # (D,): the first call's mean
            return run(lambda z: _set(z, own, earlier))

        variants.append(
            (
                kept_mean,
                "the mean was kept from an earlier call: it must be recomputed at every call, from the head's output "
                "on that call's input.",
            )
        )
    return variants


def _merged_heads(module: nn.Module, x: Tensor) -> Tensor:
    """out_proj's input on x: the heads' outputs side by side, (B, T, H*D)."""
    seen: list[Tensor] = []
    handle = module.out_proj.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            module(x)
    finally:
        handle.remove()
    return seen[0]


# (module kind, d_model, n_heads, head, mode, bias, B, T, seed)
_ABLATE_CASES: list = [
    ("fused", 12, 3, 1, "zero", True, 2, 5, 0),
    ("fused", 8, 4, 3, "mean", True, 3, 6, 1),
    ("wrapper", 8, 2, 0, "mean", False, 2, 4, 2),
    ("fused", 6, 2, 0, "zero", False, 1, 3, 3),
]


@keeps_rng
def check_ablate_head(answer: Any, cases: list | None = None) -> Passed:
    """Check `ablate_head(attention, head, mode="zero")`, a context manager; a case is
    `(kind, d_model, n_heads, head, mode, bias, B, T, seed)` with kind "fused" (the course's MultiHeadAttention) or
    "wrapper" (lesson 05's wrapper of single heads). Every run also checks that an exception raised inside the
    `with` block comes out of it with the module restored."""
    name = Graded(ref.ablate_head)
    check_definition(answer, name)
    run = tagged_cases(cases, _ABLATE_CASES)
    for tag, case in run:
        _ablate_case(name, answer, *case, tag=tag)
    _ablate_case(name, answer, "fused", 8, 2, 1, "zero", True, 2, 4, 7, tag=None, raise_inside=True)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _ablate_case(name, answer, kind, d_model, n_heads, head, mode, bias, B, T, seed, *, tag, raise_inside=False):
    module = attention_module(kind, d_model, n_heads, bias, seed)
    probe = core.make(answer, ablation_probe, answer, kind, d_model, n_heads, bias, seed)
    x = core.random_tensor(B, T, d_model, seed=seed + 100)
    x2 = core.random_tensor(B + 1, T, d_model, seed=seed + 200)
    label = "MultiHeadAttention" if kind == "fused" else "MultiHeadAttentionWrapper"
    what = call_label(name, f"{label}({d_model}, n_heads={n_heads}), head={head}, mode={mode!r}", tag)
    what = f"inside `with {what}:`"
    didnt_yield = (
        lambda message: "didn't yield" in message or "didn't stop" in message,
        "a @contextlib.contextmanager function must `yield` exactly once (inside try/finally).",
    )
    report = call_without_grad(
        name, probe, head, mode, x.clone(), x2.clone(), raise_inside, what=what, hints=[didnt_yield]
    )
    if "not_a_context" in report:
        raise GradingError(
            name,
            f"{name}(...) returned a {report['not_a_context']}, not a context manager that `with` can use. Decorate "
            "the function with @contextlib.contextmanager and `yield` once, between switching the head off and "
            "switching it back on.",
        )
    if report["changed_inside"]:  # the weights; a hook or an attribute added inside the block is allowed
        raise GradingError(
            name,
            f"{what}: {report['changed_inside']} changed. The contract never edits the weights, not even for the "
            "length of the `with` block (another part of the program could use them meanwhile, and an exception "
            "could leave them edited): change what flows into out_proj, with a forward pre-hook on it.",
        )
    if raise_inside and report["propagated"] is not True:
        why = (
            "it was swallowed"
            if report["propagated"] is False
            else f"another came out instead ({report['propagated']})"
        )
        raise GradingError(
            name,
            f"an exception raised inside `with {name}(...):` did not come out of the block: {why}. Clean up in a "
            "`finally:` around the `yield`, and let the exception go on.",
        )
    if report["changed_after"]:
        when = "after an exception inside the `with` block" if raise_inside else "after the `with` block"
        raise GradingError(
            name,
            f"{when}, {report['changed_after']}. Leaving the context must restore the module exactly: remove the "
            "hook (handle.remove()) in a `finally:` after the `yield`.",
        )
    with torch.no_grad():
        plain = module(x)
    core.expect_close(name, report["after"], plain, f"{what}: the output after the `with` block")
    if raise_inside:
        return
    with ref.ablate_head(module, head, mode), torch.no_grad():
        expected, expected_again = module(x), module(x2)
    _name_or_differ(name, what, report["inside"], expected, _ablation_mistakes(module, head, mode, x))
    again = f"{what}, on a second input in the same block"
    _name_or_differ(name, again, report["inside_again"], expected_again, _ablation_mistakes(module, head, mode, x2, x))
