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


def _lesson_09_gpt(edit: tuple[str, str] | None = None, block=blocks.TransformerBlock):
    """Lesson 09's GPT answer cell as the instructor wrote it (an edit applied), run on `block`."""
    from tests.answers import run_cell
    from tests.nbtools import source_path

    (code,) = [
        c.source
        for c in read(source_path("09_char_gpt")).cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "GPT"
    ]
    if edit is not None:
        assert edit[0] in code
        code = code.replace(*edit)
    return run_cell(code, TransformerBlock=block)["GPT"]


def test_an_answer_of_the_running_notebook_is_kept_when_it_passes_and_the_banner_says_so(work):
    from course_lib import gpt
    from course_lib.workflow.your_code import add_answers

    for lesson in LESSONS:
        _save(work, solved(lesson), lesson)
    yours = load_your_code(*LESSONS)
    mine = _lesson_09_gpt(block=yours.TransformerBlock)  # as lesson 09 builds it: on the block your_code chose
    trained = add_answers(yours, "09_char_gpt", {"GPT": mine})
    assert trained.GPT is mine and trained.yours("GPT") and trained.yours("TransformerBlock")
    assert trained.choices["GPT"].uses == ("TransformerBlock",)
    assert trained.banner(["MultiHeadAttention", "FeedForward", "TransformerBlock", "GPT"]) == (
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward`, `TransformerBlock` (lesson 06); "
        "your `GPT` (lesson 09)."
    )
    assert "GPT" not in yours.choices  # `yours` itself is left as it was
    assert gpt.GPT is not mine
    # A GPT whose code builds on another block than yours: your block is said not to run.
    other = add_answers(yours, "09_char_gpt", {"GPT": _lesson_09_gpt(block=blocks.TransformerBlock)})
    assert other.banner(["TransformerBlock", "GPT"]) == (
        "Running your `GPT` (lesson 09).\nNot running your `TransformerBlock` (lesson 06): your `GPT` does not use it."
    )


def test_a_failing_answer_of_the_running_notebook_runs_the_reference_and_leaves_out_the_classes_below(work):
    from course_lib import gpt
    from course_lib.workflow.your_code import add_answers

    for lesson in LESSONS:
        _save(work, solved(lesson), lesson)
    yours = load_your_code(*LESSONS)
    untied = _lesson_09_gpt(
        ("        self.lm_head.weight = self.tok_emb.weight", "        pass"), yours.TransformerBlock
    )
    trained = add_answers(yours, "09_char_gpt", {"GPT": untied}, ("MultiHeadAttention", "FeedForward"))
    assert trained.GPT is gpt.GPT and not trained.yours("GPT")
    assert "matrix of its own" in trained.choices["GPT"].reason
    banner = trained.banner(["MultiHeadAttention", "FeedForward", "TransformerBlock", "GPT"])
    first, second = banner.splitlines()
    assert first.startswith("Running the course's `GPT` (lesson 09: its visible check says: ")
    assert "matrix of its own" in first and not first.endswith(".).") and first.endswith(").")
    assert "your `" not in first  # the course's GPT is built from the course's classes: none of yours runs
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05), `FeedForward`, `TransformerBlock` (lesson 06): the "
        "course's `GPT` is built from the course's classes."
    )
    assert yours.yours("TransformerBlock") and trained.yours("TransformerBlock")  # they passed; they do not run
    graded = add_answers(yours, "09_char_gpt", {"GPT": _lesson_09_gpt()}, graded=True)
    assert graded.GPT is gpt.GPT and "graded runs" in graded.choices["GPT"].reason


def _post_ln_block(lesson_06):
    (code,) = [
        c.source for c in lesson_06.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "TransformerBlock"
    ]
    wrong = code.replace("x = x + self.attn(self.ln1(x), mask)", "x = self.ln1(x + self.attn(x, mask))")
    assert wrong != code
    return with_answer(lesson_06, "TransformerBlock", wrong)


def test_a_failing_block_runs_the_courses_block_and_the_banner_leaves_out_what_it_was_built_on(work):
    """The course's block holds the course's attention and feed-forward: the banner names only what runs."""
    _save(work, solved(LESSONS[0]), LESSONS[0])
    _save(work, _post_ln_block(solved(LESSONS[1])), LESSONS[1])
    yours = load_your_code(*LESSONS)
    assert yours.yours("MultiHeadAttention") and yours.yours("FeedForward") and not yours.yours("TransformerBlock")
    first, second = yours.banner(["MultiHeadAttention", "FeedForward", "TransformerBlock"]).splitlines()
    assert first.startswith("Running the course's `TransformerBlock` (lesson 06: its visible check says: "), first
    assert first.endswith(").") and not first.endswith(".).") and "your" not in first.split("(lesson 06")[0]
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05), `FeedForward` (lesson 06): the course's "
        "`TransformerBlock` is built from the course's classes."
    )
    # Listed on their own (lesson 09's ladder builds its models from them), they run.
    assert yours.banner(["MultiHeadAttention", "FeedForward"]) == (
        "Running your `MultiHeadAttention` (lesson 05); your `FeedForward` (lesson 06)."
    )


