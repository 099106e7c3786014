"""Tests of course_lib.ladder (Lesson 12): the rungs, the schedule, both measurements of a run, the paired reading of
the seeds and the bigram floor; the paces come from a scripted clock, so that the equal-seconds bookkeeping is
checked without depending on this machine's speed or load."""

from __future__ import annotations

import dataclasses
import itertools
import math

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


def _scripted_clock(ms: list[float], settings: ladder.LadderSettings, jitter: float = 0.0):
    """A clock for `measure_paces`: in every round rung k's timed steps take ms[k] each (plus `jitter` ms times the
    round's number, which moves every rung alike), in the order measure_paces reads the clock: start, end."""
    readings, now = [], 0.0
    for r in range(settings.pace_rounds):
        for pace in ms:
            readings.append(now)
            now += (pace + jitter * r) * settings.pace_steps / 1000
            readings.append(now)
    calls = iter(readings)
    return lambda: next(calls)


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


def test_a_run_is_reproducible_and_measured_after_its_steps():
    windows = eval_batches(_data(seed=1), T, 4)
    rung = ladder.Rung("GPT-2", TINY)
    first = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS, seed=0)
    again = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS, seed=0)
    assert first.val_loss == again.val_loss and [s for s, _ in first.curve] == [3, 6]
    assert first.val_loss == first.curve[-1][1] and first.seconds_steps is None  # no equal-seconds measurement


@pytest.mark.parametrize("seconds_steps", [4, 9])
def test_the_equal_seconds_point_is_where_a_run_meant_to_stop_there_would_be(seconds_steps):
    """The schedule does not depend on the end: measured after 4 (or 9) steps, a run has the loss of a run of 4 (or
    9) steps; its equal-steps point is untouched."""
    windows = eval_batches(_data(seed=1), T, 4)
    rung = ladder.Rung("+ RMSNorm", TINY.replace(norm="rms"))
    run = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS, seconds_steps=seconds_steps)
    plain = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, SETTINGS)
    short = dataclasses.replace(SETTINGS, steps=seconds_steps, warmup_steps=2)
    alone = ladder.train_rung(ladder.build_rung(rung, 0), rung, _data(), windows, short)
    assert run.val_loss == plain.val_loss and run.curve == plain.curve
    assert (run.seconds_steps, run.seconds_val_loss) == (seconds_steps, alone.val_loss)


def test_a_pace_is_the_median_and_the_middle_half_of_its_rounds():
    pace = ladder.Pace((10.0, 30.0, 12.0, 11.0, 13.0))
    assert (pace.ms, pace.low, pace.high) == (12.0, 11.0, 13.0)  # the outlier of 30 ms moves neither
    assert pace.overlaps(ladder.Pace((12.0, 13.0, 16.0))) and not pace.overlaps(ladder.Pace((14.0, 15.0, 16.0)))
    assert ladder.Pace((7.0,)).low == ladder.Pace((7.0,)).high == 7.0


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        ([10, 10], [6, 6]),
        ([10, 20], [6, 3]),
        ([10, 15], [6, 4]),
        ([10, 4], [6, 12]),  # 15 would fit: the cap stops it at 2 x 6
        ([10, 10.4], [6, 6]),  # within the spread of the rounds: no measurable difference
        ([10, 1000], [6, 1]),
    ],
)
def test_equal_seconds_gives_each_rung_the_steps_that_fit_in_gpt2s_cpu_time(ms, expected):
    paces = [ladder.Pace((m - 0.5, m, m + 0.5)) for m in ms]
    assert ladder.equal_seconds_steps(paces, SETTINGS) == expected


def test_paces_are_timed_in_rounds_that_interleave_the_rungs():
    """Load that grows during the measurement (here every round slower than the one before) falls on every rung
    alike: the medians keep their order and their ratios stay near the true ones."""
    settings = dataclasses.replace(SETTINGS, pace_rounds=5, pace_steps=2)
    rungs = ladder.modern_ladder(TINY)[:3]
    paces = ladder.measure_paces(rungs, _data(), T, settings, clock=_scripted_clock([10, 20, 5], settings, 1.0))
    assert [p.rounds for p in paces] == [
        tuple(pytest.approx(m + r) for r in range(5)) for m in (10, 20, 5)
    ]  # fmt: skip
    assert [p.ms for p in paces] == pytest.approx([12, 22, 7])
    with pytest.raises(ValueError, match="pace_rounds"):
        ladder.measure_paces(rungs, _data(), T, dataclasses.replace(SETTINGS, pace_rounds=0))


def test_paces_are_timed_on_the_threads_asked_for_and_the_thread_count_is_given_back():
    """Timed on `threads` (the benchmarks ask for one: the work of a step, not cores shared with other programs);
    the caller's thread count comes back, also when a step fails."""
    settings = dataclasses.replace(SETTINGS, pace_rounds=2, pace_steps=1, threads=1)
    seen, tick = [], iter(range(1000))
    clock = lambda: (seen.append(torch.get_num_threads()), next(tick))[1]  # noqa: E731
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        paces = ladder.measure_paces(ladder.modern_ladder(TINY)[:2], _data(), T, settings, clock=clock)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2 and paces[0].threads == 1
        with pytest.raises(ValueError, match="block_size"):  # a window longer than the data: the step fails
            ladder.measure_paces(ladder.modern_ladder(TINY)[:1], _data(n=5), T, settings, clock=clock)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_ladder_trains_on_the_threads_it_is_timed_on_and_gives_the_callers_back():
    """run_ladder trains on `threads` too (its equal-seconds budget is then the seconds the training takes); None,
    the default (a lesson never pins threads), leaves the caller's number; either way the caller's number comes
    back."""
    seen = []
    progress = lambda result: seen.append(torch.get_num_threads())  # noqa: E731
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        rungs = ladder.modern_ladder(TINY)[:2]
        ladder.run_ladder(
            rungs, _data(), _data(seed=1), dataclasses.replace(SETTINGS, pace_rounds=1, threads=1), progress=progress
        )
        assert seen == [1, 1] and torch.get_num_threads() == 2
        ladder.run_ladder(rungs[:1], _data(), _data(seed=1), SETTINGS, progress=progress)
        assert seen == [1, 1, 2] and torch.get_num_threads() == 2
        with pytest.raises(ValueError, match="threads"):
            dataclasses.replace(SETTINGS, threads=0)
    finally:
        torch.set_num_threads(before)


