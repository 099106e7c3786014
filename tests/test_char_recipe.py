"""Tests of the CPU-recipe benchmark's training loop (tests/benchmarks/char_recipe.py): nanoGPT's schedule written
out independently, batches drawn as lesson 09's get_batch draws them, AdamW's decay groups, and small real training
runs on Tiny Shakespeare (the loss falls, one seed gives one history, the stopping rules hold)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from course_lib.data import data_path
from course_lib.ladder import eval_batches
from tests.benchmarks import char_recipe as ct
from tests.char_gpt import CharGPT


@pytest.fixture(scope="module")
def shakespeare() -> tuple[torch.Tensor, torch.Tensor, int]:
    text = data_path("tinyshakespeare.txt").read_text(encoding="utf-8")
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n = int(0.9 * len(ids))  # nanoGPT's shakespeare_char split: the first 90% trains
    return ids[:n], ids[n:], len(chars)


def _tiny_model(vocab: int, block: int = 32, seed: int = 0) -> CharGPT:
    torch.manual_seed(seed)
    return CharGPT(vocab, block, d_model=32, n_layers=1, n_heads=2, dropout=0.0, use_sdpa=True)


TINY = ct.CharTrainConfig(
    batch_size=8, block_size=32, lr=3e-3, min_lr=3e-4, warmup_iters=5, lr_decay_iters=60, max_iters=60,
    eval_interval=20, eval_iters=8, num_threads=1,
)  # fmt: skip


# ---------------------------------------------------------------------------------------------- schedule


def _nanogpt_lr(it, lr=1e-3, min_lr=1e-4, warmup=100, decay=2000):
    """nanoGPT train.py get_lr, restated from its description (linear warm-up over warmup+1, cosine, floor)."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * (it - warmup) / (decay - warmup))) / 2


@pytest.mark.parametrize("step", [0, 1, 50, 99, 100, 101, 1000, 1050, 1999, 2000, 2001, 5000])
def test_lr_at_is_nanogpts_schedule(step):
    assert ct.lr_at(ct.NANOGPT_CPU, step) == pytest.approx(_nanogpt_lr(step), rel=1e-12)


def test_lr_schedule_landmarks():
    config = ct.NANOGPT_CPU
    assert ct.lr_at(config, 99) == pytest.approx(1e-3 * 100 / 101)
    assert ct.lr_at(config, 100) == pytest.approx(1e-3)  # the peak, at the end of the warm-up
    assert ct.lr_at(config, 1050) == pytest.approx((1e-3 + 1e-4) / 2)  # half-way down the cosine
    assert ct.lr_at(config, 2000) == pytest.approx(1e-4)


def test_nanogpt_preset_matches_its_readme_and_config():
    c = ct.NANOGPT_CPU
    got = (c.batch_size, c.block_size, c.lr, c.min_lr, c.warmup_iters, c.lr_decay_iters, c.max_iters)
    assert got == (12, 64, 1e-3, 1e-4, 100, 2000, 2000)
    assert (c.betas, c.weight_decay, c.grad_clip) == ((0.9, 0.99), 0.1, 1.0)


def test_fast_cpu_preset_builds_a_char_gpt_at_nanogpts_size():
    model = CharGPT(65, ct.FAST_CPU.block_size, **ct.FAST_CPU_MODEL)
    same_size = CharGPT(65, 64, d_model=128, n_layers=4, n_heads=4)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in same_size.parameters())
    assert all(block.attn.use_sdpa for block in model.blocks)
    assert ct.FAST_CPU.lr_decay_iters <= ct.FAST_CPU.max_iters


def test_recipes_never_pin_the_thread_count(shakespeare):
    """The presets leave torch's threads alone; a benchmark that pins them gets its count back afterwards."""
    assert ct.FAST_CPU.num_threads is None and ct.NANOGPT_CPU.num_threads is None
    train, _, vocab = shakespeare
    before = torch.get_num_threads()
    seen = []
    config = TINY.replace(max_iters=2, num_threads=None)
    ct.train_char_model(_tiny_model(vocab), train, config, callback=lambda e: seen.append(torch.get_num_threads()))
    assert seen == [before, before]
    pinned = []
    ct.train_char_model(
        _tiny_model(vocab),
        train,
        config.replace(num_threads=1),
        callback=lambda e: pinned.append(torch.get_num_threads()),
    )
    assert pinned == [1, 1] and torch.get_num_threads() == before


# ---------------------------------------------------------------------------------------------- batches


def test_batches_are_lesson_09s_get_batch(shakespeare):
    train, _, _ = shakespeare
    generator = torch.Generator().manual_seed(7)
    x, y = ct._get_batch(train, 16, 5, generator)
    ix = torch.randint(len(train) - 16, (5,), generator=torch.Generator().manual_seed(7))
    assert torch.equal(x, torch.stack([train[i : i + 16] for i in ix.tolist()]))
    assert torch.equal(y, torch.stack([train[i + 1 : i + 17] for i in ix.tolist()]))