def test_a_block_that_does_not_use_your_feed_forward_is_said_not_to_run_it(work):
    nb = solved(LESSONS[1])
    (code,) = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "TransformerBlock"]
    own_mlp = code.replace(
        "self.mlp = FeedForward(d_model, d_hidden, dropout)", "self.mlp = ref.FeedForward(d_model, d_hidden, dropout)"
    )
    assert own_mlp != code
    _save(work, solved(LESSONS[0]), LESSONS[0])
    _save(work, with_answer(nb, "TransformerBlock", own_mlp), LESSONS[1])
    yours = load_your_code(*LESSONS)
    assert yours.yours("TransformerBlock") and yours.choices["TransformerBlock"].uses == ("MultiHeadAttention",)
    assert yours.banner(["MultiHeadAttention", "FeedForward", "TransformerBlock"]) == (
        "Running your `MultiHeadAttention` (lesson 05); your `TransformerBlock` (lesson 06).\n"
        "Not running your `FeedForward` (lesson 06): your `TransformerBlock` does not use it."
    )


def test_colabs_copies_are_found_in_a_flat_folder_and_the_newest_is_read(tmp_path, monkeypatch):
    """Colab's "Save a copy in Drive" writes `Copy of <lesson>.ipynb`, then `Copy of <lesson> (1).ipynb`, ..."""
    import os

    from course_lib.workflow.your_code import find_notebook

    drive = tmp_path / "MyDrive" / "Colab Notebooks"
    drive.mkdir(parents=True)
    monkeypatch.delenv("COURSE_WORK_DIR", raising=False)
    monkeypatch.setenv("COURSE_DRIVE_DIR", str(drive))
    here = tmp_path / "content"
    here.mkdir()
    assert find_notebook(LESSONS[0], here=here) is None
    old = drive / f"Copy of {LESSONS[0]}.ipynb"
    new = drive / f"Copy of {LESSONS[0]} (1).ipynb"
    unrelated = [drive / f"Copy of {LESSONS[0]}x.ipynb", drive / f"{LESSONS[1]}.ipynb", drive / "notes.ipynb"]
    for i, path in enumerate([old, new, *unrelated]):
        nbformat.write(solved(LESSONS[0]), path)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    os.utime(old, (2_000_000, 2_000_000))  # saved last
    found = find_notebook(LESSONS[0], here=here)
    assert found.path == old and found.copies == 2
    os.utime(new, (3_000_000, 3_000_000))
    assert find_notebook(LESSONS[0], here=here).path == new
    yours = load_your_code(LESSONS[0], here=here)
    assert yours.yours("MultiHeadAttention")
    assert yours.banner(["MultiHeadAttention"]).splitlines()[1] == (
        f"Lesson 05 read from Copy of {LESSONS[0]} (1).ipynb, the most recently saved of 2 copies in {drive}."
    )
    # A folder named by COURSE_WORK_DIR comes first; in it the layout of `make lab`'s work/ is found too.
    work = tmp_path / "work"
    mine = _save(work, solved(LESSONS[0]), LESSONS[0])
    monkeypatch.setenv("COURSE_WORK_DIR", str(work))
    assert find_notebook(LESSONS[0], here=here).path == mine


def test_a_lesson_not_found_says_in_one_line_what_to_do_here(tmp_path, monkeypatch):
    import sys
    import types

    monkeypatch.delenv("COURSE_WORK_DIR", raising=False)
    monkeypatch.delenv("COURSE_DRIVE_DIR", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    here = tmp_path / "work" / "09_char_gpt"
    here.mkdir(parents=True)
    laptop = load_your_code(*LESSONS, here=here).banner(["MultiHeadAttention", "TransformerBlock"])
    first, advice = laptop.splitlines()
    assert first == (
        "Running the course's `MultiHeadAttention` (lesson 05: no saved notebook found); the course's "
        "`TransformerBlock` (lesson 06: no saved notebook found)."
    )
    expected = [tmp_path / "work" / lesson / f"{lesson}.ipynb" for lesson in LESSONS]
    assert advice == (
        f"To run yours: save your notebook of lessons 05 and 06 as {expected[0]}, {expected[1]} "
        "(`make lab` keeps your lessons there)."
    )
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    unmounted = load_your_code(LESSONS[0], here=tmp_path).banner().splitlines()[-1]
    assert unmounted.startswith("To run yours: let the set-up cell mount your Google Drive (its DRIVE_FOLDER")
    drive = tmp_path / "MyDrive" / "Colab Notebooks"
    drive.mkdir(parents=True)
    monkeypatch.setenv("COURSE_DRIVE_DIR", str(drive))
    mounted = load_your_code(LESSONS[0], here=tmp_path).banner().splitlines()[-1]
    assert mounted == (
        "To run yours: open lesson 05 in Colab, save your copy with File > Save a copy in Drive, write your answers "
        f"there, and run this cell again (copies are looked for in {drive})."
    )
    assert "To run yours" not in load_your_code(LESSONS[0], here=tmp_path, graded=True).banner()
