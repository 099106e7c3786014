"""Lesson 06's warm-up experiment for several seeds (a script, not a test): is what the lesson's one run shows the
rule at this size, or that seed's luck?

    .venv/bin/python tests/benchmarks/bench_warmup.py                  # seeds 0-6, the lesson's settings
    .venv/bin/python tests/benchmarks/bench_warmup.py --seeds 0 --steps 30 --warmup 8   # the autograding run
    .venv/bin/python tests/benchmarks/bench_warmup.py --seeds 0 1 2 --lr 0.003          # a lower peak rate

For each seed, the four runs of the lesson (`deep_stacks.train_stack`: post-LN and pre-LN, with and without the
warm-up), each line the final loss (mean of the last tenth of the steps) and the loss of guessing, ln(vocab_size).
One intra-op thread unless --threads says otherwise (the lesson itself never pins it; the losses agree to float
rounding either way, the trajectories may drift apart after many steps).
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import torch

from course_lib import deep_stacks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(7)))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--lr", type=float, default=1e-2, help="the peak learning rate")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} thread(s)")
    print(f"{args.steps} steps, peak lr {args.lr}, warm-up {args.warmup} steps; guessing: ln 16 = {math.log(16):.3f}")
    tail = max(1, args.steps // 10)
    for seed in args.seeds:
        finals = []
        start = time.perf_counter()
        for norm_first in (False, True):
            for warmup in (0, args.warmup):
                losses = deep_stacks.train_stack(norm_first, warmup, steps=args.steps, lr=args.lr, seed=seed)
                finals.append(sum(losses[-tail:]) / tail)
        seconds = time.perf_counter() - start
        cells = "  ".join(f"{name} {value:.3f}" for name, value in zip(_NAMES, finals, strict=True))
        print(f"seed {seed}: {cells}   ({seconds:.0f} s wall for the four)", flush=True)


_NAMES = ("post-LN/no warm-up", "post-LN/warm-up", "pre-LN/no warm-up", "pre-LN/warm-up")

if __name__ == "__main__":
    main()
