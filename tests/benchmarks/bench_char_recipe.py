"""A CPU recipe for a character GPT (`FAST_CPU`, tests/benchmarks/char_recipe.py) against nanoGPT's own train.py
on Tiny Shakespeare (a script, not a test).

    # the comparison with the real peer: nanoGPT's train.py from a checkout, run as it is (its code is never
    # copied into this repository), interleaved with the recipe, each side at each candidate thread count
    .venv/bin/python -m tests.benchmarks.bench_char_recipe --nanogpt /tmp/nanoGPT --runs 3 --threads 1,2
    # a sanity run of the machinery (seconds, not a measurement)
    .venv/bin/python -m tests.benchmarks.bench_char_recipe --nanogpt /tmp/nanoGPT --runs 1 --threads 1 --max-iters 30
    # the older comparison, against the course's own re-implementation of nanoGPT's configuration
    .venv/bin/python -m tests.benchmarks.bench_char_recipe --reimplementation --runs 2

**The peer** is nanoGPT's README command for a CPU, run in the checkout with `python -u`:
`train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 --log_interval=1
--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000
--dropout=0.0` (plus `--out_dir` in a temporary folder). Its `data/shakespeare_char` is prepared by its own
`prepare.py`, from this repository's committed `data/tinyshakespeare.txt` (copied to `input.txt` first, so that
nothing is downloaded; an `input.txt` already there must be the same text). Its README says this run "gets us a
loss of only 1.88".

**The course** is `FAST_CPU` with `CharGPT(**FAST_CPU_MODEL)`, run in a fresh process of this script
(`--worker`), stopped at its first evaluation with validation loss <= 1.88 (2,400 fixed windows of 64
characters of nanoGPT's split, the last 10 % of the text; every 50 steps from step 650).

**Threads.** Neither side sets a thread count in its code; this benchmark starts every run (both sides) in a new
process with OMP_NUM_THREADS and MKL_NUM_THREADS set to the candidate (`--threads`, default 1 and the number of
cores). Each side is then reported at its own best count: the lowest median.

**The clocks** (both leave out process start-up, imports, data loading, model construction and evaluation):
- course: `History.time_to(1.88)`, the training clock of `train_char_model` at the first evaluation <= 1.88: every
  step's batch draw, forward, backward, clipping, AdamW and `loss.item()`, evaluations paused out of it;
- nanoGPT: the sum of the per-iteration times its own log prints (`iter k: ... time X ms`, time.time() deltas)
  over iterations 0 .. max_iters-1 (the 2,000 optimizer steps before its last evaluation; its loop runs one step
  more, which is left out), less its evaluations at steps 0, 250, ...: each timed from the arrival of the log
  line before it to the arrival of its `step k:` line, read from a pipe as they come. What remains is batch
  loading, forward, backward, clipping, AdamW, logging, and its checkpoint writes (`torch.save` when the
  validation loss improved: at most 8 for 2,000 steps; not separable from the step after them).

Runs are interleaved: in each round, for each thread count, one nanoGPT run and one course run, in alternating
order from round to round; the load average (os.getloadavg) is printed before and after every run. Reported:
each side's median [min-max] per thread count, the ratio of the best medians (course / nanoGPT), and the ratio
within each round at the best counts.

`--reimplementation` keeps the earlier comparison: FAST_CPU against the course's own CharGPT trained with
nanoGPT's configuration (`NANOGPT_CPU`), both in this process with one pinned thread. It isolates what the
recipe's schedule and fused attention buy on the same model code; it is not a comparison with nanoGPT.
`--ablation` adds that mode's throughput table (one change at a time).

Results, the machine and its load: tests/benchmarks/RESULTS_char_recipe.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from course_lib.data import data_path
from tests.benchmarks import char_recipe as ct
from tests.char_gpt import CharGPT

TARGET = 1.88  # nanoGPT README: "gets us a loss of only 1.88" for this CPU run
EVAL_WINDOWS = 200 * 12  # nanoGPT's config: eval_iters=200 batches of 12, here as single windows of 64
ITERS = 2000  # nanoGPT README's --max_iters and --lr_decay_iters
COURSE_FIRST_EVAL, COURSE_EVAL_INTERVAL = 650, 50
NANOGPT_ARGS = [  # README, "I only have a macbook" (minus --max_iters/--lr_decay_iters, added per run)
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--compile=False",
    "--eval_iters=20",
    "--log_interval=1",
    "--block_size=64",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--dropout=0.0",
]
ITER_LINE = re.compile(r"^iter (\d+): loss ([\d.]+), time ([\d.]+)ms")
EVAL_LINE = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")


def load_split() -> tuple[torch.Tensor, torch.Tensor, int]:
    """Tiny Shakespeare as ids over sorted(set(text)); the first 90% train, the rest validate (as nanoGPT)."""
    text = data_path("tinyshakespeare.txt").read_text(encoding="utf-8")
    stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
    ids = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n = int(0.9 * len(ids))
    return ids[:n], ids[n:], len(stoi)


def build(vocab: int, block_size: int, model_kw: dict, seed: int) -> CharGPT:
    torch.manual_seed(seed)  # the initial weights; the training batches have their own generator
    return CharGPT(vocab, block_size, **model_kw)


def _spread(values: list[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "-"
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------------------------------
# The real peer: nanoGPT's train.py in a subprocess
# ------------------------------------------------------------------------------------------------------------


def prepare_nanogpt_data(checkout: Path) -> Path:
    """nanoGPT's data/shakespeare_char/{train,val}.bin and meta.pkl, made by its own prepare.py from our text."""
    folder = checkout / "data" / "shakespeare_char"
    ours = data_path("tinyshakespeare.txt")
    source = folder / "input.txt"
    digest = hashlib.sha256(ours.read_bytes()).hexdigest()
    if source.exists() and hashlib.sha256(source.read_bytes()).hexdigest() != digest:
        raise SystemExit(f"{source} is not the text of {ours}: move it away (prepare.py would use it)")
    ready = all((folder / name).exists() for name in ("train.bin", "val.bin", "meta.pkl"))
    if not ready or not source.exists():
        shutil.copyfile(ours, source)  # prepare.py downloads only when input.txt is missing
        subprocess.run([sys.executable, "prepare.py"], cwd=folder, check=True, stdout=subprocess.DEVNULL)
    n_text = len(ours.read_text(encoding="utf-8"))
    expected = 2 * int(0.9 * n_text)  # uint16 ids of the first 90 % of the characters
    if (folder / "train.bin").stat().st_size != expected:
        raise SystemExit(f"{folder / 'train.bin'} has {(folder / 'train.bin').stat().st_size} bytes, not {expected}")
    return folder


