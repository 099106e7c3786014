"""The benchmark scripts' own logic, on the CPU: the clock read from nanoGPT's log, the GPU benchmark's code path
with its peers at toy size, and gpu_check's two runs of lesson 11 (the second continues from the first's
checkpoint). They measure nothing here; they check that the scripts compute what their docstrings say."""

from __future__ import annotations

import argparse
import json
import math
import os
import textwrap

import pytest

from course_lib import ladder
from course_lib.modern_gpt import ModernConfig, ModernGPT
from tests.benchmarks import bench_char_recipe, bench_ladder_gpu, bench_train_gpu, gpu_check

# ------------------------------------------------------------------------------------------------------------
# bench_char_recipe: nanoGPT's clock
# ------------------------------------------------------------------------------------------------------------


def _nanogpt_log(max_iters: int, eval_interval: int, eval_s: float = 2.0, dt_ms: float = 100.0) -> list:
    """nanoGPT's stdout as train.py prints it, each line with an arrival time: an evaluation before each
    eval_interval-th step (taking eval_s), then a step of dt_ms whose logged time includes that evaluation."""
    lines, now = [(0.0, "using fused AdamW: False")], 0.0
    for k in range(max_iters + 1):
        dt = dt_ms / 1000
        if k % eval_interval == 0:
            now += eval_s
            lines.append((now, f"step {k}: train loss 2.0000, val loss {2.5 - k / 1000:.4f}"))
            dt += eval_s
            if k:
                lines.append((now, "saving checkpoint to out"))
        now += dt_ms / 1000
        lines.append((now, f"iter {k}: loss 2.1000, time {dt * 1000:.2f}ms, mfu -100.00%"))
    return lines


def test_nanogpts_clock_is_its_logged_iteration_times_less_its_evaluations():
    result = bench_char_recipe.parse_nanogpt_log(_nanogpt_log(1000, 250), 1000, target=2.0)
    # iterations 0..999: 1,000 steps of 0.1 s; the evaluations at 0, 250, 500 and 750 (2 s each) are taken out
    assert result["steps"] == 1000
    assert result["loop_s"] == pytest.approx(1000 * 0.1 + 4 * 2.0)
    assert result["evals_s"] == pytest.approx(4 * 2.0)
    assert result["train_s"] == pytest.approx(100.0)
    assert result["val"] == pytest.approx(1.5)  # the evaluation at step max_iters, after 1,000 steps
    assert result["first_at_target"] == 500  # val 2.0 at step 500


def test_a_nanogpt_log_that_stops_early_is_refused():
    with pytest.raises(RuntimeError, match="logged 501 of iterations 0..999"):
        bench_char_recipe.parse_nanogpt_log(_nanogpt_log(500, 250), 1000)


# ------------------------------------------------------------------------------------------------------------
# bench_train_gpu on the CPU, with a stand-in for a nanoGPT checkout
# ------------------------------------------------------------------------------------------------------------

STAND_IN = '''
"""A stand-in with nanoGPT's interface (GPTConfig, GPT(config), forward(idx, targets) -> (logits, loss))."""
from dataclasses import dataclass

import torch

from course_lib.gpt2 import GPT2, GPT2Config


@dataclass
class GPTConfig:
    block_size: int
    vocab_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float
    bias: bool


class GPT(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        config = GPT2Config(c.vocab_size, c.block_size, n_layers=c.n_layer, n_heads=c.n_head, d_model=c.n_embd)
        self.inner = GPT2(config)

    def forward(self, idx, targets=None):
        return self.inner(idx, targets)
'''


