"""Lesson 11 graders (course_lib.grading.train): every known mistake has a buggy answer whose message must name it;
the tests run through tests/grader_kit.py."""

from __future__ import annotations

from course_lib.grading import train as grading
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "11_gpt2_training_gpu"
ACCUM = "grad_accum_steps"
MFU = "estimate_mfu"
RANK = "rank_batch"

# Right answers, written independently of course_lib.
GRAD_ACCUM_STEPS = """
def grad_accum_steps(total_batch_tokens, micro_batch_size, seq_len, world_size=1):
    tokens_per_micro_step = micro_batch_size * seq_len * world_size
    steps, rest = divmod(total_batch_tokens, tokens_per_micro_step)
    if rest != 0:
        raise ValueError(f"{total_batch_tokens} is not a multiple of {tokens_per_micro_step}")
    return steps
"""

ESTIMATE_MFU = """
def estimate_mfu(n_params, n_layers, n_heads, d_head, seq_len, tokens_per_second, peak_flops):
    weights = 6 * n_params
    attention = 12 * n_layers * n_heads * d_head * seq_len
    return (weights + attention) * tokens_per_second / peak_flops
"""

RANK_BATCH = """
import torch

def rank_batch(tokens, micro_step, batch_size, seq_len, rank=0, world_size=1):
    if rank < 0 or rank >= world_size:
        raise ValueError(f"rank {rank} is not below world_size {world_size}")
    block = batch_size * seq_len
    start = (micro_step * world_size + rank) * block
    if start + block + 1 > len(tokens):
        raise ValueError("not enough tokens")
    chunk = tokens[start : start + block + 1]
    x = chunk[:-1].reshape(batch_size, seq_len)
    y = chunk[1:].reshape(batch_size, seq_len)
    return x, y
"""

# An answer that deals out the rows of the big batch one by one instead of giving each rank one block.
RANK_DEALT = """
import torch

def rank_batch(tokens, micro_step, batch_size, seq_len, rank=0, world_size=1):
    if rank < 0 or rank >= world_size:
        raise ValueError("no such rank")
    rows = world_size * batch_size
    start = micro_step * rows * seq_len
    chunk = tokens[start : start + rows * seq_len + 1]
    x = chunk[:-1].reshape(rows, seq_len)[rank::world_size]
    y = chunk[1:].reshape(rows, seq_len)[rank::world_size]
    return x, y
"""

KIT = GraderKit(LESSON, grading, {ACCUM: GRAD_ACCUM_STEPS, MFU: ESTIMATE_MFU, RANK: RANK_BATCH})

_PER_STEP = "    tokens_per_micro_step = micro_batch_size * seq_len * world_size\n"
_RETURN = "    return steps\n"
_CHECK = (
    "    if rest != 0:\n"
    '        raise ValueError(f"{total_batch_tokens} is not a multiple of {tokens_per_micro_step}")\n'
)
_WEIGHTS = "    weights = 6 * n_params\n"
_ATTENTION = "    attention = 12 * n_layers * n_heads * d_head * seq_len\n"
_MFU_RETURN = "    return (weights + attention) * tokens_per_second / peak_flops\n"
_START = "    start = (micro_step * world_size + rank) * block\n"
_XY = "    x = chunk[:-1].reshape(batch_size, seq_len)\n    y = chunk[1:].reshape(batch_size, seq_len)\n"

