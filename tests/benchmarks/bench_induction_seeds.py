"""Lesson 13's induction head over many seeds (a script, not a test): when does it form, how suddenly, and is it
always the same circuit?

    .venv/bin/python tests/benchmarks/bench_induction_seeds.py                 # seeds 0-7, the lesson's settings
    .venv/bin/python tests/benchmarks/bench_induction_seeds.py --seeds 0 1 --steps 3000

Every seed trains the lesson's attention-only model (`repeat_task.RepeatSettings()`: 2 layers of 64, 4 heads, 32
characters of context, repeated stretches of 4 to 16 characters, batches of 32, AdamW at 3e-3) on Tiny Shakespeare's
training text, the seed drawing both the initial weights and the windows, and measures every checkpoint as the
lesson does (`induction.track_checkpoints`: scores on 64 repeated random-character sequences of period 16, losses
on 64 repeated validation windows of 16 characters, the same sequences for every seed). Printed per seed: the
steps at which layer 1's strongest induction score has covered 20 %, 50 % and 80 % of its way from the first
checkpoint to the last (`induction.phase_change_step`), its first and last value, the strongest layer-0
previous-token score at the end, and the in-context loss (second copy minus first copy) at the start and the end;
then the same columns summarised over the seeds. Everything is counted in steps, so nothing depends on the load.
One intra-op thread unless --threads says otherwise (the lesson itself never pins it).
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import time

import torch

from course_lib import char_lm, data, induction, repeat_task

PERIOD, N_SEQUENCES = 16, 64  # what the lesson measures on
VOCAB = 65  # Tiny Shakespeare's characters (checked in main)


def run_seed(seed: int, settings: repeat_task.RepeatSettings, train_ids, scoring, text) -> dict:
    """Train one seed and summarise its checkpoints (see the module docstring)."""
    model = repeat_task.attention_only_gpt(
        VOCAB, settings.context_length, settings.d_model, settings.n_heads, settings.n_layers, seed=seed
    )
    checkpoints = repeat_task.train_with_checkpoints(model, train_ids, settings, seed=seed)
    records = induction.track_checkpoints(model, checkpoints, scoring, text, PERIOD)
    steps = [r["step"] for r in records]
    score = [r["induction L1"] for r in records]
    return {
        "seed": seed,
        "20%": induction.phase_change_step(steps, score, 0.2),
        "50%": induction.phase_change_step(steps, score, 0.5),
        "80%": induction.phase_change_step(steps, score, 0.8),
        "induction first": score[0],
        "induction last": score[-1],
        "previous L0 last": records[-1]["previous token L0"],
        "in-context first": records[0]["in-context"],
        "in-context last": records[-1]["in-context"],
        "second copy last": records[-1]["second copy"],
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--steps", type=int, help="steps of every run (default: the lesson's)")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help="other settings than the lesson's, e.g. n_heads=2 lr=1e-3 (RepeatSettings fields)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    text = data.load_text("tinyshakespeare.txt")
    stoi, _ = char_lm.build_char_vocab(text)
    assert len(stoi) == VOCAB
    train_ids, val_ids = char_lm.train_val_split(char_lm.encode_chars(text, stoi))
    settings = repeat_task.RepeatSettings()
    if args.steps:
        settings = dataclasses.replace(settings, steps=args.steps)
    for assignment in args.set:
        field, _, value = assignment.partition("=")
        kind = type(getattr(settings, field))
        settings = dataclasses.replace(settings, **{field: kind(value) if kind is not tuple else _pair(value)})
    scoring = induction.repeated_tokens(N_SEQUENCES, PERIOD, VOCAB, torch.Generator().manual_seed(1))
    windows = repeat_task.repeated_text(val_ids, N_SEQUENCES, PERIOD, torch.Generator().manual_seed(2))
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} thread(s); {settings}"
    )
    started = time.perf_counter()
    rows = []
    for seed in args.seeds:
        rows.append(run_seed(seed, settings, train_ids, scoring, windows))
        print(f"seed {seed} done ({time.perf_counter() - started:.0f} s wall so far)", flush=True)
    columns = list(rows[0])[1:]
    print("\n| seed | " + " | ".join(columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    for row in rows:
        print(f"| {row['seed']} | " + " | ".join(_cell(row[c]) for c in columns) + " |")
    print("\n| over the seeds | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, summary in (("min", min), ("median", statistics.median), ("max", max)):
        print(f"| {name} | " + " | ".join(_cell(summary([row[c] for row in rows])) for c in columns) + " |")
    widths = [row["80%"] - row["20%"] for row in rows]
    print(f"\n20 % -> 80 % of the rise took {min(widths)} to {max(widths)} steps (median {statistics.median(widths)})")
    return rows


def _pair(text: str) -> tuple[int, int]:
    """ "4,16" -> (4, 16)."""
    low, high = text.split(",")
    return int(low), int(high)


def _cell(value: float | int) -> str:
    return f"{value:.3f}" if isinstance(value, float) else f"{value}"


if __name__ == "__main__":
    main()