def _env(threads: int) -> dict:
    return os.environ | {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}


def parse_nanogpt_log(lines: list[tuple[float, str]], max_iters: int, target: float = TARGET) -> dict:
    """The clock of the docstring from nanoGPT's stdout lines, each with the time it arrived (perf_counter)."""
    dt_ms, evals, eval_s = {}, {}, {}
    previous_arrival = None
    for arrival, line in lines:
        if match := ITER_LINE.match(line):
            dt_ms[int(match.group(1))] = float(match.group(3))
        elif match := EVAL_LINE.match(line):
            step = int(match.group(1))
            evals[step] = float(match.group(3))
            if previous_arrival is not None:
                eval_s[step] = arrival - previous_arrival  # from the line before the evaluation to its result
        previous_arrival = arrival
    counted = [k for k in range(max_iters) if k in dt_ms]
    if len(counted) != max_iters:
        raise RuntimeError(f"nanoGPT logged {len(counted)} of iterations 0..{max_iters - 1}: see its output")
    loop_s = sum(dt_ms[k] for k in counted) / 1000
    evals_s = sum(s for k, s in eval_s.items() if k < max_iters)
    reached = next((k for k in sorted(evals) if evals[k] <= target), None)
    final = evals.get(max_iters)
    result = {"train_s": loop_s - evals_s, "loop_s": loop_s, "evals_s": evals_s, "steps": max_iters}
    return result | {"val": final, "evals": evals, "first_at_target": reached}


def run_nanogpt(checkout: Path, threads: int, max_iters: int, target: float) -> dict:
    eval_interval = 250 if max_iters % 250 == 0 else max_iters  # the README's 250; else one at the end
    extra = [f"--max_iters={max_iters}", f"--lr_decay_iters={max_iters}"]
    if eval_interval != 250:
        extra.append(f"--eval_interval={eval_interval}")
    with tempfile.TemporaryDirectory(prefix="nanogpt-out-") as out, tempfile.TemporaryFile("w+") as errors:
        command = [sys.executable, "-u", "train.py", *NANOGPT_ARGS, *extra, f"--out_dir={out}"]
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=checkout, env=_env(threads), stdout=subprocess.PIPE, stderr=errors, text=True
        )
        lines = [(time.perf_counter(), line.rstrip("\n")) for line in process.stdout]
        wall = time.perf_counter() - started
        if process.wait() != 0:
            errors.seek(0)
            raise RuntimeError(f"nanoGPT's train.py failed ({process.returncode}):\n{errors.read()[-3000:]}")
    return parse_nanogpt_log(lines, max_iters, target) | {"wall_s": wall}


