"""Lesson 13 runs the learner's own classes.

A learner who solved lessons 05, 06, 09 and 10 trains the attention-only model on their own lesson 05
`MultiHeadAttention` and looks for heads in their own lesson 09 `GPT`: the banner and the lines under it say so
(`learners_classes_ran`, checked on the lesson's one full run, on the Colab stand-in with their copies in Drive:
tests/test_notebooks_execute.py). Executed next to the learner's saved lessons (a fresh work folder,
`COURSE_WORK_DIR`) with a wrong lesson 05 answer, the lesson still runs, on the course's attention, and the banner
says why (at the smallest sizes, COURSE_SMALL_RUN: that run is about the choice of classes, not about the numbers).
"""

from __future__ import annotations

import pytest

from tests.nbtools import printed, run_beside, solved, with_answer
from tests.test_nbgrader_roundtrip import ONE_WRONG

pytestmark = pytest.mark.slow

LESSON = "13_what_attention_learned"
EARLIER = ("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt", "10_gpt2")
YOUR_CODE = 'yours = your_code("05_multi_head_attention"'  # the cell that chooses the classes
MODEL = "model = repeat_task.attention_only_gpt("  # the cell that builds and trains the attention-only model
CHAR_GPT = "char_gpt = course_gpt.init_gpt2(yours.GPT("  # section 6: lesson 09's GPT, trained and scored


def _run(tmp_path, monkeypatch, earlier: dict):
    """Lesson 13 (solved) executed with `earlier` saved beside it, at the smallest sizes."""
    return run_beside(tmp_path, monkeypatch, LESSON, earlier)


def learners_classes_ran(nb) -> None:
    """What the lesson's full run shows when the learner solved lessons 05, 06, 09 and 10 (that run is the lesson's
    run on the Colab stand-in, their copies in Drive: tests/test_notebooks_execute.py)."""
    assert printed(nb, YOUR_CODE).startswith(
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06); your `GPT` "
        "(lesson 09); your `load_gpt2_weights` (lesson 10)."
    )
    assert "the attention in every block: your_05_multi_head_attention" in printed(nb, MODEL)
    char_gpt = printed(nb, CHAR_GPT)
    assert "the blocks of this GPT: your_06_transformer_blocks" in char_gpt and "your GPT after" in char_gpt


def test_a_wrong_attention_gives_way_to_the_courses_and_the_banner_says_why(tmp_path, monkeypatch):
    name, code, _ = ONE_WRONG["05_multi_head_attention"]  # heads split with a bare view
    earlier = {lesson: solved(lesson) for lesson in EARLIER}
    earlier["05_multi_head_attention"] = with_answer(earlier["05_multi_head_attention"], name, code)
    nb = _run(tmp_path, monkeypatch, earlier)
    banner = printed(nb, YOUR_CODE)
    assert "the course's `MultiHeadAttention` (lesson 05: its visible check says:" in banner, banner
    assert "split with a bare view" in banner
    assert "the attention in every block: course_lib.multihead" in printed(nb, MODEL)


def test_the_gpt2_branch_runs_on_a_random_gpt2_offline():
    """The online cell of section 6, run as written with `pretrained_if_available` handing it a small random GPT-2
    (the Hub is out of reach here): it loads the weights into the GPT given and prints both rankings."""
    import contextlib
    import io
    import types

    import pandas as pd
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from course_lib import gpt, gpt2_weights
    from course_lib import induction as ref
    from tests.nbtools import read, source_path

    (cell,) = [c.source for c in read(source_path(LESSON)).cells if 'pretrained_if_available("gpt2")' in c.source]
    torch.manual_seed(0)
    random_gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=128, vocab_size=300)).eval()
    stand_in = types.SimpleNamespace(pretrained_if_available=lambda name: (random_gpt2, "a random GPT-2 (the test's)"))
    yours = types.SimpleNamespace(GPT=gpt.GPT, load_gpt2_weights=gpt2_weights.load_gpt2_weights)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(cell, {"SMALL": False, "gpt2_weights": stand_in, "yours": yours, "ref": ref, "pd": pd, "torch": torch})
    text = printed.getvalue()
    assert "GPT-2 small a random GPT-2 (the test's), in course_lib.gpt's GPT" in text, text
    assert text.count("previous token") >= 2 and "heads with an induction score above 0.3:" in text
    assert text.rstrip().endswith("of 4")  # 2 layers of 2 heads
