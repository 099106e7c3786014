"""Lesson 09 runs the learner's own classes.

A learner who solved lessons 05 and 06 and solves lesson 09 trains their own GPT, built on their own blocks and
attention: the banner above the training cell says so, the training runs, and the ablation ladder built from their
classes shows what the lesson's text says (`learners_classes_ran`, checked on the lesson's one full run, on the Colab
stand-in with their copies in Drive: tests/test_notebooks_execute.py). With a wrong lesson 06 `TransformerBlock` or
a wrong GPT the lesson, executed next to the learner's saved lessons (a fresh work folder, `COURSE_WORK_DIR`), still
runs, on the course's classes, and the banner says why (at the smallest sizes: that run is about the choice of
classes, not about the numbers)."""

from __future__ import annotations

import re

import pytest

from course_lib.workflow.course import grade_id
from tests.claims import l09_char_gpt as claims
from tests.nbtools import banner, printed, read, run_beside, solved, solved_earlier, source_path, with_answer

pytestmark = pytest.mark.slow

LESSON = "09_char_gpt"
EARLIER = ("05_multi_head_attention", "06_transformer_blocks")


def _run(tmp_path, monkeypatch, earlier: dict, small: bool, nb=None, allow_errors: bool = False):
    """Lesson 09 (`nb`, default solved) executed with `earlier` saved beside it. A cell's error stops the run unless
    `allow_errors` (a failing visible check is part of that run)."""
    return run_beside(tmp_path, monkeypatch, LESSON, earlier, nb, small, allow_errors=allow_errors)


def learners_classes_ran(nb) -> None:
    """What the lesson's full run shows when the learner solved lessons 05, 06 and 09 (that run is the lesson's run
    on the Colab stand-in, their copies in Drive: tests/test_notebooks_execute.py): their GPT trains on their blocks,
    and the ladder is built from their classes."""
    assert banner(nb, "trained = with_your_answers(").strip() == (
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06); "
        "your `GPT` (lesson 09)."
    )
    trained = printed(nb, claims.GPT)
    steps = re.search(r"GPT after (\d+) steps", trained)
    assert steps and int(steps.group(1)) == 1500, trained
    assert "Running your `MultiHeadAttention` (lesson 05); your `layer_norm`, `FeedForward` (lesson 06)." in (
        printed(nb, claims.LADDER)
    )
    # what the lesson's text says of the ladder and the GPT built from the learner's classes: its claims, checked
    # on the same run


def test_a_wrong_lesson_06_block_runs_on_the_courses_block_and_says_why(tmp_path, monkeypatch):
    blocks = solved_earlier(EARLIER[1])
    (code,) = [c.source for c in blocks.cells if grade_id(c) == "TransformerBlock"]
    post_ln = code.replace("x = x + self.attn(self.ln1(x), mask)", "x = self.ln1(x + self.attn(x, mask))")
    assert post_ln != code
    earlier = {EARLIER[0]: solved_earlier(EARLIER[0]), EARLIER[1]: with_answer(blocks, "TransformerBlock", post_ln)}
    nb = _run(tmp_path, monkeypatch, earlier, small=True)
    # The course's block holds the course's attention and feed-forward: the banner names only what runs.
    first, second = printed(nb, "trained = with_your_answers(").strip().splitlines()
    assert first.startswith("Running the course's `TransformerBlock` (lesson 06: its visible check says: "), first
    assert first.endswith("); your `GPT` (lesson 09).")  # theirs, on the course's block
    assert ".)." not in first and ".);" not in first, first  # a reason inside parentheses ends without its stop
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05), `FeedForward` (lesson 06): the course's "
        "`TransformerBlock` is built from the course's classes."
    )
    assert re.search(r"GPT after \d+ steps", printed(nb, claims.GPT))


def test_a_wrong_gpt_runs_the_courses_gpt_on_the_courses_classes_and_says_why(tmp_path, monkeypatch):
    nb = solved(LESSON)
    (code,) = [c.source for c in nb.cells if grade_id(c) == "GPT"]
    untied = code.replace("        self.lm_head.weight = self.tok_emb.weight", "        pass")
    assert untied != code
    earlier = {lesson: solved_earlier(lesson) for lesson in EARLIER}
    nb = _run(tmp_path, monkeypatch, earlier, small=True, nb=with_answer(nb, "GPT", untied), allow_errors=True)
    (check,) = [c for c in nb.cells if c.cell_type == "code" and "check_GPT(GPT)" in c.source]
    (error,) = [o for o in check.outputs if o.output_type == "error"]
    assert "matrix of its own" in error.evalue  # the learner sees why in the visible check's output
    first, second = printed(nb, "trained = with_your_answers(").strip().splitlines()
    assert first.startswith("Running the course's `GPT` (lesson 09: its visible check says: "), first
    assert "matrix of its own" in first and ".)." not in first and ".);" not in first, first
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05), `FeedForward`, `TransformerBlock` (lesson 06): the "
        "course's `GPT` is built from the course's classes."
    )
    assert re.search(r"the course's GPT: [\d,]+ parameters", printed(nb, "gpt = Model(V, block_size"))
    assert re.search(r"GPT after \d+ steps", printed(nb, claims.GPT))
    # The ladder is built from the earlier lessons' classes, which passed: still the learner's.
    assert "Running your `MultiHeadAttention` (lesson 05)" in printed(nb, claims.LADDER)
    others = [c for c in nb.cells if c.cell_type == "code" and c is not check]
    assert not [o for c in others for o in c.outputs if o.output_type == "error"]  # the rest ran


def test_the_lesson_reads_the_earlier_lessons_answers_it_names():
    """The import cell asks for lessons 05 and 06 and binds the block the GPT exercise is built from."""
    (cell,) = [c for c in read(source_path(LESSON)).cells if "your_code(" in c.source]
    assert 'your_code("05_multi_head_attention", "06_transformer_blocks")' in cell.source
    assert "TransformerBlock = yours.TransformerBlock" in cell.source
