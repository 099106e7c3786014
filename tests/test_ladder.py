"""Tests of course_lib.ladder (Lesson 12): the rungs, the schedule, and both measurements of a run, with the clock
replaced by a counter so that the equal-seconds bookkeeping is checked without depending on this machine's speed."""

from __future__ import annotations

import dataclasses
import itertools

import matplotlib
import pytest
import torch
import torch.nn.functional as F

from course_lib import char_lm, ladder
from course_lib.gpt import init_gpt2
from course_lib.ladder import eval_batches
from course_lib.modern_gpt import ModernConfig, ModernGPT

matplotlib.use("Agg")

V, T = 7, 8
TINY = ModernConfig(V, T, d_model=8, n_heads=2, n_layers=1)
SETTINGS = ladder.LadderSettings(steps=6, batch_size=2, warmup_steps=2, eval_windows=4, eval_points=2, seeds=(0,))


def _data(n: int = 400, seed: int = 0) -> torch.Tensor:
    return torch.randint(V, (n,), generator=torch.Generator().manual_seed(seed))


class _Clock:
    """time.perf_counter stand-in: every step of rung k takes `seconds[k]` (one call starts a step, one ends it)."""

    def __init__(self, seconds: float):
        self.now, self.seconds, self.calls = 0.0, seconds, itertools.count()

    def __call__(self) -> float:
        if next(self.calls) % 2:  # the call that ends a step
            self.now += self.seconds
        return self.now


def _fake_time(monkeypatch, seconds: float) -> None:
    monkeypatch.setattr(ladder.time, "perf_counter", _Clock(seconds))


def test_eval_batches_are_lesson_09s_windows_fixed_by_their_seed():
    data = _data()
    a, b, c = (eval_batches(data, 6, 40, seed=s) for s in (3, 3, 4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    assert a[0].shape == (40, 6) and torch.equal(a[0][:, 1:], a[1][:, :-1])  # y is x shifted by one
    ix = torch.randint(len(data) - 6, (40,), generator=torch.Generator().manual_seed(3))  # get_batch's draws
    assert torch.equal(a[0], torch.stack([data[i : i + 6] for i in ix.tolist()]))
    assert torch.equal(a[0], char_lm.get_batch(data, 6, 40, torch.Generator().manual_seed(3))[0])


def test_estimate_loss_is_the_mean_cross_entropy_and_restores_the_mode():
    torch.manual_seed(0)
    model = init_gpt2(ModernGPT(TINY))
    x, y = eval_batches(_data(seed=2), T, 50)
    model.train()
    got = ladder.estimate_loss(model, x, y, chunk=7)  # chunks that do not divide 50
    with torch.no_grad():
        model.eval()
        expected = F.cross_entropy(model(x)[0].flatten(0, 1), y.flatten()).item()
    assert got == pytest.approx(expected, rel=1e-5)
    model.train()
    ladder.estimate_loss(model, x, y)
    assert model.training


def test_the_ladder_adds_one_change_per_rung():
    rungs = ladder.modern_ladder(TINY)
    assert [r.label for r in rungs] == [
        "GPT-2", "+ RMSNorm", "+ RoPE", "+ SwiGLU", "+ GQA", "+ no biases", "+ QK-norm", "+ Muon",
    ]  # fmt: skip
    assert rungs[0].config == TINY
    for before, after in itertools.pairwise(rungs):
        changed = [f.name for f in dataclasses.fields(ModernConfig) if getattr(before.config, f.name) !=
                   getattr(after.config, f.name)]  # fmt: skip
        assert len(changed) + (before.optimizer != after.optimizer) == 1, (after.label, changed)
    assert rungs[-1].optimizer == "muon" and rungs[4].config.n_kv_heads == 1  # two query heads share one KV head


def test_the_schedule_warms_up_then_falls_like_one_over_root_step():
    assert [ladder.lr_factor(s, 4) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert ladder.lr_factor(15, 4) == pytest.approx(0.5)  # sqrt(4 / 16)
    assert ladder.lr_factor(399, 4) == pytest.approx(0.1)
    assert ladder.lr_factor(5, 0) == pytest.approx(1 / 6**0.5)


def test_a_run_is_reproducible_and_measured_after_its_steps(monkeypatch):
    _fake_time(monkeypatch, 0.5)
    windows = eval_batches(_data(seed=1), T, 4)
    rung = ladder.Rung("GPT-2", TINY)
    first = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS, seed=0)
    again = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS, seed=0)
    assert first.val_loss == again.val_loss and [s for s, _ in first.curve] == [3, 6]
    assert first.train_s == pytest.approx(3.0)  # 6 steps of 0.5 s; the evaluations are not counted
    assert (first.seconds_steps, first.seconds_val_loss) == (6, first.val_loss)  # no budget: its own time


@pytest.mark.parametrize(("seconds", "expected_steps"), [(0.5, 6), (1.0, 3), (0.75, 4), (0.25, 12), (0.1, 12)])
def test_equal_seconds_counts_the_steps_that_fit_in_the_budget(monkeypatch, seconds, expected_steps):
    """Budget 3 s: a rung at 1 s a step fits 3; at 0.75 s, 4; at 0.25 s it trains on to 12, where it stops (2 x
    steps) however much time is left."""
    _fake_time(monkeypatch, seconds)
    windows = eval_batches(_data(seed=1), T, 4)
    rung = ladder.Rung("+ RMSNorm", TINY.replace(norm="rms"))
    result = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS, budget_s=3.0)
    assert result.seconds_steps == expected_steps
    assert result.seconds_train_s == pytest.approx(expected_steps * seconds)
    assert result.steps == 6 and result.train_s == pytest.approx(6 * seconds)
    if expected_steps == 6:
        assert result.seconds_val_loss == result.val_loss