def test_weight_decay_skips_biases_and_norms():
    model = _tiny_model(10)
    groups = ct._optimizer(model, ct.NANOGPT_CPU).param_groups
    assert groups[0]["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in groups[0]["params"])
    assert groups[1]["weight_decay"] == 0.0 and all(p.dim() == 1 for p in groups[1]["params"])
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


# ---------------------------------------------------------------------------------------------- real runs


def test_loss_falls_and_history_is_complete(shakespeare):
    train, val, vocab = shakespeare
    events = []
    history = ct.train_char_model(_tiny_model(vocab), train, TINY, val_data=val, callback=events.append)
    assert history.val_loss[0] == pytest.approx(ct.estimate_loss(_tiny_model(vocab), *eval_batches(val, 32, 64)))
    assert history.stop_reason == "max_iters"
    assert history.steps == list(range(1, 61))
    assert history.eval_steps == [0, 20, 40, 60]
    assert history.val_loss[-1] < history.val_loss[0] - 0.5  # from ~ln(65) = 4.17 down by far more than noise
    assert sum(history.train_loss[-10:]) / 10 < sum(history.train_loss[:10]) / 10 - 0.5
    assert history.tokens == 60 * 8 * 32
    assert all(b > a for a, b in zip(history.train_s, history.train_s[1:], strict=False))
    assert history.wall_s >= history.train_s[-1]
    assert [e.kind for e in events].count("step") == 60 and [e.kind for e in events].count("eval") == 4
    assert history.lr == [ct.lr_at(TINY, s) for s in range(60)]


def test_first_eval_skips_early_evaluations_without_changing_training(shakespeare):
    train, val, vocab = shakespeare
    config = TINY.replace(max_iters=20, eval_interval=4)
    late = ct.train_char_model(_tiny_model(vocab), train, config.replace(first_eval=10), val_data=val)
    every = ct.train_char_model(_tiny_model(vocab), train, config, val_data=val)
    assert late.eval_steps == [10, 14, 18, 20]
    assert every.eval_steps == [0, 4, 8, 12, 16, 20]
    assert late.train_loss == every.train_loss  # evaluating draws no training batch and changes no weight
    assert late.val_loss[-1] == every.val_loss[-1]


def test_same_seed_same_losses(shakespeare):
    train, val, vocab = shakespeare
    config = TINY.replace(max_iters=15, eval_interval=5)
    runs = [ct.train_char_model(_tiny_model(vocab), train, config, val_data=val) for _ in range(2)]
    assert runs[0].train_loss == runs[1].train_loss
    assert runs[0].val_loss == runs[1].val_loss
    other = ct.train_char_model(_tiny_model(vocab), train, config.replace(seed=2), val_data=val)
    assert other.train_loss != runs[0].train_loss  # the seed draws the batches


def test_time_budget_is_honoured(shakespeare):
    train, val, vocab = shakespeare
    config = TINY.replace(max_iters=100_000, eval_interval=10_000, time_budget_s=1.5)
    history = ct.train_char_model(_tiny_model(vocab), train, config, val_data=val)
    assert history.stop_reason == "time_budget"
    assert history.wall_s >= 1.5
    # Over by at most the last step and the final evaluation, measured on the run's own clocks: the check before the
    # last step saw less than 1.5 s, so this holds however slow the machine (one step or thousands).
    step_s = max(b - a for a, b in itertools.pairwise([0.0, *history.train_s]))
    assert history.wall_s < 1.5 + step_s + (history.wall_s - history.train_s[-1])


def test_target_stops_at_first_evaluation_below_it(shakespeare):
    train, val, vocab = shakespeare
    full = ct.train_char_model(_tiny_model(vocab), train, TINY.replace(eval_interval=5), val_data=val)
    target = full.val_loss[len(full.val_loss) // 2]  # a loss the run passed half-way
    first = next(i for i, v in enumerate(full.val_loss) if v <= target)
    stopped = ct.train_char_model(
        _tiny_model(vocab), train, TINY.replace(eval_interval=5, target_val_loss=target), val_data=val
    )
    assert stopped.stop_reason == "target"
    assert stopped.eval_steps[-1] == full.eval_steps[first]
    assert stopped.val_loss == full.val_loss[: first + 1]
    assert stopped.time_to(target) == stopped.eval_train_s[-1]
    assert full.time_to(0.01) is None


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"lr": -1e-3}, "lr"),
        ({"min_lr": 1.0}, "min_lr"),
        ({"warmup_iters": 2000}, "warmup_iters"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"grad_clip": -1}, "grad_clip"),
        ({"time_budget_s": 0}, "time_budget_s"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"num_threads": 0}, "num_threads"),
    ],
)
def test_bad_config_is_a_clear_value_error(changes, message):
    with pytest.raises(ValueError, match=message):
        ct.NANOGPT_CPU.replace(**changes)


def test_bad_data_is_a_clear_error(shakespeare):
    train, _, vocab = shakespeare
    with pytest.raises(ValueError, match="train_data.*block_size=32"):
        ct.train_char_model(_tiny_model(vocab), train[:32], TINY)
    with pytest.raises(ValueError, match="target_val_loss.*val_data"):
        ct.train_char_model(_tiny_model(vocab), train, TINY.replace(target_val_loss=1.0))
    with pytest.raises((TypeError, ValueError), match="train_data"):
        ct.train_char_model(_tiny_model(vocab), train.float(), TINY)
