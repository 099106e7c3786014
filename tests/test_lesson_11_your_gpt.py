"""Lesson 11 trains the learner's own GPT.

A learner who solved lessons 05, 06 and 09 runs lesson 11's CPU smoke path: the run trains their lesson 09 `GPT` (on
their blocks and attention) at the smoke run's size with GPT-2's initialisation, the lines above the run say so, the
course's GPT2 is timed beside it and the cost is printed (never asserted), and the resumed run equals the
uninterrupted one (`learners_classes_ran`, checked on the lesson's one full run, on the Colab stand-in with their
copies in Drive: tests/test_notebooks_execute.py). Executed next to the learner's saved lessons (a fresh work folder,
`COURSE_WORK_DIR`) with a lesson 09 `GPT` that fails its visible check, the course's GPT2 trains and the banner says
why (at the smallest sizes: that run is about the choice of model, not about the numbers). The command line's smoke
run, as `python -m course_lib train run --smoke`, trains their GPT too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from course_lib.train_data import prepare_tiny_shakespeare
from course_lib.workflow.course import grade_id
from tests.claims import l11_gpt2_training_gpu as claims
from tests.nbtools import banner, printed, run_beside, save_lessons, solved_earlier, with_answer

pytestmark = pytest.mark.slow

LESSON = "11_gpt2_training_gpu"
EARLIER = ("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt")


def _run(tmp_path, monkeypatch, earlier: dict, small: bool):
    """Lesson 11, solved, executed with `earlier` saved beside it."""
    return run_beside(tmp_path, monkeypatch, LESSON, earlier, small=small)


def learners_classes_ran(nb) -> None:
    """What the lesson's CPU smoke run shows when the learner solved lessons 05, 06 and 09 (that run is the lesson's
    run on the Colab stand-in, their copies in Drive: tests/test_notebooks_execute.py): their GPT trains, is timed
    beside the course's GPT2, and resumes exactly."""
    first, second = banner(nb, claims.YOUR_MODEL).strip().splitlines()
    assert first == (
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06); "
        "your `GPT` (lesson 09)."
    )
    assert (
        second == "The training runs below train YOUR GPT (lesson 09), configured as a tiny GPT-2 (the CPU smoke run)."
    )
    planned = printed(nb, claims.READS)
    assert "YOUR GPT (lesson 09): 3,320,640 parameters" in planned  # lesson 09's GPT, GPT-2's vocabulary unpadded
    assert re.search(r"^per step: your GPT [\d.]+ s, the course's GPT2 \(fused attention\) [\d.]+ s", planned, re.M)
    claims.c_model(nb)
    claims.c_cost(nb)  # the cost in the budget: printed as measured here, its arithmetic checked
    claims.c_run(nb)  # their GPT trained: the loss starts at about ln 50,257 and falls
    claims.c_resume(nb)  # a fresh model of their class resumed the run exactly
    claims.c_mfu(nb)  # the MFU read their attention's shape (their module names, no d_head needed)


def test_a_wrong_gpt_trains_the_courses_gpt2_and_says_why(tmp_path, monkeypatch):
    gpt = solved_earlier(EARLIER[2])
    (code,) = [c.source for c in gpt.cells if grade_id(c) == "GPT"]
    untied = code.replace("        self.lm_head.weight = self.tok_emb.weight", "        pass")
    assert untied != code
    earlier = {lesson: solved_earlier(lesson) for lesson in EARLIER[:2]} | {EARLIER[2]: with_answer(gpt, "GPT", untied)}
    nb = _run(tmp_path, monkeypatch, earlier, small=True)
    first, second, third = printed(nb, claims.YOUR_MODEL).strip().splitlines()
    assert first.startswith("Running the course's `GPT` (lesson 09: its visible check says: "), first
    assert "matrix of its own" in first and ".)." not in first, first
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05), `FeedForward`, `TransformerBlock` (lesson 06): the "
        "course's `GPT` is built from the course's classes."
    )
    assert third == (
        "The training runs below train the course's GPT2 (course_lib.gpt2), configured as a tiny GPT-2 (the CPU smoke "
        "run)."
    )
    assert "the course's GPT2 (course_lib.gpt2): 3,323,648 parameters" in printed(nb, claims.READS)
    assert "per step:" not in printed(nb, claims.READS)  # nothing to compare: the course's model trains
    claims.c_model(nb)
    claims.c_cost(nb)
    assert re.search(r"training loss: step 0: [\d.]+, step \d+: [\d.]+$", printed(nb, claims.RUN), re.M)


def test_the_command_lines_smoke_run_trains_the_learners_gpt(tmp_path):
    """`python -m course_lib train ...` is `python -m course_lib.train ...` on the learner's GPT: it says so on stderr,
    and the run's first record names their class (their lesson 09 answer, run by your_code)."""
    work = tmp_path / "work"
    save_lessons(work, {lesson: solved_earlier(lesson) for lesson in EARLIER})
    shards = tmp_path / "shards"
    prepare_tiny_shakespeare(shards)
    command = [sys.executable, "-m", "course_lib", "train", "run", "--smoke", "--data-dir", str(shards)]
    command += ["--max-steps", "2", "--warmup-steps", "1", "--eval-interval", "0", "--sample-interval", "0"]
    env = os.environ | {"COURSE_WORK_DIR": str(work)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "your `GPT` (lesson 09)." in done.stderr and "training YOUR GPT (lesson 09)" in done.stderr, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert records[0]["kind"] == "start" and records[0]["model"] == "your_09_char_gpt.GPT", records[0]
    assert [r["step"] for r in records if r["kind"] == "train"] == [0, 1]
