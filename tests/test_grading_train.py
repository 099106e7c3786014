"""Lesson 11 graders (course_lib.grading.train): every known mistake has a buggy answer whose message must name it;
the tests run through tests/grader_kit.py."""

from __future__ import annotations

from course_lib.grading import train as grading
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "11_gpt2_training_gpu"
ACCUM = "grad_accum_steps"
MFU = "estimate_mfu"
RANK = "rank_batch"
STEP = "training_step"

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

TRAINING_STEP = """
import contextlib
import torch

def training_step(model, micro_batches, optimizer, scaler=None, autocast=contextlib.nullcontext, clip_norm=1.0):
    optimizer.zero_grad(set_to_none=True)
    count = len(micro_batches)
    total = 0.0
    for x, y in micro_batches:
        with autocast():
            _, loss = model(x, y)
        loss = loss / count
        total = total + loss.detach()
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return total.item()
"""

KIT = GraderKit(LESSON, grading, {ACCUM: GRAD_ACCUM_STEPS, MFU: ESTIMATE_MFU, STEP: TRAINING_STEP, RANK: RANK_BATCH})

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

# All forward passes first, one backward on the sum: the same gradients, but every micro-batch's activations at once.
ONE_BACKWARD = """
import contextlib
import torch

def training_step(model, micro_batches, optimizer, scaler=None, autocast=contextlib.nullcontext, clip_norm=1.0):
    optimizer.zero_grad(set_to_none=True)
    losses = []
    for x, y in micro_batches:
        with autocast():
            _, loss = model(x, y)
        losses.append(loss / len(micro_batches))
    total = sum(losses)
    (scaler.scale(total) if scaler is not None else total).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return total.item()
"""

_BACKWARD = "        if scaler is None:\n            loss.backward()\n        else:\n"
_BACKWARD += "            scaler.scale(loss).backward()\n"
_UNSCALE = "    if scaler is not None:\n        scaler.unscale_(optimizer)\n"
_CLIP = "    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n"
_SCALER_STEP = "        scaler.step(optimizer)\n"
_FORWARD = "        with autocast():\n            _, loss = model(x, y)\n"
_STEP_RETURN = "    return total.item()\n"

