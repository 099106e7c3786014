"""Lesson 12's ladder for many seeds (a script, not a test): which of the lesson's differences are the change, and
which the luck of one draw?

    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py                     # seeds 0-7, the lesson's settings
    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py --seeds 0 1 --steps 100

Every seed trains every rung of `ladder.modern_ladder` (the lesson's sizes: 2 layers of 64, 4 heads, 64 characters
of context, batches of 16) for `--steps` steps, as `ladder.run_ladder` does in the lesson, the first rung being
ModernGPT with GPT-2's switches (the same model as lesson 09's GPT: tests/test_modern_gpt.py). Printed: each
seed's equal-steps validation loss per rung, then per rung the change from the rung above it and from GPT-2,
paired seed by seed (mean, smallest, largest). Only equal steps: the equal-seconds column depends on the machine.
One intra-op thread unless --threads says otherwise (the lesson itself never pins it).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from course_lib import char_lm, data, ladder
from course_lib.modern_gpt import ModernConfig


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--steps", type=int, default=ladder.LadderSettings().steps)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the runs")
    parser.add_argument("--tiny", action="store_true", help="1 layer of 16, contexts of 16: checks the script")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    text = data.load_text("tinyshakespeare.txt")
    stoi, _ = char_lm.build_char_vocab(text)
    train_ids, val_ids = char_lm.train_val_split(char_lm.encode_chars(text, stoi))
    sizes = dict(context_length=16, d_model=16, n_heads=2, n_layers=1) if args.tiny else \
        dict(context_length=64, d_model=64, n_heads=4, n_layers=2)  # fmt: skip
    rungs = ladder.modern_ladder(ModernConfig(len(stoi), **sizes))
    settings = ladder.LadderSettings(steps=args.steps, warmup_steps=min(30, args.steps // 2), seeds=tuple(args.seeds))
    if args.tiny:
        settings = ladder.LadderSettings(steps=args.steps, batch_size=2, warmup_steps=min(30, args.steps // 2),
                                         eval_windows=8, seeds=tuple(args.seeds))  # fmt: skip
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} thread(s); "
        f"{settings.steps} steps of {settings.batch_size} x {sizes['context_length']}, sizes {sizes}"
    )
    started = time.perf_counter()
    results = ladder.run_ladder(rungs, train_ids, val_ids, settings)
    print(f"({time.perf_counter() - started:.0f} s wall)\n")
    losses = {r.label: [run.val_loss for run in r.runs] for r in results}
    print("| rung | " + " | ".join(f"seed {s}" for s in args.seeds) + " |")
    print("|---|" + "---:|" * len(args.seeds))
    for label, values in losses.items():
        print(f"| {label} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    print("\n| rung | change from the rung above: mean, min, max | change from GPT-2: mean, min, max |")
    print("|---|---|---|")
    labels = list(losses)
    for above, label in zip(labels, labels[1:], strict=False):
        step = [b - a for a, b in zip(losses[above], losses[label], strict=True)]
        total = [b - a for a, b in zip(losses[labels[0]], losses[label], strict=True)]
        print(f"| {label} | {_summary(step)} | {_summary(total)} |")
    spreads = {label: max(v) - min(v) for label, v in losses.items()}
    widest = max(spreads, key=spreads.get)
    print(f"\nlargest spread over the seeds of one rung: {spreads[widest]:.3f} ({widest})")
    return losses


def _summary(values: list[float]) -> str:
    return f"{statistics.fmean(values):+.3f}, {min(values):+.3f}, {max(values):+.3f}"


if __name__ == "__main__":
    main()
