"""Lesson 08's model (course_lib.statquest_model): its forward pass against the tensor-only one, causality,
generation, Lightning against a plain loop, and the seed table."""

from __future__ import annotations

import logging
import os
import time

import pytest
import torch

from course_lib import statquest as sq
from course_lib import statquest_model as toy


def test_model_shapes_and_forward_equal_the_tensor_version():
    torch.manual_seed(1)
    model = toy.DecoderOnlyTransformer()
    inputs, _ = sq.statquest_dataset()
    logits, weights = model(inputs, need_weights=True)
    assert logits.shape == (2, 5, 5) and weights.shape == (2, 5, 5)
    assert sum(p.numel() for p in model.parameters()) == 37
    torch.testing.assert_close(sq.decoder_only_forward(model.state_dict(), inputs), logits)


def test_model_is_causal():
    torch.manual_seed(2)
    model = toy.DecoderOnlyTransformer()
    a = torch.tensor([[0, 1, 2, 4, 3]])
    b = torch.tensor([[0, 1, 2, 0, 0]])
    torch.testing.assert_close(model(a)[:, :3], model(b)[:, :3])


def test_greedy_generate_returns_ints_and_stops_at_eos():
    model = toy.train_plain(seed=0)
    params = model.state_dict()
    for prompt in sq.PROMPTS:
        out = sq.greedy_generate(params, sq.encode(prompt), sq.EOS_ID, 3)
        assert out == [3, 4] and all(type(i) is int for i in out)
    # without <EOS> as a stop, it writes its whole budget
    assert len(sq.greedy_generate(params, sq.encode(sq.PROMPTS[0]), 99, 2)) == 2
    with pytest.raises(ValueError, match="max_new_tokens"):
        sq.greedy_generate(params, [0], sq.EOS_ID, 0)


def test_lightning_and_the_plain_loop_give_the_same_weights(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    lit = toy.train_lightning(seed=7, progress_bar=False)
    plain = toy.train_plain(seed=7)
    assert list(tmp_path.iterdir()) == []  # no checkpoints, no lightning_logs
    assert torch.are_deterministic_algorithms_enabled() == deterministic_before
    assert lit.loss_history == plain.loss_history and len(lit.loss_history) == 60
    for name, value in lit.state_dict().items():
        assert torch.equal(value, plain.state_dict()[name]), name


def test_training_is_reproducible():
    a, b = toy.train_plain(seed=3), toy.train_plain(seed=3)
    assert a.loss_history == b.loss_history


def test_every_seed_of_the_table_answers_awesome_eos():
    """The lesson's seed table: seeds 0..29, the tutorial's recipe (Adam 0.1, 30 epochs, batch 1), plain loop."""
    assert tuple(range(30)) == toy.SEEDS
    start = time.perf_counter()
    rows = toy.seed_table(toy.SEEDS)
    print(f"\nseed table: {len(rows)} seeds trained in {time.perf_counter() - start:.1f} s (pid {os.getpid()})")
    wrong = [r for r in rows if r["what is statquest"] != "awesome <EOS>" or r["statquest is what"] != "awesome <EOS>"]
    assert wrong == []


class _Collect(logging.Handler):
    """Keeps the messages Lightning logs (a filter on the logger drops a record before any handler sees it)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _lightning_messages(run) -> list[str]:
    collect = _Collect()
    loggers = [logging.getLogger(name) for name in toy._LIGHTNING_LOGGERS]
    for logger in loggers:
        logger.addHandler(collect)
    try:
        run()
    finally:
        for logger in loggers:
            logger.removeHandler(collect)
    return collect.messages


def test_the_filter_drops_lightnings_advertising_tips_and_nothing_else():
    tip = "💡 Tip: For seamless cloud uploads and versioning, try installing [litmodels](https://pypi.org/project/litmodels/)"
    logger = logging.getLogger(toy._LIGHTNING_LOGGERS[0])

    def log_three() -> None:
        with toy._without_advertisements():
            logger.info(tip)
            logger.info("GPU available: False, used: False")
            logger.warning("a real warning")

    assert _lightning_messages(log_three) == ["GPU available: False, used: False", "a real warning"]
    assert _lightning_messages(lambda: logger.info(tip)) == [tip]  # outside the context nothing is filtered


def test_training_with_lightning_shows_no_tip():
    # Lightning 2.6 logs "💡 Tip: For seamless cloud logging ... try installing litlogger" under every Trainer
    # without a LitLogger (the lesson's has no logger at all).
    shown = _lightning_messages(lambda: toy.train_lightning(seed=1, epochs=1, progress_bar=False))
    assert not [m for m in shown if m.startswith(toy.ADVERTISEMENT) or "litmodels" in m or "litlogger" in m]
    assert any(m.startswith("GPU available") for m in shown)  # Lightning's other messages still pass
    assert all(not logging.getLogger(name).filters for name in toy._LIGHTNING_LOGGERS)  # the filter is removed
