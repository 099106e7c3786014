"""Lesson 10 runs the learner's own classes.

A learner who solved lessons 05, 06 and 09 and solves lesson 10 loads GPT-2's weights with their own
`load_gpt2_weights` into a GPT built from their own blocks, and that model writes the samples of section 7 and, with
their own `forward_with_cache`, generates with a KV cache in section 8 (the same ids as without it, and the speed-up
printed): the banners say so, and the logits match Hugging Face's (`learners_classes_ran`, checked on the lesson's
one full run, on the Colab stand-in with their copies in Drive: tests/test_notebooks_execute.py). Executed next to
the learner's saved lessons (a fresh work folder, `COURSE_WORK_DIR`) with a wrong lesson 06 `TransformerBlock`, a
wrong `load_gpt2_weights` and a wrong `forward_with_cache`, the lesson still runs, on the course's block, loader and
GPT2, and the banners say why (at the lesson's smallest sizes, COURSE_SMALL_RUN: that run is about the choice of
classes, not about the numbers).
"""

from __future__ import annotations

import re

import pytest

from course_lib.workflow.course import grade_id
from tests.nbtools import banner, printed, read, run_beside, solved, source_path, with_answer

pytestmark = pytest.mark.slow

LESSON = "10_gpt2"
EARLIER = ("05_multi_head_attention", "06_transformer_blocks")
YOUR_CODE = 'yours = your_code("05_multi_head_attention"'  # the cell that chooses the classes
YOUR_LOADER = 'mine = your_answers("10_gpt2"'  # the cell that chooses the loader and checks it on random weights
SAMPLES = "strategies = {"  # section 7: the five decoding strategies, on the learner's GPT
CACHED = 'mine_cached = your_answers("10_gpt2"'  # section 8: cached generation and its timing


def _run(tmp_path, monkeypatch, earlier: dict, lesson_10):
    """`lesson_10` executed with `earlier` saved beside it, at the smallest sizes."""
    return run_beside(tmp_path, monkeypatch, LESSON, earlier, lesson_10)


def _logit_gap(nb) -> float:
    found = re.search(r"random weights, max \|logit difference\| = (\S+)", printed(nb, YOUR_LOADER))
    assert found, printed(nb, YOUR_LOADER)
    return float(found.group(1))


def learners_classes_ran(nb) -> None:
    """What the lesson's full run shows when the learner solved lessons 05, 06, 09 and 10 (that run is the lesson's
    run on the Colab stand-in, their copies in Drive: tests/test_notebooks_execute.py)."""
    classes = banner(nb, YOUR_CODE)
    assert classes.startswith(
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06); your `GPT` "
        "(lesson 09).\n"
    )
    assert "the blocks of a GPT built here: your_06_transformer_blocks" in classes, classes
    loader = printed(nb, YOUR_LOADER)
    assert "Running your `load_gpt2_weights` (lesson 10)." in loader
    assert "head still tied to the token embedding: True" in loader
    assert _logit_gap(nb) < 1e-4  # their loader, their blocks: Hugging Face's logits
    assert printed(nb, SAMPLES).count("--- ") == 5  # the five strategies wrote with their model
    cached = printed(nb, CACHED)
    assert "Running your `forward_with_cache` (lesson 10)." in cached
    assert "Cached runs: your GPT (`your_small`) with your forward_with_cache." in cached
    assert "cache and recomputation give the same ids: True" in cached  # their GPT, their cache
    assert "the same ids either way: True" in cached
    assert re.search(r"the cache was [\d.]+x faster here", cached), cached  # printed, never asserted


def test_wrong_answers_give_way_to_the_courses_classes_and_say_why(tmp_path, monkeypatch):
    blocks = solved(EARLIER[1])
    (code,) = [c.source for c in blocks.cells if grade_id(c) == "TransformerBlock"]
    post_ln = code.replace("x = x + self.attn(self.ln1(x), mask)", "x = self.ln1(x + self.attn(x, mask))")
    assert post_ln != code
    lesson_10 = solved(LESSON)
    (loader,) = [c.source for c in lesson_10.cells if grade_id(c) == "load_gpt2_weights"]
    untransposed = loader.replace("state_dict[key].t() if key.endswith(conv1d) else state_dict[key]", "state_dict[key]")
    assert untransposed != loader
    (forward,) = [c.source for c in lesson_10.cells if grade_id(c) == "forward_with_cache"]
    unshifted = forward.replace("torch.arange(P, P + T, device=idx.device)", "torch.arange(T, device=idx.device)")
    assert unshifted != forward
    earlier = {EARLIER[0]: solved(EARLIER[0]), EARLIER[1]: with_answer(blocks, "TransformerBlock", post_ln)}
    lesson_10 = with_answer(with_answer(lesson_10, "load_gpt2_weights", untransposed), "forward_with_cache", unshifted)
    nb = _run(tmp_path, monkeypatch, earlier, lesson_10)
    classes = printed(nb, YOUR_CODE)
    assert "the course's `TransformerBlock` (lesson 06: its visible check says:" in classes, classes
    assert "the blocks of a GPT built here: course_lib.blocks" in classes, classes
    loader = printed(nb, YOUR_LOADER)
    assert "Running the course's `load_gpt2_weights` (lesson 10: its visible check says:" in loader, loader
    assert _logit_gap(nb) < 1e-4  # the reference loaded the weights
    assert printed(nb, SAMPLES).count("--- ") == 5
    cached = printed(nb, CACHED)
    assert "Running the course's `forward_with_cache` (lesson 10: its visible check says:" in cached, cached
    assert "rows 0 .. T - 1 of the position table" in cached  # the grader's reason, in the banner
    assert "Cached runs: the course's GPT2 with the same weights (`small`), with its own cache." in cached
    assert "cache and recomputation give the same ids: True" in cached


def test_the_lesson_builds_its_gpt_from_the_learners_blocks():
    (cell,) = [c for c in read(source_path(LESSON)).cells if YOUR_CODE in c.source]
    assert '"05_multi_head_attention", "06_transformer_blocks"' in cell.source
    assert "block=yours.TransformerBlock" in cell.source