MISTAKES = [
    # grad_accum_steps
    mistake(
        ACCUM,
        _PER_STEP,
        "    tokens_per_micro_step = micro_batch_size * seq_len\n",
        ("world_size is left out", "micro_batch_size * seq_len * world_size"),
        id="accum-without-world-size",
    ),
    mistake(
        ACCUM,
        _RETURN,
        "    return total_batch_tokens // (micro_batch_size * seq_len) * world_size\n",
        "multiplied by world_size",
        also=((_CHECK, ""),),
        id="accum-times-world-size",
    ),
    mistake(
        ACCUM,
        _PER_STEP,
        "    tokens_per_micro_step = micro_batch_size * world_size\n",
        "seq_len is left out",
        id="accum-without-seq-len",
    ),
    mistake(ACCUM, _CHECK, "", ("(rounded down)", "must raise a ValueError"), id="accum-rounds-down"),
    mistake(
        ACCUM,
        _RETURN,
        "    return -(-total_batch_tokens // tokens_per_micro_step)\n",
        ("(rounded up)", "ValueError"),
        also=((_CHECK, ""),),
        id="accum-rounds-up",
    ),
    mistake(
        ACCUM,
        "    steps, rest = divmod(total_batch_tokens, tokens_per_micro_step)\n",
        "    steps = total_batch_tokens // tokens_per_micro_step\n"
        "    rest = total_batch_tokens % (micro_batch_size * seq_len)\n",
        ("rounded down", "leave out world_size"),
        id="accum-divisibility-without-world-size",
    ),
    mistake(
        ACCUM,
        _CHECK,
        "    assert rest == 0, 'the batch does not divide'\n",
        ("raised AssertionError", "not `assert`"),
        id="accum-assert",
    ),
    mistake(
        ACCUM,
        _RETURN,
        "    return total_batch_tokens / tokens_per_micro_step\n",
        ("float 32.0", "use //"),
        id="accum-float",
    ),
    mistake(
        ACCUM,
        _RETURN,
        "    return total_batch_tokens // micro_batch_size * seq_len * world_size\n",
        "operator precedence",
        also=((_CHECK, ""),),
        id="accum-precedence",
    ),
    mistake(
        ACCUM,
        "seq_len, world_size=1):",
        "seq_len, world_size):",
        "world_size defaults to 1",
        id="accum-no-default-world-size",
    ),
    # estimate_mfu
    mistake(MFU, _WEIGHTS, "    weights = 2 * n_params\n", ("forward pass only", "6·N"), id="mfu-2N"),
    mistake(
        MFU,
        _WEIGHTS,
        "    weights = 2 * n_params\n",
        "forward pass only (2·N + 4·L·H·D·T)",
        also=(("12 * n_layers", "4 * n_layers"),),
        id="mfu-forward-only",
    ),
    mistake(MFU, _ATTENTION, "    attention = 0\n", "attention term", id="mfu-no-attention"),
    mistake(
        MFU,
        _WEIGHTS,
        "    weights = 3 * n_params\n",
        "multiply-adds, not FLOPs",
        also=(("12 * n_layers", "6 * n_layers"),),
        id="mfu-multiply-adds",
    ),
    mistake(MFU, "12 * n_layers", "6 * n_layers", "half of what it should be", id="mfu-half-attention"),
    mistake(MFU, "* seq_len\n", "* seq_len * seq_len\n", "seq_len twice", id="mfu-T-squared"),
    mistake(MFU, "n_heads * d_head * seq_len", "d_head * seq_len", "n_heads is missing", id="mfu-no-heads"),
    mistake(MFU, " * seq_len\n", "\n", "seq_len is missing", id="mfu-no-T"),
    mistake(
        MFU,
        _MFU_RETURN,
        "    return peak_flops / ((weights + attention) * tokens_per_second)\n",
        "upside down",
        id="mfu-inverted",
    ),
    mistake(
        MFU,
        _MFU_RETURN,
        "    return 100 * (weights + attention) * tokens_per_second / peak_flops\n",
        "percentage",
        id="mfu-percent",
    ),
    mistake(
        MFU,
        _MFU_RETURN,
        "    import torch\n    return torch.tensor((weights + attention) * tokens_per_second / peak_flops)\n",
        "should return a float",
        id="mfu-tensor",
    ),
    # rank_batch
    mistake(RANK, _START, "    start = micro_step * world_size * block\n", "same block", id="rank-ignored"),
    mistake(
        RANK,
        _START,
        "    start = (micro_step + rank) * block\n",
        "world_size is left out of the stride",
        id="rank-stride-without-world-size",
    ),
    mistake(
        RANK,
        _START,
        "    start = (micro_step + rank) * world_size * block\n",
        "not r * B * T * world_size",
        id="rank-offset-times-world-size",
    ),
    mistake(RANK, _START, "    start = rank * block\n", "micro_step is left out", id="rank-micro-step-ignored"),
    wrong_answer(RANK, RANK_DEALT, "dealt out one by one", id="rank-rows-dealt-out"),
    mistake(
        RANK,
        _XY,
        "    x = chunk[:-1].reshape(batch_size, seq_len)\n    y = x\n",
        "y equals x",
        id="rank-not-shifted",
    ),
    mistake(
        RANK,
        "    chunk = tokens[start : start + block + 1]\n",
        "    chunk = tokens[start : start + block + 2]\n",
        "shifted by two",
        also=(
            (_XY, "    x = chunk[:-2].reshape(batch_size, seq_len)\n    y = chunk[2:].reshape(batch_size, seq_len)\n"),
        ),
        id="rank-shifted-by-two",
    ),
    mistake(RANK, "    return x, y\n", "    return y, x\n", "swapped", id="rank-swapped"),
    mistake(
        RANK,
        _XY,
        "    x = chunk[:-1].reshape(seq_len, batch_size)\n    y = chunk[1:].reshape(seq_len, batch_size)\n",
        "(seq_len, batch_size)",
        id="rank-rows-of-batch-size",
    ),
    mistake(RANK, "    return x, y\n", "    return x.T, y.T\n", "transposed", id="rank-transposed"),
    mistake(RANK, "    return x, y\n", "    return x.float(), y.float()\n", "dtype", id="rank-float"),
    mistake(
        RANK,
        "    if rank < 0 or rank >= world_size:\n",
        "    if rank < 0 or rank > world_size:\n",
        ("rank 2 does not exist", "ValueError"),
        id="rank-beyond-world-size-accepted",
    ),
    mistake(
        RANK,
        '    if start + block + 1 > len(tokens):\n        raise ValueError("not enough tokens")\n',
        "",
        ("instead of a ValueError", "only 32 tokens"),
        id="rank-too-few-tokens-not-checked",
    ),
    mistake(
        RANK,
        "    if start + block + 1 > len(tokens):\n",
        "    if start + block > len(tokens):\n",
        ("instead of a ValueError", "last target"),
        id="rank-last-target-not-counted",
    ),
    wrong_answer(
        RANK,
        "def rank_batch(tokens, micro_step, batch_size, seq_len, rank=0, world_size=1):\n"
        "    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="rank-unwritten-on-the-hidden-cases",
    ),
]

