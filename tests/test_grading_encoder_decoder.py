"""Lesson 07 graders (course_lib.grading.encoder_decoder): every known mistake has a buggy answer whose message must
name it; the tests run through tests/grader_kit.py."""

from __future__ import annotations

from course_lib.grading import encoder_decoder as grading
from course_lib.grading.kit import core
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "07_encoder_decoder"
SHIFT = "shift_right"
LOSS = "masked_cross_entropy"
STEP = "greedy_step"

# Right answers, written independently of course_lib.
SHIFT_RIGHT = """
import torch

def shift_right(labels, bos_id):
    out = torch.empty_like(labels)
    out[:, 0] = bos_id
    out[:, 1:] = labels[:, :-1]
    return out
"""

MASKED_CROSS_ENTROPY = """
import torch
import torch.nn.functional as F

def masked_cross_entropy(logits, targets, pad_id):
    log_probs = F.log_softmax(logits, dim=-1)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = targets != pad_id
    return -picked[keep].mean()
"""

GREEDY_STEP = """
import torch

def greedy_step(logits, finished, eos_id, pad_id):
    scores = logits[:, -1]
    next_ids = scores.argmax(-1)
    next_ids = next_ids.masked_fill(finished, pad_id)
    now_finished = finished.clone()
    now_finished[next_ids == eos_id] = True
    return next_ids, now_finished
"""

KIT = GraderKit(LESSON, grading, {SHIFT: SHIFT_RIGHT, LOSS: MASKED_CROSS_ENTROPY, STEP: GREEDY_STEP})

_SHIFT_BODY = "    out[:, 0] = bos_id\n    out[:, 1:] = labels[:, :-1]\n    return out\n"
_LOSS_BODY = "    return -picked[keep].mean()\n"
_ARGMAX = "    next_ids = scores.argmax(-1)\n"
_PAD = "    next_ids = next_ids.masked_fill(finished, pad_id)\n"
_FINISH = "    now_finished[next_ids == eos_id] = True\n"

MISTAKES = [
    # shift_right
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], bos_id)], dim=1)\n",
        ("appended at the end", "labels moved left"),
        id="shift-bos-at-the-end",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    return torch.cat([torch.full_like(labels[:, :1], bos_id), labels], dim=1)\n",
        ("last label was not dropped", "T + 1"),
        id="shift-last-label-kept",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    out = labels.clone()\n    out[:, 0] = bos_id\n    return out\n",
        "overwrote the first label",
        id="shift-bos-overwrites",
    ),
    mistake(SHIFT, _SHIFT_BODY, "    return torch.roll(labels, 1, dims=1)\n", "torch.roll", id="shift-roll"),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    out = torch.roll(labels, 1, dims=0)\n    out[0, :] = bos_id\n    return out\n",
        "batch dimension",
        id="shift-along-the-batch",
    ),
    mistake(
        SHIFT,
        "    out[:, 0] = bos_id\n",
        "    out[:, 0] = 1\n",
        "use the `bos_id` argument",
        id="shift-hard-coded-bos",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    labels[:, 1:] = labels[:, :-1].clone()\n    labels[:, 0] = bos_id\n    return labels\n",
        ("changed its argument `labels` in place",),
        id="shift-in-place",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    return torch.cat([torch.full_like(labels[:, :1], bos_id), labels[:, :-1]], dim=1).float()\n",
        "integers",
        id="shift-float-ids",
    ),
    # masked_cross_entropy
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return -picked.mean()\n",
        ("padding was counted", "ignore_index"),
        id="loss-padding-counted",
    ),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return -(picked * keep).sum() / picked.numel()\n",
        "still counted in the denominator",
        id="loss-padding-in-the-denominator",
    ),
    mistake(LOSS, _LOSS_BODY, "    return -picked[keep].sum()\n", "summed, not averaged", id="loss-sum"),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return (-(picked * keep).sum(1) / keep.sum(1)).mean()\n",
        "each sequence was averaged first",
        id="loss-mean-of-sequence-means",
    ),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return F.cross_entropy(logits.softmax(-1).flatten(0, 1), targets.flatten(), ignore_index=pad_id)\n",
        "softmax was applied before F.cross_entropy",
        id="loss-double-softmax",
    ),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return F.nll_loss(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id)\n",
        "nll_loss expects log-probabilities",
        id="loss-nll-on-logits",
    ),
    mistake(
        LOSS,
        "    keep = targets != pad_id\n",
        "    keep = targets != 0\n",
        "Use the `pad_id` argument",
        id="loss-padding-assumed-zero",
    ),
    mistake(
        LOSS,
        "    log_probs = F.log_softmax(logits, dim=-1)\n",
        "    log_probs = F.log_softmax(logits, dim=1)\n",
        "wrong dimension (dim=1, time)",
        id="loss-log-softmax-over-time",
    ),
    mistake(LOSS, _LOSS_BODY, "    return (-picked[keep].mean()).item()\n", ".item()", id="loss-as-a-python-float"),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return -picked * keep\n",
        ("returned a tensor of shape", "one number"),
        id="loss-not-reduced",
    ),
    # greedy_step
    mistake(
        STEP,
        "    scores = logits[:, -1]\n",
        "    scores = logits[:, 0]\n",
        "first position's logits",
        id="step-first-position",
    ),
    mistake(
        STEP,
        _ARGMAX,
        "    next_ids = logits.argmax(dim=1)[:, -1]\n",
        "argmax ran over the time dimension",
        id="step-argmax-over-time",
    ),
    mistake(STEP, _PAD, "", ("<eos> does not stop a sequence", "pad_id"), id="step-eos-does-not-stop"),
    mistake(
        STEP,
        _PAD,
        "    next_ids = next_ids.masked_fill(finished, eos_id)\n",
        "gets eos_id again",
        id="step-eos-again-after-eos",
    ),
    mistake(STEP, _FINISH, "", "`finished` was not updated", id="step-finished-not-updated"),
    mistake(
        STEP,
        "    now_finished = finished.clone()\n" + _FINISH,
        "    now_finished = next_ids == eos_id\n",
        "recomputed from the new tokens alone",
        id="step-finished-recomputed",
    ),
    mistake(
        STEP,
        "    now_finished = finished.clone()\n",
        "    now_finished = finished\n",
        "changed `finished` in place",
        id="step-finished-in-place",
    ),
    mistake(
        STEP,
        "    return next_ids, now_finished\n",
        "    return next_ids[:, None], now_finished\n",
        "no keepdim",
        id="step-keepdim",
    ),
    mistake(
        STEP,
        "    return next_ids, now_finished\n",
        "    return next_ids\n",
        "should return a pair (next_ids, finished)",
        id="step-returns-only-the-ids",
    ),
    wrong_answer(
        STEP,
        "def greedy_step(logits, finished, eos_id, pad_id):\n    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="step-unwritten-on-the-hidden-cases",
    ),
]

