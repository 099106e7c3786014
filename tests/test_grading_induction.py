"""Lesson 13 graders (course_lib.grading.induction): every known mistake has a buggy answer whose message must name
it; the tests run through tests/grader_kit.py, like those of lessons 04 to 12."""

from __future__ import annotations

import torch

from course_lib.grading import induction as grading
from course_lib.multihead import MultiHeadAttention
from tests.grader_kit import GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "13_what_attention_learned"
PREV, INDUCTION, ABLATE = "prev_token_scores", "induction_scores", "ablate_head"

# Right answers, written independently of course_lib: the scores index the query and key positions as two index
# tensors (the reference reads a diagonal), and the ablation replaces out_proj's forward for the length of the block
# (the reference registers a forward pre-hook).
PREV_TOKEN_SCORES = """
import torch

def prev_token_scores(attn):
    T = attn.shape[-1]
    queries = torch.arange(1, T)
    return attn[..., queries, queries - 1].mean(dim=-1)
"""

INDUCTION_SCORES = """
import torch

def induction_scores(attn, period):
    T = attn.shape[-1]
    if not 1 <= period < T:
        raise ValueError(f"period must be in 1..{T - 1}, got {period}")
    queries = torch.arange(period, T)
    return attn[..., queries, queries - period + 1].mean(dim=-1)
"""

ABLATE_HEAD = """
import contextlib
import torch

@contextlib.contextmanager
def ablate_head(attention, head, mode="zero"):
    proj = attention.out_proj
    size = proj.in_features // attention.n_heads
    lo, hi = head * size, (head + 1) * size
    original = proj.forward

    def forward(z):
        part = z[..., lo:hi]
        if mode == "zero":
            part = torch.zeros_like(part)
        else:
            part = part.mean(dim=tuple(range(z.dim() - 1)), keepdim=True).expand_as(part)
        return original(torch.cat([z[..., :lo], part, z[..., hi:]], dim=-1))

    proj.forward = forward
    try:
        yield attention
    finally:
        del proj.forward
"""

KIT = GraderKit(LESSON, grading, {PREV: PREV_TOKEN_SCORES, INDUCTION: INDUCTION_SCORES, ABLATE: ABLATE_HEAD})

_PREV_RETURN = "return attn[..., queries, queries - 1].mean(dim=-1)"
_IND_RETURN = "return attn[..., queries, queries - period + 1].mean(dim=-1)"
_PART = """        if mode == "zero":
            part = torch.zeros_like(part)
        else:
            part = part.mean(dim=tuple(range(z.dim() - 1)), keepdim=True).expand_as(part)
"""
_MEAN = "part = part.mean(dim=tuple(range(z.dim() - 1)), keepdim=True).expand_as(part)"
_CALL = "return original(torch.cat([z[..., :lo], part, z[..., hi:]], dim=-1))"
_RESTORE = """    try:
        yield attention
    finally:
        del proj.forward
"""