# ------------------------------------------------------------------------------------------------------------
# The course's recipe, in a fresh process as well (--worker)
# ------------------------------------------------------------------------------------------------------------


def course_worker(max_iters: int, target: float) -> None:
    """One FAST_CPU run to val <= target (or max_iters); prints one JSON line. Threads: as the environment says."""
    train, val, vocab = load_split()
    val_windows = ct.eval_batches(val, ct.FAST_CPU.block_size, EVAL_WINDOWS, seed=0)
    config = ct.FAST_CPU.replace(
        target_val_loss=target,
        max_iters=max_iters,
        first_eval=min(COURSE_FIRST_EVAL, max_iters),
        eval_interval=COURSE_EVAL_INTERVAL,
    )
    model = build(vocab, config.block_size, ct.FAST_CPU_MODEL, 0)
    history = ct.train_char_model(model, train, config, val_windows=val_windows)
    result = {
        "threads": torch.get_num_threads(),
        "train_s": history.time_to(target),  # None when not reached
        "train_s_all": history.train_s[-1],
        "steps": len(history.steps),
        "val": history.val_loss[-1],
        "evals": dict(zip(history.eval_steps, history.val_loss, strict=True)),
        "stop": history.stop_reason,
    }
    print(json.dumps(result), flush=True)


