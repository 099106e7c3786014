"""Tokens per second of the from-scratch GPT-2 tokenizer vs tiktoken on Tiny Shakespeare.

Run:  .venv/bin/python tests/benchmarks/bench_gpt2_bpe.py [--runs 5]

A script, not a test (pytest does not collect this folder's ``bench_*`` files). It first checks that both
tokenizers give identical ids, then times each one ``--runs`` times and prints the medians. The
from-scratch encoder is timed twice: "cold" (its per-word cache cleared before every run, so it fills up
during the run) and "warm" (the cache already holds every word of the text, as after a first pass).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

from course_lib.data import gpt2_encoding, load_text
from course_lib.gpt2_bpe import GPT2Tokenizer


def median_seconds(run: Callable[[], object], runs: int, before: Callable[[], None] | None = None) -> float:
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per tokenizer (median is reported)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    text = load_text("tinyshakespeare.txt")
    ours = GPT2Tokenizer.from_registry()
    reference = gpt2_encoding()

    expected = reference.encode_ordinary(text)
    ours.clear_cache()
    if ours.encode_ordinary(text) != expected:
        raise SystemExit("ids differ between the from-scratch tokenizer and tiktoken: no timing reported")
    n_tokens = len(expected)

    tiktoken_s = median_seconds(lambda: reference.encode_ordinary(text), args.runs)
    cold_s = median_seconds(lambda: ours.encode_ordinary(text), args.runs, before=ours.clear_cache)
    ours.encode_ordinary(text)  # fill the cache
    warm_s = median_seconds(lambda: ours.encode_ordinary(text), args.runs)

    print(f"Tiny Shakespeare: {len(text):,} characters, {n_tokens:,} GPT-2 tokens; ids identical: yes")
    print(f"python {platform.python_version()} on {platform.machine()}, median of {args.runs} runs each")
    print(f"{'encoder':<28}{'seconds':>10}{'tokens/s':>14}{'time vs tiktoken':>18}")
    for name, seconds in [
        ("tiktoken (Rust)", tiktoken_s),
        ("from scratch, cold cache", cold_s),
        ("from scratch, warm cache", warm_s),
    ]:
        print(f"{name:<28}{seconds:>10.3f}{n_tokens / seconds:>14,.0f}{seconds / tiktoken_s:>17.1f}x")


if __name__ == "__main__":
    main()