# Answers that use the course's reference (called, wrapped or imported) earn nothing.
BORROWED = [
    wrong_answer(
        SHIFT,
        "from course_lib import encoder_decoder as e\n\ndef shift_right(labels, bos_id):\n"
        "    return e.shift_right(labels, bos_id)\n",
        ("course_lib.encoder_decoder.shift_right", "earns no points"),
        id="shift-calling-the-reference",
    ),
    wrong_answer(
        LOSS,
        "from course_lib.encoder_decoder import masked_cross_entropy\n",
        ("course_lib.encoder_decoder.masked_cross_entropy", "earns no points"),
        id="loss-the-reference-imported",
    ),
    wrong_answer(
        STEP,
        "import course_lib.encoder_decoder as e\n\ndef greedy_step(logits, finished, eos_id, pad_id):\n"
        "    return e.greedy_step(logits, finished, eos_id, pad_id)\n",
        ("course_lib.encoder_decoder.greedy_step", "earns no points"),
        id="step-calling-the-reference",
    ),
]


def test_ignore_index_is_a_right_answer():
    code = (
        "import torch.nn.functional as F\n\ndef masked_cross_entropy(logits, targets, pad_id):\n"
        "    return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id)\n"
    )
    assert KIT.grade(LOSS, code).checks == 3
    assert KIT.grade(LOSS, code, HIDDEN).hidden


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    code = KIT.variant(STEP, "    scores = logits[:, -1]\n", "    while True:\n        pass\n")
    KIT.fails(STEP, code, "did not finish")


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(SHIFT, _SHIFT_BODY, "    return torch.roll(labels, 1, dims=1)\n")
    message = KIT.fails(SHIFT, code, "<hidden case 1>", "torch.roll", cases=[(3, 7, 12, 12)])
    assert "bos_id=12" not in message and "(3, 7)" not in message
    code = KIT.variant(STEP, _PAD, "")
    message = KIT.fails(STEP, code, "<hidden case 1>", cases=KIT.hidden(STEP))
    assert "finished=[" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED
