"""Forward time of the multi-head attention variants of Lesson 05 on the CPU (a script, not a test).

    .venv/bin/python tests/benchmarks/bench_attention.py                  # B=8, d_model=256, H=8, 1 thread
    .venv/bin/python tests/benchmarks/bench_attention.py --threads 4 --seq-lens 128 1024

Every variant holds the same weights (copied from the wrapper of heads), so the last column checks that they
compute the same function. Times are medians of repeated forward passes after warm-up, under inference_mode;
`speedup` is the wrapper's median divided by the variant's, both measured in the same run.
"""

from __future__ import annotations

import argparse
import platform

import torch

from course_lib.multihead import benchmark_variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--n-heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20, help="timed forward passes per cell (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed forward passes before timing")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows = benchmark_variants(
        seq_lens=args.seq_lens,
        batch_size=args.batch_size,
        d_model=args.d_model,
        n_heads=args.n_heads,
        repeats=args.repeats,
        warmup=args.warmup,
        num_threads=args.threads,
        seed=args.seed,
    )

    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__} on {cpu}, {args.threads} thread(s)")
    print(f"B={args.batch_size}, d_model={args.d_model}, H={args.n_heads}, causal; ", end="")
    print(f"median of {args.repeats} forward passes after {args.warmup} warm-up\n")
    columns = [("T", 5), ("variant", 22), ("median ms", 10), ("speedup vs wrapper", 18), ("max abs diff", 12)]
    print("| " + " | ".join(f"{name:>{width}}" for name, width in columns) + " |")
    print("|" + "|".join("-" * (width + 2) for _, width in columns) + "|")
    for row in rows:
        cells = [
            f"{row['seq_len']:>5}",
            f"{row['variant']:>22}",
            f"{row['median_ms']:>10.3f}",
            f"{row['speedup_vs_wrapper']:>17.2f}x",
            f"{row['max_abs_diff']:>12.1e}",
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