MISTAKES = [
    # prev_token_scores
    mistake(
        PREV, _PREV_RETURN, "return attn[..., queries, queries].mean(dim=-1)", "on itself", id="prev-main-diagonal"
    ),
    mistake(
        PREV,
        "queries = torch.arange(1, T)\n    return attn[..., queries, queries - 1]",
        "queries = torch.arange(2, T)\n    return attn[..., queries, queries - 2]",
        "two positions back",
        id="prev-two-back",
    ),
    mistake(PREV, _PREV_RETURN, "return attn[..., queries - 1, queries].mean(dim=-1)", "swapped", id="prev-transposed"),
    mistake(
        PREV,
        _PREV_RETURN,
        "return attn[..., queries, queries - 1].sum(dim=-1) / T",
        ("divided by T", "Position 0 has no previous position"),
        id="prev-position-0-counted",
    ),
    mistake(PREV, _PREV_RETURN, "return attn[..., queries, queries - 1].sum(dim=-1)", "summed", id="prev-sum"),
    mistake(
        PREV, _PREV_RETURN, "return attn[..., queries, queries - 1]", "one number per query", id="prev-not-averaged"
    ),
    mistake(
        PREV,
        _PREV_RETURN,
        "return attn[..., queries, queries - 1].mean(dim=-1).mean(dim=-1)",
        "averaged over the heads",
        id="prev-heads-averaged",
    ),
    mistake(
        PREV,
        _PREV_RETURN,
        "return attn[..., queries, queries - 1].mean(dim=-1).mean(dim=0)",
        "over the batch too",
        id="prev-batch-averaged",
    ),
    mistake(
        PREV,
        _PREV_RETURN,
        "return attn[..., queries, queries - 1].mean(dim=-2)",
        "over the heads instead of the query positions",
        id="prev-mean-over-heads-not-queries",
    ),
    mistake(
        PREV,
        _PREV_RETURN,
        "attn[..., 0, :] = 0.0\n    " + _PREV_RETURN,
        "changed its argument `attn` in place",
        id="prev-changing-its-input",
    ),
    # induction_scores
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries, queries - period].mean(dim=-1)",
        ("earlier copy of the current token itself", "t - period + 1"),
        id="induction-the-copy-itself",
    ),
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries, queries - period + 2].mean(dim=-1)",
        "one position too far",
        id="induction-one-too-far",
    ),
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries, queries - period - 1].mean(dim=-1)",
        "the token before the earlier copy",
        id="induction-one-too-near",
    ),
    mistake(
        INDUCTION,
        "queries = torch.arange(period, T)",
        "queries = torch.arange(period - 1, T)",
        ("query t = period - 1 was counted", "no earlier copy"),
        id="induction-last-of-the-first-copy-counted",
    ),
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries, queries - period + 1].sum(dim=-1) / T",
        ("divided by T", "as if the queries of the first copy counted"),
        id="induction-first-copy-counted-as-zeros",
    ),
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries, queries - period + 1].sum(dim=-1)",
        "summed",
        id="induction-sum",
    ),  # fmt: skip
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries - period + 1, queries].mean(dim=-1)",
        "swapped",
        id="induction-transposed",
    ),
    mistake(
        INDUCTION,
        "queries = torch.arange(period, T)\n    return attn[..., queries, queries - period + 1]",
        "queries = torch.arange(T // 2, T)\n    return attn[..., queries, queries - T // 2 + 1]",
        ("period T // 2", "use the `period` argument"),
        id="induction-half-the-length-as-period",
    ),
    mistake(
        INDUCTION,
        _IND_RETURN,
        "return attn[..., queries, queries - period + 1].mean(dim=-1).mean(dim=0)",
        "over the batch too",
        id="induction-batch-averaged",
    ),
    mistake(
        INDUCTION,
        '    if not 1 <= period < T:\n        raise ValueError(f"period must be in 1..{T - 1}, got {period}")\n',
        "",
        ("period=0", "expected a ValueError", "1 <= period < T"),
        id="induction-no-value-error",
    ),
    # ablate_head
    mistake(
        ABLATE,
        "lo, hi = head * size, (head + 1) * size",
        "lo, hi = (head + 1) * size, (head + 2) * size",
        ("the next head was ablated", "off by one"),
        id="ablate-the-next-head",
    ),
    mistake(
        ABLATE,
        "lo, hi = head * size, (head + 1) * size",
        "lo, hi = head, head + size",
        "owns channels head*D:(head+1)*D",
        id="ablate-channels-head-to-head-plus-D",
    ),
    mistake(
        ABLATE,
        _CALL,
        "return original(torch.zeros_like(z) if mode == 'zero' else z.mean(dim=(0, 1), keepdim=True).expand_as(z))",
        "every head was ablated",
        id="ablate-every-head",
    ),
    mistake(
        ABLATE,
        _CALL,
        "out = original(z)\n        return torch.cat([out[..., :lo], part, out[..., hi:]], dim=-1)",
        ("output of out_proj was changed, not its input", "forward pre-hook"),
        id="ablate-out-proj-output",
    ),
    mistake(ABLATE, _CALL, "return original(z)", "the ablation changed nothing", id="ablate-no-effect"),
    mistake(
        ABLATE,
        _MEAN,
        "part = part.mean(dim=0, keepdim=True).expand_as(part)",
        "over the batch only",
        id="ablate-mean-over-the-batch-only",
    ),
    mistake(
        ABLATE,
        _MEAN,
        "part = part.mean(dim=1, keepdim=True).expand_as(part)",
        "over the positions only",
        id="ablate-mean-over-the-positions-only",
    ),
    mistake(
        ABLATE, _MEAN, "part = torch.full_like(part, part.mean().item())", "channels too", id="ablate-mean-one-number"
    ),
    mistake(
        ABLATE,
        _PART,
        "        part = torch.zeros_like(part)\n",
        'mode="mean" zeroed the head',
        id="ablate-mode-ignored",
    ),
    mistake(
        ABLATE,
        _MEAN,
        "kept.setdefault('mean', part.mean(dim=tuple(range(z.dim() - 1)), keepdim=True))\n"
        "            part = kept['mean'].expand_as(part)",
        "kept from an earlier call",
        also=[("    original = proj.forward\n", "    original = proj.forward\n    kept = {}\n")],
        id="ablate-mean-kept-from-the-first-call",
    ),
    wrong_answer(
        ABLATE,
        """
import contextlib
import torch

@contextlib.contextmanager
def ablate_head(attention, head, mode="zero"):
    size = attention.out_proj.in_features // attention.n_heads
    weight = attention.out_proj.weight
    saved = weight.data[:, head * size:(head + 1) * size].clone()
    weight.data[:, head * size:(head + 1) * size] = 0.0
    try:
        yield attention
    finally:
        weight.data[:, head * size:(head + 1) * size] = saved
""",
        ("parameter out_proj.weight changed", "never edits the weights"),
        id="ablate-weights-zeroed-in-place-and-restored",
    ),
    mistake(
        ABLATE,
        _RESTORE,
        "    yield attention\n",
        ("after the `with` block", "attributes of out_proj are not as before (forward added)", "finally"),
        id="ablate-never-restored",
    ),
    mistake(
        ABLATE,
        _RESTORE,
        "    yield attention\n    del proj.forward\n",
        ("after an exception inside the `with` block", "finally"),
        id="ablate-not-restored-after-an-exception",
    ),
    mistake(
        ABLATE,
        _RESTORE,
        "    try:\n        yield attention\n    except Exception:\n        pass\n"
        "    finally:\n        del proj.forward\n",
        ("did not come out of the block", "swallowed"),
        id="ablate-exception-swallowed",
    ),
    mistake(
        ABLATE,
        "@contextlib.contextmanager\n",
        "",
        ("returned a generator, not a context manager", "@contextlib.contextmanager"),
        id="ablate-not-a-context-manager",
    ),
    wrong_answer(
        ABLATE,
        """
import contextlib

@contextlib.contextmanager
def ablate_head(attention, head, mode="zero"):
    size = attention.out_proj.in_features // attention.n_heads

    def hook(module, args):
        z = args[0].clone()
        z[..., head * size:(head + 1) * size] = 0.0  # changes a copy, and returns nothing

    handle = attention.out_proj.register_forward_pre_hook(hook)
    try:
        yield attention
    finally:
        handle.remove()
""",
        "the ablation changed nothing",
        id="ablate-hook-returns-nothing",
    ),
]