def test_run_ladder_builds_the_first_rung_with_the_baseline_and_budgets_the_rest(monkeypatch):
    _fake_time(monkeypatch, 0.5)
    built = []

    def baseline():
        built.append(torch.initial_seed())
        return ladder.build_rung(ladder.Rung("x", TINY), torch.initial_seed())

    rungs = ladder.modern_ladder(TINY)[:3]
    heard = []
    settings = dataclasses.replace(SETTINGS, seeds=(0, 5))
    results = ladder.run_ladder(rungs, _data(), _data(seed=1), settings, baseline=baseline, progress=heard.append)
    assert built == [0, 5] and [r.label for r in heard] == ["GPT-2", "+ RMSNorm", "+ RoPE"]
    assert all([run.seed for run in r.runs] == [0, 5] for r in results)
    assert all(r.seconds_steps == 6 for r in results)  # every step 0.5 s: everyone fits GPT-2's 6 steps
    assert results[2].n_params < results[1].n_params  # the position table is gone
    first = results[0]
    assert first.val_loss == pytest.approx((first.runs[0].val_loss + first.runs[1].val_loss) / 2)
    assert first.spread == pytest.approx(abs(first.runs[0].val_loss - first.runs[1].val_loss))
    assert first.runs[0].val_loss != first.runs[1].val_loss  # another seed, other weights and batches
    table = ladder.ladder_table(results)
    assert all(r.label in table for r in results) and "equal seconds" in table and "seed 5" in table
    assert f"largest difference between the seeds of one rung: {max(r.spread for r in results):.3f}" in table
    fig, axes = ladder.ladder_chart(results, "tiny")
    assert len(axes) == 2 and [t.get_text() for t in axes[1].get_yticklabels()] == [r.label for r in results]
    assert axes[0].get_ylabel() == "validation loss (nats per character)"
    assert ladder.ladder_chart(results, unit="token")[1][0].get_ylabel() == "validation loss (nats per token)"


def test_the_first_rung_is_the_baseline_and_the_same_model_without_it():
    """Seeded the same, lesson 09's GPT with GPT-2's initialisation and ModernGPT with GPT-2's switches are one
    model, so the first rung's result does not depend on which of the two is built."""
    from course_lib import gpt

    windows = eval_batches(_data(seed=1), T, 4)
    rung = ladder.Rung("GPT-2", TINY)
    theirs = ladder.build_rung(rung, 0, lambda: gpt.init_gpt2(gpt.GPT(V, T, 8, 2, 1), 1))
    ours = ladder.build_rung(rung, 0)
    a = ladder.train_rung(theirs, rung, _data(), windows, SETTINGS, seed=0)
    b = ladder.train_rung(ours, rung, _data(), windows, SETTINGS, seed=0)
    assert a.val_loss == pytest.approx(b.val_loss, abs=1e-6)


def test_settings_refuse_a_warmup_as_long_as_the_run():
    with pytest.raises(ValueError, match="warmup_steps"):
        ladder.LadderSettings(steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="optimizer"):
        ladder.Rung("x", TINY, optimizer="sgd")
    with pytest.raises(ValueError, match="seeds"):
        ladder.LadderSettings(seeds=(1, 1))
    with pytest.raises(ValueError, match="seconds_cap"):
        ladder.LadderSettings(seconds_cap=0.5)


@pytest.mark.parametrize(("cap", "seconds", "expected_steps"), [(1.0, 0.25, 6), (1.0, 1.0, 3), (1.5, 0.25, 9)])
def test_the_seconds_cap_bounds_how_far_a_faster_rung_trains_on(monkeypatch, cap, seconds, expected_steps):
    """Budget 3 s, 6 steps: with a cap of 1 a faster rung stops at 6 (a slower one still stops where its time runs
    out); with 1.5, at 9."""
    _fake_time(monkeypatch, seconds)
    windows = eval_batches(_data(seed=1), T, 4)
    rung = ladder.Rung("+ RMSNorm", TINY.replace(norm="rms"))
    settings = dataclasses.replace(SETTINGS, seconds_cap=cap)
    result = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, settings, budget_s=3.0)
    assert result.seconds_steps == expected_steps and result.steps == 6


def test_the_token_ladder_is_gpt2_rope_the_whole_modern_block_and_muon():
    full, rungs = ladder.modern_ladder(TINY), ladder.token_ladder(TINY)
    assert [r.label for r in rungs] == ["GPT-2", "+ RoPE", "modern block", "+ Muon"]
    assert rungs[0] == full[0] and rungs[1] == full[2] and rungs[3] == full[-1]
    assert (rungs[2].config, rungs[2].optimizer) == (full[-2].config, "adamw")  # every change, with AdamW


def test_compact_ids_renumbers_over_the_tokens_that_occur():
    ids = torch.tensor([50256, 11, 464, 11, 50256, 3290])
    compact, kept = ladder.compact_ids(ids)
    assert kept.tolist() == [11, 464, 3290, 50256] and compact.tolist() == [3, 0, 1, 0, 3, 2]
    assert torch.equal(kept[compact], ids) and compact.dtype == torch.long
    with pytest.raises(TypeError, match="`ids` must be an integer tensor"):
        ladder.compact_ids(torch.rand(4))
