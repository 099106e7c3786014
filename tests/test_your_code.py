"""Your answers carried into a later lesson (course_lib/workflow/your_code.py), with real lesson notebooks."""

from __future__ import annotations

import nbformat
import pytest

from course_lib import blocks, multihead
from course_lib.workflow.your_code import load_your_code, notebook_of
from tests.nbtools import read, release_path, solved, with_answer

LESSONS = ("05_multi_head_attention", "06_transformer_blocks")


def _save(folder, nb, lesson):
    (folder / lesson).mkdir(parents=True, exist_ok=True)
    path = folder / lesson / f"{lesson}.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_WORK_DIR", str(tmp_path))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return tmp_path


def test_solved_lessons_give_your_classes_and_the_banner_says_so(work):
    for lesson in LESSONS:
        _save(work, solved(lesson), lesson)
    yours = load_your_code(*LESSONS)
    for name in ("MultiHeadAttention", "split_heads", "layer_norm", "FeedForward", "TransformerBlock"):
        assert yours.yours(name), yours.choices[name]
    assert yours.MultiHeadAttention is not multihead.MultiHeadAttention
    assert yours.TransformerBlock is not blocks.TransformerBlock
    assert yours.TransformerBlock.__module__ == "your_06_transformer_blocks"
    # Your lesson 06 block is built on your lesson 05 attention (lesson 06's answer cells do not import one).
    block = yours.TransformerBlock(8, 2)
    assert type(block.attn) is yours.MultiHeadAttention
    assert type(block.attn).__module__ == "your_05_multi_head_attention"
    assert yours.banner(["MultiHeadAttention", "FeedForward", "TransformerBlock"]) == (
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06)."
    )


def test_an_untouched_lesson_gives_the_references_and_says_not_written(work):
    _save(work, read(release_path(LESSONS[0])), LESSONS[0])  # the student version, nothing written
    yours = load_your_code(LESSONS[0])
    assert yours.MultiHeadAttention is multihead.MultiHeadAttention
    assert not yours.yours("MultiHeadAttention")
    assert "not written yet" in yours.choices["MultiHeadAttention"].reason
    assert yours.banner(["split_heads", "MultiHeadAttention"]) == (
        "Running the course's `split_heads`, `MultiHeadAttention` (lesson 05: not written yet)."
    )


def test_a_wrong_answer_falls_back_with_the_checks_message_and_later_answers_build_on_the_reference(work):
    nb = solved(LESSONS[0])
    code = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "MultiHeadAttention")
    wrong = code.replace("/ math.sqrt(self.d_head)", "")  # a known mistake: no scaling
    assert wrong != code
    _save(work, with_answer(nb, "MultiHeadAttention", wrong), LESSONS[0])
    _save(work, solved(LESSONS[1]), LESSONS[1])
    yours = load_your_code(*LESSONS)
    assert not yours.yours("MultiHeadAttention")
    assert "visible check says" in yours.choices["MultiHeadAttention"].reason
    assert yours.yours("TransformerBlock")
    block = yours.TransformerBlock(8, 2)
    assert type(block.attn) is multihead.MultiHeadAttention  # the reference stood in for the wrong answer


def test_no_notebook_and_graded_runs_give_references(work, monkeypatch):
    yours = load_your_code(LESSONS[1])
    assert yours.TransformerBlock is blocks.TransformerBlock
    assert "no saved notebook" in yours.choices["TransformerBlock"].reason
    _save(work, solved(LESSONS[1]), LESSONS[1])
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    graded = load_your_code(LESSONS[1])
    assert graded.TransformerBlock is blocks.TransformerBlock
    assert "graded runs" in graded.choices["TransformerBlock"].reason


def test_a_broken_file_and_a_crashing_cell_are_reported_not_raised(work):
    folder = work / LESSONS[1]
    folder.mkdir()
    (folder / f"{LESSONS[1]}.ipynb").write_text("{ not json")
    yours = load_your_code(LESSONS[1])
    assert "could not be read" in yours.choices["layer_norm"].reason
    _save(work, with_answer(solved(LESSONS[1]), "layer_norm", "raise SystemExit(3)"), LESSONS[1])
    yours = load_your_code(LESSONS[1])
    assert "raised SystemExit" in yours.choices["layer_norm"].reason
    assert yours.yours("FeedForward")


def test_notebooks_are_found_next_to_the_running_one(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_WORK_DIR", raising=False)
    path = _save(tmp_path, solved(LESSONS[0]), LESSONS[0])
    here = tmp_path / "09_char_gpt"
    here.mkdir()
    assert notebook_of(LESSONS[0], here=here) == path
    monkeypatch.chdir(here)
    assert notebook_of(LESSONS[0]) == path