def test_the_gpu_benchmark_runs_its_peers_on_the_cpu(tmp_path, capsys):
    (tmp_path / "nanogpt").mkdir()
    (tmp_path / "nanogpt" / "model.py").write_text(textwrap.dedent(STAND_IN))
    argv = ["--device", "cpu", "--tiny", "--variants", "eager", "--steps", "1", "--warmup", "1"]
    rows = bench_train_gpu.main([*argv, "--nanogpt", str(tmp_path / "nanogpt"), "--json", str(tmp_path / "b.json")])
    assert [(r["model"], r["mode"]) for r in rows] == [("course", "eager"), ("hf", "eager"), ("nanogpt", "eager")]
    assert all("error" not in r for r in rows), rows
    assert len({r["n"] for r in rows}) == 1  # the same model size, so the same FLOPs per token
    assert all(r["first_loss"] == pytest.approx(rows[0]["first_loss"], abs=0.05) for r in rows)  # ~ ln 50,304
    assert json.loads((tmp_path / "b.json").read_text())["rows"] == json.loads(json.dumps(rows))
    out = capsys.readouterr().out
    assert "course / hf" in out and "course / nanogpt" in out and "against a measured peak" in out


def test_a_variant_that_fails_is_reported_and_the_others_go_on(monkeypatch):
    args = argparse.Namespace(tiny=True, seq_len=64, micro_batch_size=2, steps=1, warmup=1, nanogpt=None)
    peak = argparse.Namespace(flops=1e12)
    failed = bench_train_gpu.measure("x", "course", "eager", args, "cpu", "fp32", peak, backend="NO_SUCH_BACKEND")
    assert failed["error"].startswith("AttributeError")


