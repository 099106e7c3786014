"""Cached generation of the course's GPT-2: concatenation vs preallocated buffers, and vs an earlier commit.

    .venv/bin/python -m tests.benchmarks.bench_kv_cache --baseline 180af7f
    .venv/bin/python -m tests.benchmarks.bench_kv_cache --baseline 180af7f --rounds 7 --threads 2

Written for the change that made `MultiHeadAttention` itself read and grow a per-layer cache through
`attend_with_cache`, which concatenates the cached and the new keys and values at every step (torch.cat, as
Hugging Face's DynamicCache does), where the model used to write them into buffers preallocated for the whole
context. Three variants, each in fresh processes, in rounds that rotate which goes first so that a change of the
machine's load hits all of them alike:

    baseline   `course_lib` as it was at git revision REV (exported with `git archive`): buffers, and the
               argument checks it then ran inside every layer
    cat        the working tree as it is
    buffers    the working tree with `multihead.attend_with_cache` replaced, for this run only, by the same
               step writing into preallocated buffers (the cache's tensors are views of them): the storage
               question alone, everything else equal

Each process builds the same seeded model per configuration, generates once to warm up (the script stops unless
all variants produce the same ids), then times `generate(..., greedy=True)` with the cache. The table gives the
median over rounds of each process's median, and the ratios (> 1: "cat" is faster). The thread count is pinned
(default 1) so that every variant sees the same machine. (That the cache gives the ids of recomputation is
tested in tests/test_generate.py and tests/test_gpt2.py.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (name, GPT2Config keyword arguments, prompt length, new tokens)
CONFIGS = [
    ("lesson 10's timed model", dict(vocab_size=65, context_length=256, n_layers=4, n_heads=4, d_model=128), 16, 120),
    ("long context", dict(vocab_size=65, context_length=1024, n_layers=4, n_heads=4, d_model=128), 16, 1000),
    (
        "wider, GPT-2's vocabulary",
        dict(vocab_size=50257, context_length=512, n_layers=6, n_heads=8, d_model=512),
        32,
        200,
    ),
]

CHILD = r"""
import json, statistics, sys, time
import torch
import course_lib
from course_lib.generate import generate
from course_lib.gpt2 import GPT2, GPT2Config

threads, repeats, configs, variant = json.loads(sys.argv[1])
torch.set_num_threads(threads)

if variant == "buffers":
    from course_lib import multihead

    def attend_in_buffers(q, k, v, k_cache, v_cache, attend):
        # k_cache, v_cache are views of buffers with room for the whole context: write the T new positions
        # behind the P cached ones and attend over the grown views, as the model did before the change.
        P, T = k_cache.shape[2], q.shape[2]
        keys, values = (c.as_strided((*c.shape[:2], P + T, c.shape[3]), c.stride()) for c in (k_cache, v_cache))
        keys[:, :, P:].copy_(k)
        values[:, :, P:].copy_(v)
        allowed = torch.ones(T, P + T, dtype=torch.bool, device=q.device).tril(diagonal=P)
        out, _ = attend(q, keys, values, allowed)
        return out, keys, values

    multihead.attend_with_cache = attend_in_buffers

    def buffered_cache(model, batch_size):
        cache = type(model).new_cache(model, batch_size)
        c = model.config
        for layer in cache.layers:
            layer.keys = torch.zeros(batch_size, c.n_heads, c.context_length, c.d_head)[:, :, :0]
            layer.values = torch.zeros(batch_size, c.n_heads, c.context_length, c.d_head)[:, :, :0]
        return cache

results = {"file": course_lib.__file__, "seconds": {}, "ids": {}}
for name, kwargs, prompt_len, new in configs:
    torch.manual_seed(0)
    model = GPT2(GPT2Config(**kwargs)).eval()
    if variant == "buffers":
        model.new_cache = lambda batch_size, model=model: buffered_cache(model, batch_size)
    prompt = torch.randint(kwargs["vocab_size"], (1, prompt_len), generator=torch.Generator().manual_seed(0))
    results["ids"][name] = generate(model, prompt, new, greedy=True)[0].tolist()  # also the warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        generate(model, prompt, new, greedy=True)
        times.append(time.perf_counter() - start)
    results["seconds"][name] = statistics.median(times)
print(json.dumps(results))
"""


def _export(revision: str, folder: Path) -> Path:
    """course_lib as it was at `revision`, in folder/tree/course_lib."""
    archive = folder / "baseline.tar"
    subprocess.run(["git", "archive", "-o", str(archive), revision, "course_lib"], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "tree", filter="data")
    return folder / "tree"


def _run(tree: Path, variant: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    payload = json.dumps([args.threads, args.repeats, CONFIGS, variant])
    result = subprocess.run(
        [sys.executable, "-c", CHILD, payload], env=env, cwd=tree, capture_output=True, text=True, check=False
    )
    if result.returncode:
        raise SystemExit(f"the {variant} run in {tree} failed:\n{result.stderr[-3000:]}")
    found = json.loads(result.stdout.strip().splitlines()[-1])
    if not found["file"].startswith(str(tree)):
        raise SystemExit(f"the run meant for {tree} imported {found['file']}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision whose course_lib is the baseline")
    parser.add_argument("--rounds", type=int, default=5, help="processes per variant, in rotating order")
    parser.add_argument("--repeats", type=int, default=3, help="timed generations per configuration and process")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in every process")
    args = parser.parse_args()

    import torch

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, ", end="")
    print(f"{args.threads} thread(s), load average at start {load}")
    with tempfile.TemporaryDirectory() as tmp:
        variants = {"baseline": _export(args.baseline, Path(tmp)), "cat": ROOT, "buffers": ROOT}
        names = list(variants)
        seconds: dict[str, dict[str, list[float]]] = {variant: {} for variant in variants}
        for round_ in range(args.rounds):
            ids = {}
            for variant in names[round_ % 3 :] + names[: round_ % 3]:
                found = _run(variants[variant], variant, args)
                ids[variant] = found["ids"]
                for name, value in found["seconds"].items():
                    seconds[variant].setdefault(name, []).append(value)
            if not ids["baseline"] == ids["cat"] == ids["buffers"]:
                raise SystemExit("the variants generated different ids")
    print(f"\nbaseline: course_lib at {args.baseline}; cat: the working tree; buffers: the working tree with")
    print("preallocated buffers. Greedy generation with the KV cache, batch 1, median over")
    print(f"{args.rounds} rounds of each process's median of {args.repeats}; the same ids in every variant\n")
    print("| configuration | prompt + new | baseline s | buffers s | cat s | baseline / cat | buffers / cat |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, _, prompt_len, new in CONFIGS:
        old, buffers, cat = (statistics.median(seconds[v][name]) for v in ("baseline", "buffers", "cat"))
        print(
            f"| {name} | {prompt_len} + {new} | {old:.3f} | {buffers:.3f} | {cat:.3f} | {old / cat:.2f}x "
            f"| {buffers / cat:.2f}x |"
        )
    print(f"\nload average at end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
