"""Lesson 07 trains the learner's own encoder-decoder: their `EncoderDecoderTransformer` of exercise 1, built from
their lesson 06 `EncoderLayer` and their lesson 03 `PositionEncoding`.

With everything solved, the banners name their positions, attention, encoder layer and model, the model trained is
their class built from their layers, and the lesson trains and decodes with it (`learners_classes_ran`, checked on
the lesson's one full run, on the Colab stand-in with their copies in Drive: tests/test_notebooks_execute.py).
Executed as a learner runs it, next to their saved lessons 03, 05 and 06 (a fresh work folder, `COURSE_WORK_DIR`):
with an encoder layer that fails its visible check (the padding mask ignored), their model is built from the
course's layer and the banner says why, and that the learner's attention, which it was built on, does not run. With
a model that fails its own visible check (cross-attention without the source's mask), the course's model trains,
built from the course's classes, and the banner says why and which of the learner's classes it leaves out. Both at
the lesson's smallest sizes (COURSE_SMALL_RUN) and up to the greedy decoding of section 6: they are about the choice
of classes."""

from __future__ import annotations

import pytest

from course_lib.workflow.course import grade_id
from tests.nbtools import banner, printed, read, run_beside, solved, source_path, with_answer

pytestmark = pytest.mark.slow

LESSON = "07_encoder_decoder"
EARLIER = ("03_position_encoding", "05_multi_head_attention", "06_transformer_blocks")
IMPORTS = 'yours = your_code("03_position_encoding", "05_multi_head_attention", "06_transformer_blocks")'
CHOICE = 'trained = with_your_answers(yours, "07_encoder_decoder"'
MODEL = "model = Model(config)"
CHECK = "check_EncoderDecoderTransformer(EncoderDecoderTransformer)"
TRAIN = "history = ref.train(model, task, train_config"
DECODED = "outputs = ref.greedy_decode(model, src_examples)"
YOURS = (
    "Running your `PositionEncoding` (lesson 03); your `MultiHeadAttention` (lesson 05); your `EncoderLayer` (lesson "
    "06)"
)


def _run(tmp_path, monkeypatch, earlier: dict, nb=None, allow_errors: bool = False):
    """Lesson 07 (`nb`, default solved) executed with `earlier` saved beside it, up to the greedy decoding of
    held-out strings (what follows uses the same model). A cell's error stops the run unless `allow_errors` (a
    failing visible check is part of that run)."""
    nb = solved(LESSON) if nb is None else nb
    (last,) = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and DECODED in c.source]
    nb.cells = nb.cells[: last + 1]
    return run_beside(tmp_path, monkeypatch, LESSON, earlier, nb, allow_errors=allow_errors)


def _errors(nb, but=None) -> list:
    return [
        o for c in nb.cells if c.cell_type == "code" and c is not but for o in c.outputs if o.output_type == "error"
    ]


def learners_classes_ran(nb) -> None:
    """What the lesson's full run shows when the learner solved lessons 03, 05, 06 and 07 (that run is the lesson's
    run on the Colab stand-in, their copies in Drive: tests/test_notebooks_execute.py): their model of their own
    layers trains and decodes."""
    assert banner(nb, IMPORTS).strip() == YOURS + "."
    assert banner(nb, CHOICE).strip() == YOURS + "; your `EncoderDecoderTransformer` (lesson 07)."
    model = printed(nb, MODEL)
    assert "your EncoderDecoderTransformer\n" in model
    assert "the encoder's layers: your_06_transformer_blocks EncoderLayer" in model
    assert "the positions: your_03_position_encoding PositionEncoding" in model
    assert "mean loss of the last" in printed(nb, TRAIN)
    decoded = printed(nb, DECODED)  # a held-out string of each test length, decoded by the model trained here
    assert decoded.count(" -> ") >= 3 and " right" in decoded, decoded
    assert _errors(nb) == []


