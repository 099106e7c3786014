"""What lesson 11's diagrams say (course_lib.diagrams.training), checked against the code they picture: the
step's signature and order, the checkpoint's pieces as the loop saves them, and how the file is written and read."""

from __future__ import annotations

import inspect

from matplotlib.text import Text

from course_lib import checkpoint
from course_lib.diagrams import DIAGRAMS, training
from course_lib.train import train, training_step
from tests.train_helpers import config, make_shards, tiny_model


def _texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_text())


def test_registered():
    assert {"training_step_data_path", "checkpoint_resume_cycle"} <= set(DIAGRAMS)


def test_the_step_picture_names_the_contracts_arguments_in_order():
    texts = _texts(training.training_step_data_path())
    contract = [p for p in inspect.signature(training_step).parameters.values() if p.kind != p.KEYWORD_ONLY]
    assert f"training_step({', '.join(p.name for p in contract)})" in texts
    order = ["zero_grad once", "forward under autocast()", "loss / n, backward", "scaler.unscale_", "clip_grad_norm_",
             "one optimizer step"]  # fmt: skip
    assert all(label in texts for label in order)
    source = inspect.getsource(training_step).split('"""')[2]  # the code, after the docstring
    calls = ["zero_grad(", "autocast()", "/ len(micro_batches)", ".backward()", "unscale_(", "clip_grad_norm_(",
             "scaler.step("]  # fmt: skip
    positions = [source.index(call) for call in calls]
    assert positions == sorted(positions)  # the reference does it in the order drawn


def test_the_checkpoint_picture_lists_what_the_loop_saves(tmp_path):
    texts = _texts(training.checkpoint_resume_cycle())
    flat = " ".join(texts.split())
    assert all(piece in flat for piece in training.CHECKPOINT_PIECES)
    shards = make_shards(tmp_path / "shards")
    path = tmp_path / "ck.pt"
    train(tiny_model(), config(shards, max_steps=3, checkpoint_path=str(path)))
    saved = checkpoint.load_checkpoint(path)
    assert set(training.CHECKPOINT_PIECES.values()) <= set(saved)
    assert set(saved) - set(training.CHECKPOINT_PIECES.values()) == {"format", "config", "world_size"}


def test_the_checkpoint_picture_says_how_the_file_is_written_and_read():
    texts = _texts(training.checkpoint_resume_cycle())
    assert "os.replace(tmp, path)" in texts and "os.fsync" in texts and "weights_only=True" in texts
    save, load = inspect.getsource(checkpoint.save_checkpoint), inspect.getsource(checkpoint.load_checkpoint)
    assert "os.replace(tmp, path)" in save and "os.fsync(" in save and "weights_only=True" in load
    assert "resume=True" in texts and "resume" in inspect.signature(train).parameters
