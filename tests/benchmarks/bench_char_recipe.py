"""nanoGPT's CPU run on Tiny Shakespeare against the course's faster CPU recipe (a script, not a test).

    .venv/bin/python -m tests.benchmarks.bench_char_recipe              # 3 interleaved runs each, then the ablation
    .venv/bin/python -m tests.benchmarks.bench_char_recipe --runs 1 --no-ablation

(a) `NANOGPT_CPU`: the course's CharGPT at nanoGPT's README configuration (4 layers, 4 heads, 128 channels,
    block 64, batch 12, 2,000 steps, lr 1e-3 with 100 warm-up steps and a cosine to 1e-4 at step 2,000,
    AdamW betas (0.9, 0.99), weight decay 0.1, clipping at 1.0, dropout 0), explicit attention. Reported: the
    training time of all 2,000 steps, the final validation loss, and whether (and when) it reached <= 1.88.
(b) `FAST_CPU` with its model settings: the training time to the first evaluation with validation loss <= 1.88.

Both use nanoGPT's shakespeare_char split (the first 90% of the characters train) and are evaluated on the same
fixed 2,400 validation windows of 64 characters (200 batches of 12 x 64; 153,600 predictions), drawn once with
seed 0. Evaluation is excluded from the training clock for both (it draws no training batch and changes no
weight, so skipping early evaluations, as `first_eval` does to save time, changes nothing measured). Both run
with one intra-op thread: on this shared 2-core machine two threads were measured to be ~12x slower per step
(see the ablation), and nanoGPT's own setting leaves the thread count to PyTorch. Runs alternate a, b, a, b, ... so that
both see similar load; medians are over the runs, with min-max spreads.

The ablation starts from (a) and changes one thing at a time. Changes that keep the arithmetic (attention
kernel, threads, torch.compile, batch size at a fixed step count) are measured as milliseconds per step on
short runs (steps 10..40, after the warm-up of allocators and compilation; the compile time is reported
apart). Changes of the optimisation (learning rate, schedule) are measured as steps to <= 1.88 by full runs.

Results, the machine and its load: tests/benchmarks/RESULTS_char_recipe.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from course_lib import char_train as ct
from course_lib.char_gpt import CharGPT
from course_lib.data import data_path

TARGET = 1.88  # nanoGPT README: "gets us a loss of only 1.88" for this CPU run
EVAL_WINDOWS = 200 * 12  # nanoGPT's eval_iters=200 batches of 12, as single windows of 64

# (model keyword arguments, training configuration) of each side
A_MODEL = dict(d_model=128, n_layers=4, n_heads=4, dropout=0.0, use_sdpa=False)
A_CONFIG = ct.NANOGPT_CPU.replace(num_threads=1, first_eval=1500, eval_interval=250)
B_MODEL = dict(ct.FAST_CPU_MODEL)
B_CONFIG = ct.FAST_CPU.replace(num_threads=1, target_val_loss=TARGET, first_eval=650, eval_interval=50)


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


FMT0, FMT4 = "{:.0f}", "{:.4f}"


def _spread(values: list[float], fmt: str = "{:.1f}") -> str:
    med = statistics.median(values)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def main_comparison(data, runs: int, log) -> tuple[list[ct.History], list[ct.History]]:
    a_runs, b_runs = [], []
    for r in range(runs):
        for label, model_kw, config, out in (("a", A_MODEL, A_CONFIG, a_runs), ("b", B_MODEL, B_CONFIG, b_runs)):
            log(f"  run {r + 1}/{runs} ({label}) load average {os.getloadavg()[0]:.1f}")
            out.append(run_once(label, model_kw, config, data, r, log))
            h = out[-1]
            end = f"{len(h.steps)} steps, train {h.train_s[-1]:.1f} s, val {h.val_loss[-1]:.4f}"
            log(f"  ({label}) {h.stop_reason}: {end}")
    a_time = [h.train_s[-1] for h in a_runs]
    b_time = [h.time_to(TARGET) or float("nan") for h in b_runs]
    a_reach = ["no" if h.time_to(TARGET) is None else f"{h.time_to(TARGET):.1f}" for h in a_runs]
    ratio = statistics.median(b_time) / statistics.median(a_time)
    table = [
        ("", "(a) nanoGPT CPU config", "(b) FAST_CPU"),
        ("---", "---", "---"),
        ("model", A_MODEL, B_MODEL),
        ("steps", [len(h.steps) for h in a_runs], [len(h.steps) for h in b_runs]),
        ("training s, median [min-max]", f"{_spread(a_time)} (2,000 steps)", f"{_spread(b_time)} (to <= {TARGET})"),
        ("val loss at the end", *(_spread([h.val_loss[-1] for h in runs], FMT4) for runs in (a_runs, b_runs))),
        (f"(a) at <= {TARGET} after s", a_reach, ""),
        ("tokens/s", *(_spread([h.tokens_per_s() for h in runs], FMT0) for runs in (a_runs, b_runs))),
        ("ratio (b)/(a), medians", f"{ratio:.3f}: target <= 0.5 {'met' if ratio <= 0.5 else 'NOT met'}", ""),
        ("ratio per pair", ", ".join(f"{b / a:.3f}" for a, b in zip(a_time, b_time, strict=True)), ""),
    ]  # fmt: skip
    log("")
    for row in table:
        log("| " + " | ".join(str(cell) for cell in row) + " |")
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
    log(f"Throughput (short runs, load average {os.getloadavg()[0]:.1f} at start):")
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
    log("")
    log("Optimisation (full runs above): steps to the first evaluation <= 1.88")
    for label, runs in (("(a)", a_runs), ("(b)", b_runs)):
        steps = [next((s for s, v in zip(h.eval_steps, h.val_loss, strict=True) if v <= TARGET), None) for h in runs]
        log(f"  {label}: {steps} (evaluated every {(A_CONFIG if label == '(a)' else B_CONFIG).eval_interval} steps)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs of (a) and (b) (default 3)")
    parser.add_argument("--no-ablation", action="store_true", help="only the (a)/(b) comparison")
    parser.add_argument("--ablation-only", action="store_true", help="only the throughput ablation")
    parser.add_argument("--with-compile", action="store_true", help="add torch.compile to the ablation (minutes)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    def log(line: str) -> None:
        print(line, flush=True)

    log(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}, load average {os.getloadavg()}"
    )
    train, val, vocab = load_split()
    val_windows = ct.eval_batches(val, 64, EVAL_WINDOWS, seed=0)
    data = (train, val_windows, vocab)
    a_runs, b_runs = ([], []) if args.ablation_only else main_comparison(data, args.runs, log)
    if not args.no_ablation:
        ablation(data, a_runs, b_runs, log, args.with_compile)


if __name__ == "__main__":
    main()
