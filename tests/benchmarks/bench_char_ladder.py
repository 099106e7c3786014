"""Lesson 09's ablation ladder across seeds: which rungs lower the validation loss reliably (the lesson's text and its
claims, tests/claims/l09_char_gpt.py, rest on these runs).

    .venv/bin/python -m tests.benchmarks.bench_char_ladder [--steps 1000] [--seeds 0,1,2]

Each rung of `course_lib.char_ladder.LADDER` trains as the lesson trains it: the course's classes, seed s for the
weights and for the training batches, `--steps` AdamW steps at lr 3e-3 on 32 windows of 32 characters, then
`ref.estimate_loss` over 10 batches of each split drawn with seed s + 1. Seed 0 is the lesson's own run (its table
shows the same losses). One thread (this benchmark pins it, lessons never do): on a shared 2-core machine, two
threads spent several times the CPU time for the same work; the losses do not depend on it.

Measured 2026-11-26 on the course's 2-core machine (load about 9), 1,000 steps, validation loss:

    rung                               seed 0  seed 1  seed 2
    bigram                              2.519   2.511   2.489
    + one self-attention head           2.450   2.461   2.436
    + multi-head (4 heads)              2.339   2.397   2.325
    + feed-forward                      2.206   2.251   2.247
    + residual connections, 2 blocks    2.114   2.120   2.085
    + LayerNorm                         2.112   2.117   2.102
    + dropout 0.1, wider (d_model 64)   2.010   2.009   1.968

Every rung up to the residual connections fell by 0.05-0.16; LayerNorm moved the loss by -0.003 to +0.017; the
last rung fell by 0.10-0.13. The whole ladder took 50 s of CPU time per seed.
"""

from __future__ import annotations

import argparse
import time

import torch

from course_lib import char_lm as ref
from course_lib.char_ladder import LADDER, LadderGPT
from course_lib.data import load_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a benchmark: one thread, see the docstring
    text = load_text("tinyshakespeare.txt")
    stoi, _ = ref.build_char_vocab(text)
    train_data, val_data = ref.train_val_split(ref.encode_chars(text, stoi), 0.9)
    splits = {"train": train_data, "val": val_data}
    for seed in (int(s) for s in args.seeds.split(",")):
        for rung in LADDER:
            torch.manual_seed(seed)
            model = LadderGPT(len(stoi), 32, rung)
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
            batches = torch.Generator().manual_seed(seed)
            start = time.process_time()
            for _ in range(args.steps):
                x, y = ref.get_batch(train_data, 32, 32, batches)
                _, loss = model(x, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            cpu = time.process_time() - start
            losses = ref.estimate_loss(model, splits, 32, 32, 10, torch.Generator().manual_seed(seed + 1))
            print(f"seed {seed} | {rung.name:<34} | train {losses['train']:.3f} val {losses['val']:.3f} | "
                  f"{cpu:.1f} s CPU", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
