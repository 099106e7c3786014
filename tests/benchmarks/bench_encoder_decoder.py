"""Lesson 07's training run, timed and scored for several seeds (a script, not a test).

    .venv/bin/python tests/benchmarks/bench_encoder_decoder.py                 # seeds 0 1 2, the lesson's settings
    .venv/bin/python tests/benchmarks/bench_encoder_decoder.py --seeds 0 --tiny  # the autograding settings

Each seed builds the model (`Seq2SeqConfig.small()`), trains it (`TrainConfig()`, the lesson's defaults) on
`ReversalTask()` and decodes every held-out string greedily. Wall time covers model construction, training and
evaluation. Exact match is reported on held-out strings of the training lengths, of the two lengths left out of
training (inside the range), and of the lengths beyond it. Medians are over the seeds. Each seed's line ends with
where its cross-attention heads look (mean weight on the mirrored source position, the next one, and <eos>;
layers separated by |), measured after the clock stops.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from course_lib import encoder_decoder as ed
from course_lib.reversal_task import BOS_ID, ReversalTask, mirror_attention, reversal_batch


def _mean(scores: dict[int, float], task: ReversalTask, lengths: list[int]) -> float:
    """Exact match over all held-out strings of these lengths (each string counts once)."""
    counts = [len(task.held_out[n]) for n in lengths]
    return sum(scores[n] * c for n, c in zip(lengths, counts, strict=True)) / sum(counts) if counts else float("nan")


def _heads(model: ed.EncoderDecoderTransformer, task: ReversalTask) -> str:
    """Where each cross-attention head looks on held-out strings (as lesson 07's table), outside the timing."""
    n = 8 if 8 in task.held_out else max(task.held_out)
    strings = task.held_out[n][:200]
    src, labels = reversal_batch(strings)
    with torch.no_grad():
        _, weights = model.decode(ed.shift_right(labels, BOS_ID), model.encode(src), need_weights=True)
    profile = mirror_attention(weights, [len(s) for s in strings])
    return f"length {n}; " + "; ".join(
        f"{name} " + " | ".join(" ".join(f"{v:.2f}" for v in layer) for layer in values.tolist())
        for name, values in profile.items()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the run")
    parser.add_argument("--tiny", action="store_true", help="the settings the lesson uses while autograded")
    args = parser.parse_args()

    task = ReversalTask.tiny() if args.tiny else ReversalTask()
    model_config = ed.Seq2SeqConfig.tiny() if args.tiny else ed.Seq2SeqConfig.small()
    train_config = ed.TrainConfig.tiny() if args.tiny else ed.TrainConfig()
    top = max(task.train_lengths)
    seen = [n for n in task.test_lengths if n in task.train_lengths]
    unseen = [n for n in task.test_lengths if n not in task.train_lengths and n < top]
    longer = [n for n in task.test_lengths if n > top]

    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__} on {cpu}, {args.threads} thread(s); {model_config}")
    print(f"{train_config}; train lengths {task.train_lengths}")
    print(f"held-out strings: seen lengths {seen}, unseen lengths {unseen}, longer {longer}\n")
    header = ["seed", "wall s", "train s", "final loss", "EM seen", "EM unseen", "EM in range", "EM longer"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    rows = []
    for seed in args.seeds:
        start = time.perf_counter()
        torch.manual_seed(seed)
        model = ed.EncoderDecoderTransformer(model_config)
        history = ed.train(model, task, train_config, seed=seed, progress=False, num_threads=args.threads)
        scores = ed.evaluate(model, task, num_threads=args.threads)
        wall = time.perf_counter() - start
        row = [
            wall,
            history["seconds"],
            history["losses"][-1],
            _mean(scores, task, seen),
            _mean(scores, task, unseen),
            _mean(scores, task, seen + unseen),
            _mean(scores, task, longer),
        ]
        rows.append(row)
        cells = [f"{row[0]:.1f}", f"{row[1]:.1f}", f"{row[2]:.4f}", *(f"{v:.4f}" for v in row[3:])]
        print(f"| {seed} | " + " | ".join(cells) + " |", flush=True)
        print("  per length:", {n: round(v, 3) for n, v in scores.items()}, flush=True)
        print("  cross-attention (mean weight per layer, head):", _heads(model, task), flush=True)
    medians = [statistics.median(column) for column in zip(*rows, strict=True)]
    cells = [f"{medians[0]:.1f}", f"{medians[1]:.1f}", f"{medians[2]:.4f}", *(f"{v:.4f}" for v in medians[3:])]
    print("| median | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