def test_an_encoder_layer_that_fails_its_check_gives_way_to_the_courses_inside_the_learners_model(
    tmp_path, monkeypatch
):
    blocks = solved(EARLIER[2])
    (code,) = [c.source for c in blocks.cells if grade_id(c) == "EncoderLayer"]
    no_mask = code.replace("self.self_attn(x, mask)", "self.self_attn(x)")
    assert no_mask != code
    earlier = {lesson: solved(lesson) for lesson in EARLIER} | {
        EARLIER[2]: with_answer(blocks, "EncoderLayer", no_mask)
    }
    nb = _run(tmp_path, monkeypatch, earlier)
    first, second = printed(nb, IMPORTS).strip().splitlines()
    start = (
        "Running your `PositionEncoding` (lesson 03); the course's `EncoderLayer` (lesson 06: its visible check says: "
    )
    assert first.startswith(start), first
    assert first.endswith(").") and ".)." not in first, first
    assert second == (
        "Not running your `MultiHeadAttention` (lesson 05): the course's `EncoderLayer` is built from the course's "
        "classes."
    )
    choice = printed(nb, CHOICE).strip().splitlines()
    assert choice[0].startswith(start) and choice[0].endswith("); your `EncoderDecoderTransformer` (lesson 07)."), (
        choice
    )
    model = printed(nb, MODEL)
    assert "your EncoderDecoderTransformer\n" in model
    assert "the encoder's layers: course_lib.blocks EncoderLayer" in model
    assert "the positions: your_03_position_encoding PositionEncoding" in model
    assert "mean loss of the last" in printed(nb, TRAIN)


def test_a_model_that_fails_its_check_gives_way_to_the_courses_model_of_the_courses_classes(tmp_path, monkeypatch):
    nb = solved(LESSON)
    (code,) = [c.source for c in nb.cells if grade_id(c) == "EncoderDecoderTransformer"]
    unmasked = code.replace(
        "layer(x, memory, None, src_mask, need_weights=True)", "layer(x, memory, need_weights=True)"
    )
    assert unmasked != code
    nb = with_answer(nb, "EncoderDecoderTransformer", unmasked)
    earlier = {lesson: solved(lesson) for lesson in EARLIER}
    nb = _run(tmp_path, monkeypatch, earlier, nb=nb, allow_errors=True)
    (check,) = [c for c in nb.cells if c.cell_type == "code" and CHECK in c.source]
    (error,) = [o for o in check.outputs if o.output_type == "error"]
    assert "cross-attention reads the memory's padding" in error.evalue  # the learner sees why in the check's output
    assert printed(nb, IMPORTS).strip() == YOURS + "."  # the earlier lessons' classes passed
    first, second = printed(nb, CHOICE).strip().splitlines()
    assert first.startswith("Running the course's `EncoderDecoderTransformer` (lesson 07: its visible check says: ")
    assert "cross-attention reads the memory's padding" in first and ".)." not in first, first
    assert second == (
        "Not running your `PositionEncoding` (lesson 03), `MultiHeadAttention` (lesson 05), `EncoderLayer` "
        "(lesson 06): the course's `EncoderDecoderTransformer` is built from the course's classes."
    )
    model = printed(nb, MODEL)  # what the banner says: the course's model, of the course's layers and positions
    assert "the course's EncoderDecoderTransformer\n" in model
    assert "the encoder's layers: course_lib.blocks EncoderLayer" in model
    assert "the positions: course_lib.position PositionEncoding" in model
    assert "mean loss of the last" in printed(nb, TRAIN)
    assert _errors(nb, but=check) == []  # the rest ran


def test_the_lesson_builds_its_models_from_the_class_it_chose():
    cells = [c.source for c in read(source_path(LESSON)).cells if c.cell_type == "code"]
    assert any(
        IMPORTS in c and "EncoderLayer = yours.EncoderLayer" in c and "PositionEncoding = yours." in c for c in cells
    )
    assert any(CHOICE in c and "Model = trained.EncoderDecoderTransformer" in c for c in cells)
    assert any(MODEL in c for c in cells)
    assert any("default_init = Model(config)" in c for c in cells)
    assert any("buggy = Model(config, decoder_layer=SwappedDecoderLayer)" in c for c in cells)
    # Only the paper's base model, a count of parameters, is built from the course's class by name.
    built = [c for c in cells if "ref.EncoderDecoderTransformer(" in c]
    assert len(built) == 1 and "paper_base()" in built[0], built
