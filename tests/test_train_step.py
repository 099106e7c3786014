"""course_lib.train.training_step (lesson 11's exercise, and the loop's step), against steps written here by hand."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

from course_lib.train import train, training_step
from tests.train_helpers import VOCAB, config, make_shards, tiny_model, train_losses

LR = 0.1


def _batches(seed: int, n: int, rows: int = 2, T: int = 16) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [tuple(torch.randint(VOCAB, (rows, T), generator=g) for _ in "xy") for _ in range(n)]  # (rows, T) each


def _by_hand(model: torch.nn.Module, micro_batches, clip_norm: float) -> tuple[float, float]:
    """One SGD step on the whole batch at once, clipped by hand: (the loss, the gradient norm before clipping)."""
    x = torch.cat([x for x, _ in micro_batches])  # equal micro-batches: the big batch's mean is the means' mean
    y = torch.cat([y for _, y in micro_batches])
    for p in model.parameters():
        p.grad = None
    _, loss = model(x, y)
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in params))
    factor = min(1.0, clip_norm / (norm + 1e-6))
    with torch.no_grad():
        for p in params:
            p -= LR * factor * p.grad
    return loss.item(), norm


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=LR)


def _close_weights(a: torch.nn.Module, b: torch.nn.Module, atol=1e-6) -> bool:
    return all(torch.allclose(p, q, atol=atol, rtol=1e-5) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("n_micro", [1, 2, 4])
@pytest.mark.parametrize("clip_norm", [0.05, 1e6])  # clipping active, and too large to act
def test_accumulated_micro_batches_make_the_big_batchs_clipped_step(n_micro, clip_norm):
    model, mine = tiny_model(kind="gpt2"), tiny_model(kind="gpt2")
    batches = _batches(0, n_micro)
    stats = {}
    loss = training_step(model, batches, _sgd(model), clip_norm=clip_norm, stats=stats)
    expected_loss, norm = _by_hand(mine, batches, clip_norm)
    assert isinstance(loss, float) and loss == pytest.approx(expected_loss, rel=1e-5)
    assert stats["grad_norm"].item() == pytest.approx(norm, rel=1e-4)
    assert (norm > clip_norm) == (clip_norm < 1)  # the cases are what their comment says
    assert _close_weights(model, mine)


def test_the_gradients_are_cleared_once_before_the_first_micro_batch():
    model, mine = tiny_model(kind="gpt2"), tiny_model(kind="gpt2")
    for p in model.parameters():  # what an earlier step left behind
        p.grad = torch.full_like(p, 5.0)
    batches = _batches(1, 3)
    training_step(model, batches, _sgd(model), clip_norm=1e6)
    _by_hand(mine, batches, 1e6)
    assert _close_weights(model, mine)


def test_the_returned_loss_is_the_mean_of_the_micro_batches_losses():
    model = tiny_model(kind="gpt2")
    batches = _batches(2, 3)
    with torch.no_grad():
        losses = [model(x, y)[1].item() for x, y in batches]
    assert training_step(model, batches, _sgd(model)) == pytest.approx(sum(losses) / 3, rel=1e-6)


def test_a_power_of_two_loss_scale_changes_nothing():
    """GradScaler multiplies the loss by 2**16 and divides the gradients back before clipping: in fp32, with a
    power of two, the step is the unscaled step exactly."""
    model, mine = tiny_model(kind="gpt2"), tiny_model(kind="gpt2")
    batches = _batches(3, 2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    a = training_step(model, batches, _sgd(model), scaler=scaler, clip_norm=0.05)
    b = training_step(mine, batches, _sgd(mine), clip_norm=0.05)
    assert a == b and all(torch.equal(p, q) for p, q in zip(model.parameters(), mine.parameters(), strict=True))
    assert scaler.get_scale() == 2.0**16  # no overflow: the scale stays (it grows after 2,000 good steps)


def test_an_overflowing_scaled_loss_skips_the_step_and_halves_the_scale():
    model = tiny_model(kind="gpt2")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)  # loss ~ ln 32 = 3.5: 3.5 * 2**127 is inf in fp32
    loss = training_step(model, _batches(4, 1), _sgd(model), scaler=scaler)
    assert math.isfinite(loss) and loss > 2  # the loss returned is the true one
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert scaler.get_scale() == 2.0**126


def test_autocast_wraps_each_forward_and_no_sync_all_but_the_last_micro_batch():
    events = []

    @contextlib.contextmanager
    def autocast():
        events.append("autocast")
        yield

    @contextlib.contextmanager
    def no_sync():
        events.append("no_sync")
        yield

    model = tiny_model(kind="gpt2")
    model.register_forward_hook(lambda *_: events.append("forward"))
    training_step(model, _batches(5, 3), _sgd(model), autocast=autocast, no_sync=no_sync)
    assert events == ["no_sync", "autocast", "forward", "no_sync", "autocast", "forward", "autocast", "forward"]


def test_no_micro_batches_is_an_error():
    model = tiny_model(kind="gpt2")
    with pytest.raises(ValueError, match="`micro_batches` is empty"):
        training_step(model, [], _sgd(model))


# ------------------------------------------------------------------------------------------------------------
# The loop runs on a training_step given to it (lesson 11 runs it on the learner's)
# ------------------------------------------------------------------------------------------------------------


def _another_step(model, micro_batches, optimizer, scaler=None, autocast=contextlib.nullcontext, clip_norm=1.0):
    """The contract written again, with an .item() per micro-batch (allowed: only the result must be the mean)."""
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for x, y in micro_batches:
        with autocast():
            _, loss = model(x, y)
        share = loss / len(micro_batches)
        total += share.item()
        share.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return total


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"))


def test_the_loop_runs_on_a_step_it_is_given(shards):
    settings = config(shards, micro_batch_size=2, total_batch_tokens=4 * 16, max_steps=5, grad_clip=0.5)
    ours = train(tiny_model(), settings)
    theirs = train(tiny_model(), settings, step_fn=_another_step)
    assert train_losses(theirs) == pytest.approx(train_losses(ours), rel=1e-5)
    assert all(r["grad_norm"] is None for r in theirs if r["kind"] == "train")  # only the course's step reports it
    assert all(r["grad_norm"] > 0 for r in ours if r["kind"] == "train")
