"""Throughput of lesson 11's training loop on this machine (a script, not a test).

    .venv/bin/python tests/benchmarks/bench_train.py                     # the --smoke run: tiny GPT2, CPU, fp32
    .venv/bin/python tests/benchmarks/bench_train.py --model gpt2 --seq-len 1024 --micro-batch-size 16 --device cuda

Runs `course_lib.train.train` on Tiny Shakespeare shards and prints the median step time, tokens/s and MFU
(MFU only where PEAK_FLOPS knows the GPU) over the steps after `--skip` warm-up steps (compilation, caches),
and the wall time of the whole run. Nothing is asserted: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from course_lib.train import TrainConfig, train
from course_lib.train_cli import SMOKE, default_data_dir
from course_lib.train_data import prepare_tiny_shakespeare, read_header
from course_lib.train_setup import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default=SMOKE["precision"])
    parser.add_argument("--seq-len", type=int, default=SMOKE["seq_len"])
    parser.add_argument("--micro-batch-size", type=int, default=SMOKE["micro_batch_size"])
    parser.add_argument("--steps", type=int, default=SMOKE["max_steps"])
    parser.add_argument("--skip", type=int, default=3, help="warm-up steps left out of the medians")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (CPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    data_dir = default_data_dir("tinyshakespeare")
    if not (data_dir / "shards.json").exists():
        prepare_tiny_shakespeare(data_dir)
    config = TrainConfig(
        data_dir=str(data_dir),
        model=args.model,
        micro_batch_size=args.micro_batch_size,
        seq_len=args.seq_len,
        max_steps=args.steps,
        warmup_steps=min(SMOKE["warmup_steps"], args.steps - 1),
        eval_interval=0,
        precision=args.precision,
        device=args.device,
        compile=args.compile,
    )
    torch.manual_seed(config.seed)
    model = build_model(config.model, read_header(data_dir)["vocab_size"], config.seq_len, config.dropout)
    started = time.perf_counter()
    records = train(model, config)
    wall = time.perf_counter() - started
    steps = [r for r in records if r["kind"] == "train"][args.skip :]
    start = records[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    print(f"device {start['device']}, precision {start['precision']}, threads {args.threads}, model {args.model}")
    print(f"{len(steps)} timed steps of {config.micro_batch_size} x {config.seq_len} tokens; whole run {wall:.1f} s")
    print(f"median step {statistics.median(r['dt_s'] for r in steps) * 1000:.0f} ms")
    print(f"median tokens/s {statistics.median(r['tokens_per_s'] for r in steps):,.0f}")
    mfus = [r["mfu"] for r in steps if r["mfu"] is not None]
    print(f"median MFU {statistics.median(mfus):.1%}" if mfus else "MFU: no peak FLOPs known for this device")


if __name__ == "__main__":
    main()
