"""Lesson 07 trains an encoder-decoder whose encoder is made of the learner's own lesson 06 `EncoderLayer`.

Executed as a learner runs it, next to their saved lessons 05 and 06 (a fresh work folder, `COURSE_WORK_DIR`): with
both solved, the banner names their attention and encoder layer, the model's encoder layers are their class, and the
lesson trains and decodes with it. With an encoder layer that fails its visible check (the padding mask ignored),
the course's layer stands in and the banner says why, and that the learner's attention, which it was built on, does
not run. Both at the lesson's smallest sizes (COURSE_SMALL_RUN) and up to the greedy decoding of section 6: they are
about the choice of classes; the instructor's run of the whole lesson (tests/test_notebooks_execute.py) checks what
its text says of the numbers.
"""

from __future__ import annotations

import nbformat
import pytest

from course_lib.workflow.course import grade_id
from tests.nbtools import execute, read, solved, source_path, with_answer

pytestmark = pytest.mark.slow

LESSON = "07_encoder_decoder"
EARLIER = ("05_multi_head_attention", "06_transformer_blocks")
IMPORTS = 'yours = your_code("05_multi_head_attention", "06_transformer_blocks")'
MODEL = "model = ref.EncoderDecoderTransformer(config, encoder_layer=EncoderLayer)"
TRAIN = "history = ref.train(model, task, train_config"
DECODED = "outputs = ref.greedy_decode(model, src_examples)"


def _run(tmp_path, monkeypatch, earlier: dict):
    work = tmp_path / "work"
    for lesson, nb in earlier.items():
        (work / lesson).mkdir(parents=True)
        nbformat.write(nb, work / lesson / f"{lesson}.ipynb")
    monkeypatch.setenv("COURSE_WORK_DIR", str(work))
    monkeypatch.setenv("COURSE_SELF_GRADE", "off")
    monkeypatch.setenv("COURSE_SMALL_RUN", "1")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    (work / LESSON).mkdir()
    nb = solved(LESSON)
    # Up to the greedy decoding of held-out strings: what follows (evaluation, the swapped decoder) uses the same model.
    (last,) = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and DECODED in c.source]
    nb.cells = nb.cells[: last + 1]
    execute(nb, timeout=300, folder=work / LESSON)
    return nb


def _printed(nb, marker: str) -> str:
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_learner_who_solved_05_and_06_trains_an_encoder_of_their_own_layers(tmp_path, monkeypatch):
    nb = _run(tmp_path, monkeypatch, {lesson: solved(lesson) for lesson in EARLIER})
    assert _printed(nb, IMPORTS).strip() == (
        "Running your `MultiHeadAttention` (lesson 05); your `EncoderLayer` (lesson 06)."
    )
    assert "the encoder's layers: your_06_transformer_blocks EncoderLayer" in _printed(nb, MODEL)
    assert "mean loss of the last" in _printed(nb, TRAIN)
    decoded = _printed(nb, DECODED)  # a held-out string of each test length, decoded by the model trained here
    assert decoded.count(" -> ") >= 3 and " right" in decoded, decoded
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []


def test_an_encoder_layer_that_fails_its_check_gives_way_to_the_courses_and_the_banner_says_why(tmp_path, monkeypatch):
    blocks = solved(EARLIER[1])
    (code,) = [c.source for c in blocks.cells if grade_id(c) == "EncoderLayer"]
    no_mask = code.replace("self.self_attn(x, mask)", "self.self_attn(x)")
    assert no_mask != code
    nb = _run(
        tmp_path,
        monkeypatch,
        {EARLIER[0]: solved(EARLIER[0]), EARLIER[1]: with_answer(blocks, "EncoderLayer", no_mask)},
    )
    first, second = _printed(nb, IMPORTS).strip().splitlines()
    assert first.startswith("Running the course's `EncoderLayer` (lesson 06: its visible check says: "), first
    assert first.endswith(").") and ".)." not in first, first
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05): the course's `EncoderLayer` is built from the course's "
        "classes."
    )
    assert "the encoder's layers: course_lib.blocks EncoderLayer" in _printed(nb, MODEL)
    assert "mean loss of the last" in _printed(nb, TRAIN)


def test_the_lesson_builds_its_encoder_and_the_swapped_model_from_the_layer_it_chose():
    cells = [c.source for c in read(source_path(LESSON)).cells if c.cell_type == "code"]
    assert any(IMPORTS in c and "EncoderLayer = yours.EncoderLayer" in c for c in cells)
    assert any(MODEL in c for c in cells)
    assert any("encoder_layer=EncoderLayer, decoder_layer=SwappedDecoderLayer" in c for c in cells)