BORROWED = [
    wrong_answer(
        PREV,
        "from course_lib import induction\n\n"
        "def prev_token_scores(attn):\n    return induction.prev_token_scores(attn)\n",
        ("course_lib.induction.prev_token_scores", "earns no points"),
        id="prev-calling-the-reference",
    ),
    wrong_answer(
        INDUCTION,
        "from course_lib.induction import induction_scores as theirs\n\n"
        "def induction_scores(attn, period):\n    return theirs(attn, period)\n",
        ("course_lib.induction.induction_scores", "earns no points"),
        id="induction-calling-the-reference",
    ),
    wrong_answer(
        ABLATE,
        "from course_lib import induction\n\ndef ablate_head(attention, head, mode='zero'):\n"
        "    return induction.ablate_head(attention, head, mode)\n",
        ("course_lib.induction.ablate_head", "earns no points"),
        id="ablate-calling-the-reference",
    ),
]


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(PREV, _PREV_RETURN, "return attn[..., queries, queries].mean(dim=-1)")
    message = KIT.fails(PREV, code, "<hidden case 1>", "on itself", cases=KIT.hidden(PREV))
    assert "shape" not in message


def test_the_right_answers_agree_with_loops_written_out():
    """The grader test's right answers index with tensors; a plain loop over heads and queries gives the same."""
    attn = torch.rand(2, 3, 7, 7, generator=torch.Generator().manual_seed(0)).softmax(-1)
    loop_prev = torch.tensor([[sum(attn[b, h, t, t - 1].item() for t in range(1, 7)) / 6 for h in range(3)]
                              for b in range(2)])  # fmt: skip
    assert torch.allclose(KIT.answer(PREV)(attn), loop_prev, atol=1e-6)
    loop_ind = torch.tensor([[sum(attn[b, h, t, t - 2].item() for t in range(3, 7)) / 4 for h in range(3)]
                             for b in range(2)])  # fmt: skip
    assert torch.allclose(KIT.answer(INDUCTION)(attn, 3), loop_ind, atol=1e-6)


def test_the_right_ablation_leaves_the_class_forward_in_place():
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2, causal=True).eval()
    with KIT.answer(ABLATE)(module, 1):
        assert "forward" in vars(module.out_proj)
    assert "forward" not in vars(module.out_proj)


SETUP = "import math\nimport torch\nfrom torch import nn\nfrom course_lib import induction as ref\n"


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    setup = SETUP
    mistakes = MISTAKES
    borrowed = BORROWED
