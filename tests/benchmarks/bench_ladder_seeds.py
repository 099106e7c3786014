"""Lesson 12's ladder for many seeds (a script, not a test): which of the lesson's differences are the change, and
which the luck of one draw?

    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py                     # seeds 0-7, the lesson's settings
    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py --seeds 0 1 --steps 100
    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py --tokens             # the lesson's GPT-2-token ladder

Every seed trains every rung of `ladder.modern_ladder` (the lesson's sizes: 2 layers of 64, 4 heads, 64 characters
of context, batches of 16) for `--steps` steps, as `ladder.run_ladder` does in the lesson, the first rung being
ModernGPT with GPT-2's switches (the same model as lesson 09's GPT: tests/test_modern_gpt.py). Printed: each
seed's equal-steps validation loss per rung, then per rung the change from the rung above it and from GPT-2,
paired seed by seed (mean, smallest, largest). Only equal steps: the equal-seconds column depends on the machine.
`--tokens`: the lesson's second ladder instead (`ladder.token_ladder`, `ladder.TOKEN_SETTINGS`): Tiny Shakespeare in
GPT-2's tokens, renumbered over the 11,706 that occur (`ladder.compact_ids`), 32 tokens of context, 200 steps.
One intra-op thread unless --threads says otherwise (the lesson itself never pins it).
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import time

import torch

from course_lib import char_lm, data, ladder
from course_lib.modern_gpt import ModernConfig


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--steps", type=int, help="steps of every run (default: the lesson's, 300; tokens 200)")
    parser.add_argument("--tokens", action="store_true", help="the lesson's ladder on GPT-2's tokens")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the runs")
    parser.add_argument("--tiny", action="store_true", help="1 layer of 16, contexts of 16: checks the script")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    text = data.load_text("tinyshakespeare.txt")
    if args.tokens:
        ids, kept = ladder.compact_ids(torch.tensor(data.gpt2_encoding().encode_ordinary(text)))
        vocab_size, base, context = len(kept), ladder.TOKEN_SETTINGS, 32
    else:
        stoi, _ = char_lm.build_char_vocab(text)
        ids, vocab_size, base, context = char_lm.encode_chars(text, stoi), len(stoi), ladder.LadderSettings(), 64
    train_ids, val_ids = char_lm.train_val_split(ids)
    sizes = dict(context_length=16, d_model=16, n_heads=2, n_layers=1) if args.tiny else \
        dict(context_length=context, d_model=64, n_heads=4, n_layers=2)  # fmt: skip
    make_rungs = ladder.token_ladder if args.tokens else ladder.modern_ladder
    rungs = make_rungs(ModernConfig(vocab_size, **sizes))
    steps = args.steps or base.steps
    settings = dataclasses.replace(base, steps=steps, warmup_steps=min(base.warmup_steps, steps // 2),
                                   seeds=tuple(args.seeds))  # fmt: skip
    if args.tiny:
        settings = dataclasses.replace(settings, batch_size=2, eval_windows=8)
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