def test_run_ladder_builds_the_first_rung_with_the_baseline_and_gives_each_its_steps():
    built = []

    def baseline():
        built.append(torch.initial_seed())
        return ladder.build_rung(ladder.Rung("x", TINY), torch.initial_seed())

    rungs = ladder.modern_ladder(TINY)[:3]
    heard = []
    settings = dataclasses.replace(SETTINGS, seeds=(0, 5), pace_rounds=3, pace_steps=1)
    clock = _scripted_clock([10, 20, 5], settings)
    results = ladder.run_ladder(
        rungs, _data(), _data(seed=1), settings, baseline=baseline, progress=heard.append, clock=clock
    )
    assert built == [0, 0, 5] and [r.label for r in heard] == ["GPT-2", "+ RMSNorm", "+ RoPE"]  # pace, then seeds
    assert all([run.seed for run in r.runs] == [0, 5] for r in results)
    assert [r.seconds_steps for r in results] == [6, 3, 12] and results[1].pace.ms == pytest.approx(20)
    assert results[2].n_params < results[1].n_params  # the position table is gone
    first = results[0]
    assert first.val_loss == pytest.approx((first.runs[0].val_loss + first.runs[1].val_loss) / 2)
    assert first.seconds_val_loss == first.val_loss  # its own budget: its own steps
    assert first.runs[0].val_loss != first.runs[1].val_loss  # another seed, other weights and batches
    paired = ladder.Paired.of(results[2], results[1])
    assert paired.differences == tuple(
        a.val_loss - b.val_loss for a, b in zip(results[2].runs, results[1].runs, strict=True)
    )
    assert paired.lower == sum(d < 0 for d in paired.differences) and paired.n == 2
    table = ladder.ladder_table(results, floor=3.5)
    assert all(r.label in table for r in results) and "equal CPU seconds" in table and "seed 5" in table
    assert f"{paired.mean:+.3f} {f'{paired.lower} of 2':>8}" in table
    assert "the mean over the 2 seeds" in table and "one seed" not in table
    assert f"GPT-2's mean minus the floor: {first.val_loss - 3.5:+.3f}" in table
    fig, axes = ladder.ladder_chart(results, "tiny", floor=3.5)
    assert len(axes) == 2 and [t.get_text() for t in axes[1].get_yticklabels()] == [r.label for r in results]
    assert axes[0].get_ylabel() == "validation loss (nats per character)"
    assert "bigram floor 3.500" in [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert ladder.ladder_chart(results, unit="token")[1][0].get_ylabel() == "validation loss (nats per token)"


def test_one_seed_says_one_seed_and_no_paces_means_equal_steps_only():
    settings = dataclasses.replace(SETTINGS, pace_rounds=0)
    results = ladder.run_ladder(ladder.modern_ladder(TINY)[:2], _data(), _data(seed=1), settings)
    table = ladder.ladder_table(results)
    assert "one seed (0)" in table and "lower in" in table and " of 1" not in table
    assert "equal CPU seconds" not in table and results[1].pace is None and results[1].seconds_steps is None
    assert "bigram floor" not in table
    assert [b.get_label() for b in ladder.ladder_chart(results)[1][1].containers] == ["equal steps"]


def test_paired_refuses_runs_of_other_seeds():
    a = ladder.RungResult("a", 1, [ladder.Run(0, 6, 2.0), ladder.Run(1, 6, 2.5)])
    b = ladder.RungResult("b", 1, [ladder.Run(1, 6, 2.2), ladder.Run(0, 6, 2.1)])
    with pytest.raises(ValueError, match="same seeds"):
        ladder.Paired.of(a, b)
    c = ladder.RungResult("c", 1, [ladder.Run(0, 6, 1.9), ladder.Run(1, 6, 2.6)])
    assert ladder.Paired.of(c, a).differences == pytest.approx((-0.1, 0.1)) and ladder.Paired.of(c, a).lower == 1


def test_the_bigram_floor_is_the_add_one_table_counted_by_hand():
    train = torch.tensor([0, 1, 0, 1, 1, 2, 0])
    x, y = torch.tensor([[0, 1], [1, 2]]), torch.tensor([[1, 1], [2, 0]])
    # pairs counted: (0,1) x2, (1,0), (1,1), (1,2), (2,0); add one to all nine cells of the 3 x 3 table
    p = {(0, 1): 3 / 5, (1, 1): 2 / 6, (1, 2): 2 / 6, (2, 0): 2 / 4}
    expected = -sum(math.log(p[a, b]) for a, b in [(0, 1), (1, 1), (1, 2), (2, 0)]) / 4
    assert ladder.bigram_floor(train, x, y, 3) == pytest.approx(expected)


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
    with pytest.raises(ValueError, match="pace_rounds"):
        ladder.LadderSettings(pace_rounds=-1)


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
