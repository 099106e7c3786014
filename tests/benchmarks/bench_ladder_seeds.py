"""Lesson 12's ladder for many seeds (a script, not a test): which of the lesson's differences are the change, and
which the luck of one draw?

    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py                     # seeds 0-7, the lesson's settings
    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py --tokens             # the lesson's GPT-2-token ladder
    .venv/bin/python tests/benchmarks/bench_ladder_seeds.py --steps 1500 --eval-points 5 \\
        --rungs GPT-2 "+ RMSNorm" "+ RoPE" "+ QK-norm" "+ Muon"                 # the longer run (seeds 0-7)

Every seed trains every rung of `ladder.modern_ladder` (the lesson's sizes: 2 layers of 64, 4 heads, 64 characters
of context, batches of 16) for `--steps` steps, as `ladder.run_ladder` does in the lesson, the first rung being
ModernGPT with GPT-2's switches (the same model as lesson 09's GPT: tests/test_modern_gpt.py). Runs of two rungs with
the same seed see the same batches in the same order and start from the same draws where the shapes allow, so they
are read as pairs: for each rung, the per-seed differences from the rung above it (above it in `--rungs`, when
that picks some) and from the first rung — their mean, smallest and largest, and in how many seeds the rung is
lower. With `--eval-points` above 1 the same is printed at every evaluation (how a lead changes with length).
Also printed: each seed's losses, the bigram floor (`ladder.bigram_floor`, on the same validation windows), the
load average before and after, and the wall time. Only equal steps: the equal-seconds column depends on the machine.
`--tokens`: the lesson's second ladder instead (`ladder.token_ladder`, `ladder.TOKEN_SETTINGS`): Tiny Shakespeare in
GPT-2's tokens, renumbered over the 11,706 that occur (`ladder.compact_ids`), 32 tokens of context, 200 steps.
One intra-op thread unless --threads says otherwise (`LadderSettings.threads`; the lesson leaves torch's own number).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
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
    parser.add_argument("--eval-points", type=int, default=1, help="evaluations during a run, the last at --steps")
    parser.add_argument("--rungs", nargs="+", help="only these rungs (labels), in the ladder's order")
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
    if args.rungs:
        unknown = sorted(set(args.rungs) - {r.label for r in rungs})
        if unknown:
            parser.error(f"no rung {unknown}; the rungs are {[r.label for r in rungs]}")
        rungs = [r for r in rungs if r.label in args.rungs]
    steps = args.steps or base.steps
    settings = dataclasses.replace(base, steps=steps, warmup_steps=min(base.warmup_steps, steps // 2),
                                   seeds=tuple(args.seeds), eval_points=args.eval_points, pace_rounds=0,
                                   threads=args.threads)  # fmt: skip
    if args.tiny:
        settings = dataclasses.replace(settings, batch_size=2, eval_windows=8)
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{args.threads} thread(s); {settings.steps} steps of {settings.batch_size} x {sizes['context_length']}, "
        f"sizes {sizes}; load average {_load()} at the start"
    )
    started = time.perf_counter()
    results = ladder.run_ladder(rungs, train_ids, val_ids, settings)
    print(f"({time.perf_counter() - started:.0f} s wall; load average {_load()} at the end)\n")
    windows = ladder.eval_batches(val_ids, sizes["context_length"], settings.eval_windows, seed=0)
    floor = ladder.bigram_floor(train_ids, *windows, vocab_size)
    losses = {r.label: [run.val_loss for run in r.runs] for r in results}
    print("| rung | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean |")
    print("|---|" + "---:|" * (len(args.seeds) + 1))
    for label, values in losses.items():
        print(f"| {label} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {statistics.fmean(values):.3f} |")
    print(f"\nbigram floor (add-one bigram table of the training ids, on the same windows): {floor:.3f}; "
          f"{results[0].label} minus the floor: {results[0].val_loss - floor:+.3f}")  # fmt: skip
    for k, (step, _) in enumerate(results[0].runs[0].curve):
        if len(results[0].runs[0].curve) > 1:
            print(f"\n### after {step} steps")
        at = [_at(r, k) for r in results]
        print("\n| rung | vs the rung above: mean, min, max | lower in | vs the first rung: mean, min, max "
              "| lower in |")  # fmt: skip
        print("|---|---|---:|---|---:|")
        for above, r in zip(at, at[1:], strict=False):
            step_pair, total = ladder.Paired.of(r, above), ladder.Paired.of(r, at[0])
            print(f"| {r.label} (vs {above.label}) | {_summary(step_pair)} | {step_pair.lower} of {step_pair.n} | "
                  f"{_summary(total)} | {total.lower} of {total.n} |")  # fmt: skip
    return losses


def _at(result: ladder.RungResult, k: int) -> ladder.RungResult:
    """`result` with each run's loss at its k-th evaluation as its loss (the paired reading at that point)."""
    runs = [dataclasses.replace(run, val_loss=run.curve[k][1]) for run in result.runs]
    return dataclasses.replace(result, runs=runs)


def _summary(paired: ladder.Paired) -> str:
    values = paired.differences
    return f"{paired.mean:+.3f}, {min(values):+.3f}, {max(values):+.3f}"


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
