"""The training loop across processes, for real: SIGKILL mid-run and resume, torchrun + DDP with 2 CPU processes
(gloo), Lightning's Trainer with the same module, and the command line.

Each test starts Python processes (a few seconds each on a 2-core machine), so the module is one xdist group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib.train import train
from tests.train_driver import SETTINGS
from tests.train_helpers import config, make_shards, tiny_model, train_losses

pytestmark = pytest.mark.xdist_group("train-processes")

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "train_driver.py"
ENV = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"))


def _driver(*args: object) -> subprocess.Popen:
    command = [sys.executable, str(DRIVER), *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def _records(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def _one_thread(function, *args):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return function(*args)
    finally:
        torch.set_num_threads(threads)


def _finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return out


def test_sigkill_mid_run_then_resume_continues_exactly(shards, tmp_path):
    (tmp_path / "killed").mkdir()
    killed = _driver("loop", shards, tmp_path / "killed", "--pause-at", 6)
    lines = []
    for line in killed.stdout:  # checkpoint after step 3 (next step 4), then steps 4, 5, 6 that are lost
        lines.append(line)
        if line.startswith("PAUSED"):
            break
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    before_kill = _records("".join(lines))
    checkpoint = {"kind": "checkpoint", "step": 4, "path": str(tmp_path / "killed" / "ck.pt")}
    assert checkpoint in [{k: v for k, v in r.items() if k != "elapsed_s"} for r in before_kill]
    assert [p.name for p in (tmp_path / "killed").iterdir()] == ["ck.pt"]  # no temporary file left

    resumed = _driver("loop", shards, tmp_path / "killed", "--resume")
    straight_model = tiny_model(dropout=0.1)  # the uninterrupted run, here (same settings, one thread too)
    straight_losses = train_losses(_one_thread(train, straight_model, config(shards, **SETTINGS)))
    resumed_records = _records(_finish(resumed))
    assert len(straight_losses) == 12
    assert train_losses(before_kill) == straight_losses[:7]
    assert resumed_records[0]["kind"] == "resume" and resumed_records[0]["step"] == 4
    assert train_losses(resumed_records) == straight_losses[4:]  # bit for bit, dropout included
    final = torch.load(tmp_path / "killed" / "rank0.pt")["params"]
    assert all(torch.equal(final[n], p) for n, p in straight_model.named_parameters())


# The run that 2 processes must reproduce: 2 ranks x 2 micro-batches of 2 rows (DDP's no_sync on the first)
# = 1 process x 4 micro-batches of 2 rows: the same tokens, the same mean loss, the same gradients.
TWO_RANKS = ["--dropout", "0", "--batch", "2", "--total-tokens", str(2 * 16 * 2 * 2), "--max-steps", "3"]
TWO_RANKS += ["--clip", "0.5"]


@pytest.fixture(scope="module")
def one_process(shards):
    model = tiny_model(dropout=0.0)
    cfg = config(shards, max_steps=3, grad_clip=0.5, micro_batch_size=2, total_batch_tokens=2 * 16 * 2 * 2)
    return {"model": model, "losses": train_losses(_one_thread(train, model, cfg))}


def _assert_same_run(reference: dict, ranks: list[dict], losses: list[float]) -> None:
    """Same losses at every step; after the last, both ranks hold the same gradients, those of one process.
    (Not the parameters: some gradients are ~0 up to rounding, e.g. the key biases, which softmax ignores;
    Adam divides them by their own size, so rounding noise becomes a full +-lr step there. The equal
    losses show that the weights agree.)"""
    assert losses == pytest.approx(reference["losses"], rel=1e-5, abs=1e-6)
    for name, p in reference["model"].named_parameters():
        assert torch.equal(ranks[0]["grads"][name], ranks[1]["grads"][name]), f"ranks differ in {name}"
        torch.testing.assert_close(ranks[0]["grads"][name], p.grad, rtol=1e-4, atol=1e-6, msg=f"gradient of {name}")


def test_torchrun_ddp_with_two_cpu_processes_equals_one_process(shards, tmp_path, one_process):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(DRIVER)]
    command += ["loop", str(shards), str(tmp_path), *TWO_RANKS]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    _assert_same_run(one_process, ranks, train_losses(_records(result.stdout)))


def test_lightning_ddp_with_two_cpu_processes_equals_our_loop(shards, tmp_path, one_process):
    """The same module in Lightning's Trainer (strategy "ddp", 2 CPU processes, gloo): our loop's losses."""
    command = [sys.executable, str(DRIVER), "lightning", str(shards), str(tmp_path), "2", *TWO_RANKS]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    micro = [ranks[r]["losses"][i : i + 2] for i in range(0, 6, 2) for r in (0, 1)]  # per step: r0 x2, r1 x2
    losses = [sum(micro[2 * s] + micro[2 * s + 1]) / 4 for s in range(3)]
    _assert_same_run(one_process, ranks, losses)