def run_course(threads: int, max_iters: int, target: float) -> dict:
    command = [sys.executable, "-m", "tests.benchmarks.bench_char_recipe", "--worker", "--max-iters", str(max_iters)]
    command += ["--target", str(target)]
    started = time.perf_counter()
    done = subprocess.run(command, env=_env(threads), capture_output=True, text=True, cwd=Path(__file__).parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"the course worker failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["threads"] != threads:
        raise RuntimeError(f"the worker ran with {result['threads']} threads, not {threads}")
    return result | {"wall_s": time.perf_counter() - started}


def peer_comparison(checkout: Path, runs: int, threads: list[int], iters: tuple[int, int], target: float, log) -> None:
    max_iters, course_iters = iters
    folder = prepare_nanogpt_data(checkout)
    log(f"nanoGPT checkout {checkout} ({_git_head(checkout)}), data {folder}")
    log(f"nanoGPT: {max_iters} iterations; course: FAST_CPU to val <= {target} (at most {course_iters} steps)")
    if max_iters != ITERS or target != TARGET:
        log("NOT the README's run (--max-iters or --target changed): a sanity run of the machinery, not a measurement")
    results: dict[tuple[str, int], list[dict]] = {}
    for r in range(runs):
        for t in threads:
            sides = [("nanogpt", t), ("course", t)]
            for side, n in sides if r % 2 == 0 else sides[::-1]:
                before = _load()
                if side == "nanogpt":
                    result = run_nanogpt(checkout, n, max_iters, target)
                else:
                    result = run_course(n, course_iters, target)
                result |= {"load": f"{before} -> {_load()}", "round": r}
                results.setdefault((side, n), []).append(result)
                shown = f"{result['train_s']:.1f} s" if result["train_s"] is not None else "target not reached"
                if side == "nanogpt":  # its clock: the logged iteration times less the evaluations among them
                    shown += f" (iterations {result['loop_s']:.1f} s - evaluations {result['evals_s']:.1f} s)"
                val = f"{result['val']:.4f}" if result["val"] is not None else "-"
                log(f"  round {r + 1}/{runs}, {side:<7} threads {n}: training {shown}, {result['steps']} steps, "
                    f"val {val}, wall {result['wall_s']:.1f} s, load {result['load']}")  # fmt: skip
    report(results, threads, runs, target, log)


def report(results: dict, threads: list[int], runs: int, target: float, log) -> None:
    def times(side: str, n: int) -> list[float]:
        return [x["train_s"] for x in results[(side, n)] if x["train_s"] is not None]

    log("")
    log(f"| side | threads | training s, median [min-max] | steps | final val loss | reached <= {target} | loads |")
    log("|---|---|---|---|---|---|---|")
    for (side, n), rows in sorted(results.items()):
        reached = sum(x["train_s"] is not None for x in rows) if side == "course" else None
        if side == "nanogpt":
            reached = sum(x["first_at_target"] is not None for x in rows)
        vals = [x["val"] for x in rows if x["val"] is not None]
        log(
            f"| {side} | {n} | {_spread(times(side, n))} | {sorted({x['steps'] for x in rows})} | "
            f"{_spread(vals, '{:.4f}')} | {reached}/{len(rows)} | {'; '.join(x['load'] for x in rows)} |"
        )
    best = {}
    for side in ("course", "nanogpt"):
        medians = {n: statistics.median(times(side, n)) for n in threads if times(side, n)}
        best[side] = min(medians, key=medians.get) if medians else None
    if best["course"] is None or best["nanogpt"] is None:
        log("\nno ratio: one side has no time (the course did not reach the target, or nanoGPT failed)")
        return
    course, nano = times("course", best["course"]), times("nanogpt", best["nanogpt"])
    ratio = statistics.median(course) / statistics.median(nano)
    log(f"\nbest thread count: course {best['course']}, nanoGPT {best['nanogpt']}")
    log(f"ratio of the medians, course / nanoGPT: {ratio:.3f} ({statistics.median(course):.1f} s / "
        f"{statistics.median(nano):.1f} s); under 1 means the recipe reaches val <= {target} sooner")  # fmt: skip
    per_round = []
    for r in range(runs):
        c = [x["train_s"] for x in results[("course", best["course"])] if x["round"] == r]
        g = [x["train_s"] for x in results[("nanogpt", best["nanogpt"])] if x["round"] == r]
        if c and g and c[0] is not None:
            per_round.append(c[0] / g[0])
    log("ratio within each round (best counts): " + ", ".join(f"{x:.3f}" for x in per_round))


def _git_head(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return done.stdout.strip() or "not a git checkout"


# ------------------------------------------------------------------------------------------------------------
# The earlier comparison: FAST_CPU against the course's re-implementation of nanoGPT's configuration
# ------------------------------------------------------------------------------------------------------------

# (model keyword arguments, training configuration) of each side; one thread, pinned here (a benchmark may)
A_MODEL = dict(d_model=128, n_layers=4, n_heads=4, dropout=0.0, use_sdpa=False)
A_CONFIG = ct.NANOGPT_CPU.replace(num_threads=1, first_eval=1500, eval_interval=250)
B_MODEL = dict(ct.FAST_CPU_MODEL)
B_CONFIG = ct.FAST_CPU.replace(num_threads=1, target_val_loss=TARGET, first_eval=650, eval_interval=50)


def run_once(label, model_kw, config, data, seed, log) -> ct.History:
    train, val_windows, vocab = data
    model = build(vocab, config.block_size, model_kw, seed)

    def show(event: ct.TrainEvent) -> None:
        if event.kind == "eval":
            log(f"    {label} step {event.step:5d}  train {event.train_s:7.1f} s  val {event.loss:.4f}")

    history = ct.train_char_model(
        model, train, config.replace(seed=1337 + seed), val_windows=val_windows, callback=show
    )
    if history.eval_steps and history.eval_steps[0] > 0 and history.val_loss[0] <= TARGET:
        first = history.eval_steps[0]
        log(f"    {label}: already <= {TARGET} at the first evaluation (step {first}): its time is an upper bound")
    return history


def reimplementation_comparison(data, runs: int, log) -> tuple[list[ct.History], list[ct.History]]:
    log("(a) is the course's CharGPT with nanoGPT's configuration (NANOGPT_CPU), not nanoGPT's code; one thread")
    a_runs, b_runs = [], []
    for r in range(runs):
        for label, model_kw, config, out in (("a", A_MODEL, A_CONFIG, a_runs), ("b", B_MODEL, B_CONFIG, b_runs)):
            log(f"  run {r + 1}/{runs} ({label}) load average {_load()}")
            out.append(run_once(label, model_kw, config, data, r, log))
            h = out[-1]
            end = f"{len(h.steps)} steps, train {h.train_s[-1]:.1f} s, val {h.val_loss[-1]:.4f}"
            log(f"  ({label}) {h.stop_reason}: {end}")
    a_time = [h.train_s[-1] for h in a_runs]
    b_time = [h.time_to(TARGET) or float("nan") for h in b_runs]
    ratio = statistics.median(b_time) / statistics.median(a_time)
    log("")
    log("| | (a) course re-implementation of nanoGPT's CPU config | (b) FAST_CPU |")
    log("|---|---|---|")
    log(f"| training s, median [min-max] | {_spread(a_time)} (2,000 steps) | {_spread(b_time)} (to <= {TARGET}) |")
    vals = [_spread([h.val_loss[-1] for h in runs], "{:.4f}") for runs in (a_runs, b_runs)]
    log(f"| val loss at the end | {vals[0]} | {vals[1]} |")
    log(f"| ratio (b)/(a), medians | {ratio:.3f} | |")
    return a_runs, b_runs


def ms_per_step(data, model_kw, config, steps: int = 40, skip: int = 10) -> tuple[float, float]:
    """(ms per step over steps skip..steps, seconds of the first `skip` steps) of a short run, no evaluation."""
    train, _, vocab = data
    model = build(vocab, config.block_size, model_kw, 0)
    history = ct.train_char_model(model, train, config.replace(max_iters=steps, target_val_loss=None))
    return 1000 * (history.train_s[-1] - history.train_s[skip - 1]) / (steps - skip), history.train_s[skip - 1]


def ablation(data, a_runs, b_runs, log, with_compile: bool) -> None:
    """From (a), one change at a time."""
    log("")
    log(f"Throughput (short runs, load average {_load()} at start):")
    log("| change from (a) | ms/step | tokens/s | first 10 steps, s |")
    log("|---|---|---|---|")
    rows = [
        ("(a) as is: explicit attention, 1 thread, B=12", A_MODEL, A_CONFIG),
        ("threads 2 instead of 1", A_MODEL, A_CONFIG.replace(num_threads=2)),
        ("use_sdpa=True", {**A_MODEL, "use_sdpa": True}, A_CONFIG),
        ("use_sdpa + batch 24", {**A_MODEL, "use_sdpa": True}, A_CONFIG.replace(batch_size=24)),
        ("(b) FAST_CPU model and batch", B_MODEL, B_CONFIG),
    ]
    if with_compile:
        rows.insert(3, ("use_sdpa + torch.compile", {**A_MODEL, "use_sdpa": True}, A_CONFIG.replace(compile=True)))
    for label, model_kw, config in rows:
        try:
            ms, first = ms_per_step(data, model_kw, config)
        except Exception as error:  # torch.compile needs a working C++ toolchain; say so instead of stopping
            log(f"| {label} | failed: {type(error).__name__}: {str(error)[:80]} | | |")
            continue
        tps = 1000 * config.batch_size * config.block_size / ms
        log(f"| {label} | {ms:.1f} | {tps:.0f} | {first:.1f} |")
    for label, runs in (("(a)", a_runs), ("(b)", b_runs)):
        steps = [next((s for s, v in zip(h.eval_steps, h.val_loss, strict=True) if v <= TARGET), None) for h in runs]
        log(f"  {label}: steps to the first evaluation <= {TARGET}: {steps}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout: compare with its own train.py")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}", help="candidate thread counts (default 1,cores)")
    parser.add_argument("--max-iters", type=int, default=ITERS, help="nanoGPT's iterations (only for a sanity run)")
    parser.add_argument("--target", type=float, default=TARGET, help="validation loss to reach (only for a sanity run)")
    parser.add_argument("--reimplementation", action="store_true", help="the earlier comparison (see the docstring)")
    parser.add_argument("--ablation", action="store_true", help="with --reimplementation: the throughput ablation")
    parser.add_argument("--with-compile", action="store_true", help="add torch.compile to the ablation (minutes)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1 or args.max_iters < 1:
        parser.error("--runs and --max-iters must be at least 1")
    course_iters = ct.FAST_CPU.max_iters if args.max_iters == ITERS else args.max_iters
    if args.worker:
        course_worker(course_iters, args.target)
        return

    def log(line: str) -> None:
        print(line, flush=True)

    log(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}, python {platform.python_version()}, load {_load()}"
    )
    if args.nanogpt:
        threads = sorted({int(t) for t in args.threads.split(",")})
        peer_comparison(args.nanogpt.resolve(), args.runs, threads, (args.max_iters, course_iters), args.target, log)
    elif args.reimplementation:
        train, val, vocab = load_split()
        data = (train, ct.eval_batches(val, 64, EVAL_WINDOWS, seed=0), vocab)
        a_runs, b_runs = reimplementation_comparison(data, args.runs, log)
        if args.ablation:
            ablation(data, a_runs, b_runs, log, args.with_compile)
    else:
        parser.error("say what to compare: --nanogpt PATH (the real peer) or --reimplementation")
    log(f"load at the end {_load()}")


if __name__ == "__main__":
    main()