MISTAKES = [
    # training_step
    mistake(
        STEP,
        "        loss = loss / count\n",
        "",
        ("not divided by the number of micro-batches", "/ len(micro_batches)"),
        id="step-no-division",
    ),
    mistake(
        STEP,
        _UNSCALE + _CLIP,
        _CLIP + _UNSCALE,
        ("clipped while still scaled", "Unscale first"),
        id="step-clips-before-unscale",
    ),
    mistake(
        STEP,
        _FORWARD,
        "        optimizer.zero_grad()\n" + _FORWARD,
        "zero_grad was called inside the accumulation loop",
        id="step-zero-grad-inside-the-loop",
    ),
    mistake(STEP, "    optimizer.zero_grad(set_to_none=True)\n", "", "never cleared", id="step-no-zero-grad"),
    mistake(
        STEP,
        _STEP_RETURN,
        "    optimizer.zero_grad()\n" + _STEP_RETURN,
        "zero_grad came after the backward passes",
        also=(("    optimizer.zero_grad(set_to_none=True)\n    count", "    count"),),
        id="step-zero-grad-after-the-step",
    ),
    mistake(
        STEP,
        _BACKWARD,
        _BACKWARD.replace("loss.backward()\n", "loss.backward()\n            optimizer.step()\n"),
        ("stepped 3 times", "once per micro-batch"),
        id="step-steps-every-micro-batch",
    ),
    mistake(
        STEP, _BACKWARD, "        loss.backward()\n", "backward() ran on the unscaled loss", id="step-backward-unscaled"
    ),
    mistake(
        STEP,
        _BACKWARD,
        "        (scaler.scale(loss) if scaler is not None else loss * count).backward()\n",
        "not divided by the number of micro-batches",
        id="step-division-only-with-a-scaler",
    ),
    mistake(
        STEP,
        _SCALER_STEP,
        "        optimizer.step()\n",
        "optimizer.step() was called directly",
        id="step-optimizer-step-instead-of-scaler-step",
    ),
    mistake(
        STEP,
        _SCALER_STEP,
        _SCALER_STEP + "        optimizer.step()\n",
        "optimizer.step() was called directly",
        id="step-both-steps",
    ),
    mistake(STEP, "        scaler.update()\n", "", "scaler.update() was not called", id="step-no-update"),
    mistake(STEP, _UNSCALE, "", "scaler.unscale_(optimizer) was not called before clipping", id="step-no-unscale"),
    mistake(STEP, _CLIP, "", ("were not clipped", "clip_grad_norm_"), id="step-no-clipping"),
    mistake(
        STEP,
        _CLIP,
        "    torch.nn.utils.clip_grad_value_(model.parameters(), clip_norm)\n",
        "stepped with gradients of norm",
        id="step-clips-values",
    ),
    mistake(
        STEP, _FORWARD, "        _, loss = model(x, y)\n", "outside autocast()", id="step-forward-outside-autocast"
    ),
    mistake(
        STEP,
        _FORWARD,
        "        with autocast:\n            _, loss = model(x, y)\n",
        ("with the brackets",),
        id="step-autocast-not-called",
    ),
    mistake(
        STEP,
        "autocast=contextlib.nullcontext",
        "autocast=None",
        "contextlib.nullcontext",
        id="step-no-default-autocast",
    ),
    mistake(
        STEP,
        _UNSCALE,
        "    scaler.unscale_(optimizer)\n",
        "only `if scaler is not None`",
        id="step-scaler-used-when-none",
    ),
    mistake(
        STEP,
        _STEP_RETURN,
        "    return total.item() * count\n",
        "the sum of the micro-batches' losses",
        id="step-returns-the-sum",
    ),
    mistake(
        STEP,
        _STEP_RETURN,
        "    return loss.item() * count\n",
        "only the last micro-batch's loss",
        id="step-returns-the-last-loss",
    ),
    mistake(
        STEP,
        _STEP_RETURN,
        "    return loss.item()\n",
        "only the last micro-batch's share",
        id="step-returns-the-last-share",
    ),
    mistake(
        STEP,
        _STEP_RETURN,
        "    return total.item() / count\n",
        "divided by the number of micro-batches once more",
        id="step-divides-the-mean-again",
    ),
    mistake(STEP, _STEP_RETURN, "    return total\n", "returned a tensor", id="step-returns-a-tensor"),
    mistake(STEP, _STEP_RETURN, "", "returned None", id="step-returns-nothing"),
    wrong_answer(STEP, ONE_BACKWARD, "each before the next forward pass", id="step-one-backward-after-all-forwards"),
    wrong_answer(
        STEP,
        "def training_step(model, micro_batches, optimizer, scaler=None, autocast=None, clip_norm=1.0):\n"
        "    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="step-unwritten-on-the-hidden-cases",
    ),
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
        STEP,
        "import contextlib\nfrom course_lib import train as t\n\ndef training_step(model, micro_batches, optimizer, "
        "scaler=None, autocast=contextlib.nullcontext, clip_norm=1.0):\n    return t.training_step(model, "
        "micro_batches, optimizer, scaler, autocast, clip_norm)\n",
        ("course_lib.train.training_step", "earns no points"),
        id="step-calling-the-reference",
    ),
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


def test_an_item_per_micro_batch_is_a_right_answer_too():
    """Reading each micro-batch's loss with .item() makes the CPU wait, but the mean it returns is right."""
    code = KIT.variant(STEP, "        total = total + loss.detach()\n", "        total = total + loss.item()\n")
    code = code.replace("    return total.item()\n", "    return total\n")
    assert KIT.grade(STEP, code).checks == 8


def test_the_visible_cases_are_what_their_comments_say():
    """Clipping acts in the cases with clip_norm 0.05 and not with 1e3; the scaled loss of 2**127 overflows, so the
    scaler skips the step and halves the scale; the others step."""
    import torch

    from course_lib.grading.train_step import CASES
    from course_lib.grading.train_step_problem import micro_batches, step_problem
    from course_lib.train import training_step

    for n, B, T, clip, scale, _, seed in CASES:
        model, optimizer, scaler, _, _ = step_problem(seed, scale)
        before = [p.detach().clone() for p in model.parameters()]
        stats = {}
        training_step(model, micro_batches(n, B, T, seed + 100), optimizer, scaler, clip_norm=clip or 1.0, stats=stats)
        norm = stats["grad_norm"].item()
        stepped = not all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
        if scale == 2.0**127:
            assert not stepped and scaler.get_scale() == 2.0**126
        else:
            assert stepped and (norm > clip if clip == 0.05 else norm < clip), (clip, norm)