# ------------------------------------------------------------------------------------------------------------
# gpu_check: lesson 11 twice, the second run continuing from the first run's middle checkpoint
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_lesson_11_run_again_continues_from_its_checkpoint(tmp_path, monkeypatch):
    """gpu_check's dry run of the lesson: its GPU path on the CPU (a tiny model), planned for 12 s, training a
    learner's GPT (the instructor's answers of lessons 05, 06 and 09 in its work folder). The first run keeps the
    checkpoint of its middle; put back in place, the second run of the notebook continues from that step to the
    planned end, and its last training loss is the uninterrupted first run's, digit for digit."""
    args = argparse.Namespace(dry_run=True, budget_min=0.2, step_timeout=600, course_model=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as gpu_check --dry-run runs the kernels
    folder = tmp_path / "run"
    folder.mkdir()
    first = gpu_check.run_lesson(args, tmp_path, folder, True)
    assert first["ok"] and int(first["kept"]) > 0, first["result"]
    checkpoints = folder / "lesson11-run" / "checkpoints"
    (checkpoints / "gpu-check-middle.pt").replace(checkpoints / "gpt2.pt")
    second = gpu_check.run_lesson(args, tmp_path, folder, False)
    assert second["continued"] == first["kept"], second["result"]
    assert second["last"] == first["last"] != "not found"
    text = (tmp_path / "lesson11_run1.txt").read_text()
    assert "pretending to be on NVIDIA L4" in text
    assert "tokens/s: planned" in text and "the run: " in text  # the plan from measurement ran
    assert first["result"].startswith("YOUR GPT (lesson 09); micro-batch 8 x 64: not measured (no CUDA here)")
    assert "per step: your GPT " in first["result"]  # timed beside the course's GPT2
    assert "COURSE_WORK_DIR" not in os.environ  # set for the kernels only


# ------------------------------------------------------------------------------------------------------------
# gpu_check: lesson 12's ladder at toy size (bench_ladder_gpu.py)
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_ladder_step_trains_every_rung_on_the_cpu(tmp_path, monkeypatch):
    """gpu_check's dry run of lesson 12's ladder: every rung of the lesson trains on Tiny Shakespeare's GPT-2 tokens,
    each with the parameters its ModernGPT has, and every validation loss ends below the uniform guess's."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    args = argparse.Namespace(dry_run=True, step_timeout=600)
    result = gpu_check.run_ladder(args, tmp_path)
    assert result["ok"], result["result"]
    rows = json.loads((tmp_path / "ladder.json").read_text())["rows"]
    tiny = ModernConfig(bench_ladder_gpu.PADDED_VOCAB, 32, **bench_ladder_gpu.SIZES["tiny"], use_sdpa=True)
    gpt2 = ladder.modern_ladder(tiny)
    assert [row["rung"] for row in rows] == [rung.label for rung in gpt2]
    assert [row["params"] for row in rows] == [sum(p.numel() for p in ModernGPT(r.config).parameters()) for r in gpt2]
    assert all(row["steps"] == 8 and row["tokens"] == 8 * 4 * 32 for row in rows)
    assert all(row["val_loss"] < math.log(bench_ladder_gpu.PADDED_VOCAB) for row in rows)


# ------------------------------------------------------------------------------------------------------------
# bench_ladder_seeds: the seeds behind lesson 12's ladder claims, both ladders
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "labels"),
    [
        (False, ["GPT-2", "+ RMSNorm", "+ RoPE", "+ SwiGLU", "+ GQA", "+ no biases", "+ QK-norm", "+ Muon"]),
        (True, ["GPT-2", "+ RoPE", "modern block", "+ Muon"]),
    ],
)
def test_the_seeds_bench_runs_every_rung_of_either_ladder_for_every_seed(tokens, labels, capsys):
    import torch

    from tests.benchmarks import bench_ladder_seeds

    threads = torch.get_num_threads()
    try:  # the script pins one thread for its runs; the tests after this one get theirs back
        losses = bench_ladder_seeds.main(["--tiny", "--seeds", "0", "3", "--steps", "2", *(["--tokens"] * tokens)])
    finally:
        torch.set_num_threads(threads)
    assert list(losses) == labels and all(len(v) == 2 and v[0] != v[1] for v in losses.values())
    out = capsys.readouterr().out
    assert "| + Muon |" in out and "| lower in |" in out and " of 2 |" in out and "bigram floor" in out


def test_the_seeds_bench_reads_chosen_rungs_in_pairs_at_every_evaluation(capsys):
    """The longer run's form: some rungs only, each read against the chosen rung above it, at every evaluation."""
    import torch

    from tests.benchmarks import bench_ladder_seeds

    threads = torch.get_num_threads()
    try:
        losses = bench_ladder_seeds.main(
            ["--tiny", "--seeds", "0", "1", "--steps", "4", "--eval-points", "2"]
            + ["--rungs", "GPT-2", "+ RoPE", "+ Muon"]
        )
    finally:
        torch.set_num_threads(threads)
    assert list(losses) == ["GPT-2", "+ RoPE", "+ Muon"]
    out = capsys.readouterr().out
    assert "### after 2 steps" in out and "### after 4 steps" in out and "| + Muon (vs + RoPE) |" in out
    with pytest.raises(SystemExit):
        bench_ladder_seeds.main(["--tiny", "--rungs", "GPT-3"])


# ------------------------------------------------------------------------------------------------------------
# bench_induction_seeds: the seeds behind lesson 13's phase-change claims
# ------------------------------------------------------------------------------------------------------------


def test_the_induction_bench_measures_every_seed_and_takes_other_settings(capsys):
    import torch

    from tests.benchmarks import bench_induction_seeds

    threads = torch.get_num_threads()
    try:  # the script pins one thread for its runs; the tests after this one get theirs back
        rows = bench_induction_seeds.main(["--seeds", "0", "1", "--steps", "4", "--set", "every=2", "periods=3,8"])
    finally:
        torch.set_num_threads(threads)
    assert [row["seed"] for row in rows] == [0, 1] and rows[0]["induction last"] != rows[1]["induction last"]
    assert all(row["20%"] in (0, 2, 4) and row["20%"] <= row["50%"] <= row["80%"] for row in rows)
    out = capsys.readouterr().out
    assert "periods=(3, 8)" in out and "every=2" in out and "| median |" in out and "20 % -> 80 %" in out