# Answers that use the course's reference (called, wrapped or imported) earn nothing.
BORROWED = [
    wrong_answer(
        ACCUM,
        "from course_lib.train import grad_accum_steps\n",
        ("course_lib.train.grad_accum_steps", "earns no points"),
        id="accum-the-reference-imported",
    ),
    wrong_answer(
        MFU,
        "from course_lib import train as t\n\ndef estimate_mfu(*args):\n    return t.estimate_mfu(*args)\n",
        ("course_lib.train.estimate_mfu", "earns no points"),
        id="mfu-calling-the-reference",
    ),
    wrong_answer(
        RANK,
        "from course_lib import train_data\n\ndef rank_batch(tokens, micro_step, batch_size, seq_len, rank=0, "
        "world_size=1):\n    return train_data.rank_batch(tokens, micro_step, batch_size, seq_len, rank, world_size)\n",
        ("course_lib.train_data.rank_batch", "earns no points"),
        id="rank-calling-the-reference-where-it-lives",
    ),
]


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(MFU, _WEIGHTS, "    weights = 2 * n_params\n")
    message = KIT.fails(MFU, code, "<hidden case 1>", "forward pass only", cases=KIT.hidden(MFU))
    assert "354,823,168" not in message and "989" not in message


def test_a_view_or_a_stack_are_right_answers_too():
    code = KIT.variant(
        RANK,
        _XY,
        "    x = torch.stack([chunk[i * seq_len : (i + 1) * seq_len] for i in range(batch_size)])\n"
        "    y = chunk[1:].view(batch_size, seq_len)\n",
    )
    assert KIT.grade(RANK, code).checks == 5


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED

    def test_the_reference_itself_earns_nothing(self, name):
        # rank_batch is defined in train_data and re-exported by train (the lesson's `ref`): the guard names
        # the module the reference lives in.
        reference = self.kit.reference_answer(name)
        words = f"is the course's reference `{reference.__module__}.{name}`", f"write `{name}` yourself"
        self.kit.fails(name, reference, *words, "earns no points")
