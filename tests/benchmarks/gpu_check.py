"""One check of the GPU paths of lessons 11 and 12 on one GPU, with one summary table (a script).

    python3 tests/benchmarks/gpu_check.py --wheels wheels/ --nanogpt /path/to/nanoGPT     # on the GPU machine
    python3 tests/benchmarks/gpu_check.py --dry-run                                       # on a CPU: the logic

Run from the repository root with a Python that has PyTorch. What it does, in order, each step timed:
1. **packages**: the few the checks need (nbclient, ipykernel, pytest, transformers, the lesson's own: see
   REQUIREMENTS). With `--wheels DIR`, the missing ones are installed with
   `pip install --no-index --find-links DIR`, so nothing is downloaded. `course_lib` is used from this checkout
   (PYTHONPATH), not installed.
2. **benchmark**: tests/benchmarks/bench_train_gpu.py, the course's GPT-2 against Hugging Face's (and nanoGPT's,
   with `--nanogpt`), compiled and eager: tokens/s, MFU, memory, ratios.
3. **CUDA tests**: `pytest -m gpu`.
   **Lesson 12's ladder**: tests/benchmarks/bench_ladder_gpu.py, every rung of lesson 12 at GPT-2 small's size
   for `--ladder-tokens` tokens of Tiny Shakespeare (1,000,000 by default: 61 steps of 16 x 1,024, a check that
   every rung trains, with its tokens/s and validation loss beside GPT-2's; a ranking needs far more tokens).
4. **lesson 11, first run**: the instructor source through nbclient, in a fresh folder, with `TIME_BUDGET_MIN`
   set to `--budget-min`, and a learner's solved lessons 05, 06 and 09 (the instructor's answers) in its work
   folder (`COURSE_WORK_DIR`), so that it trains the learner's GPT at GPT-2 124M's sizes, its attention written out
   (`--course-model`: none, the course's GPT2 trains). The checkpoint written nearest the middle of the run is
   copied aside (one line is wrapped around the loop's callback; nothing else in the lesson changes). Reported:
   which model trained, the micro-batch fitted to the memory measured, the learner's GPT against the course's
   fused attention per step and in the budget, the budget used against the budget, measured and planned tokens/s
   and MFU, the data plan, and (Tiny Shakespeare, offline) whether the validation loss turned up.
5. **lesson 11, second run**: the middle checkpoint is put back where the run keeps its checkpoint, as if the
   runtime had died after writing it, and the same notebook runs again: it must continue from that step to the
   planned end. Reported: the step it continued from, and its last training loss beside the first run's.
6. the summary table (and, with `--out DIR`, the executed notebooks, the benchmark's JSON and the logs).

`--dry-run` does the same on a CPU at toy size: the benchmark with `--device cpu --tiny`, the CUDA tests (which
skip), and the lesson made to take its GPU path on the CPU (a cell after the first one says there is an
"NVIDIA L4"; GPU_MODEL, SEQ_LEN and COMPILE become "tiny", 64 and False; 2 evaluations, 1 sample and 4
checkpoints a run instead of 10, 4 and 10), each process with one thread
(OMP_NUM_THREADS=1: on a small shared machine more threads wait for each other) and without the run's safety
stop (a busy CPU would cut the runs short). It checks this script, not the GPU.

**The wheels folder.** On a machine with the internet, for the GPU machine's Python version and platform (say
Python 3.11 on x86-64 Linux), without PyTorch (the GPU machine has its own):

    pip download -d wheels --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \\
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \\
        $(python3 tests/benchmarks/gpu_check.py --requirements)

then copy `wheels/` to the GPU machine. None of these packages depends on torch, so none is downloaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # course_lib from this checkout (it need not be installed)
LESSON = "11_gpt2_training_gpu"
LADDER_RUNGS = 8  # lesson 12's ladder: GPT-2 and seven changes (course_lib.ladder.modern_ladder)
# import name -> pip requirement: what the checks and lesson 11 import (the lesson's imports, the course's
# grading kit, nbclient with its kernel, the CUDA tests, the Hugging Face peer)
REQUIREMENTS = {
    "numpy": "numpy>=1.24",
    "regex": "regex>=2023.0",
    "matplotlib": "matplotlib>=3.7",
    "altair": "altair>=5.0,<6",
    "tiktoken": "tiktoken>=0.6",
    "tqdm": "tqdm>=4.60",
    "ipywidgets": "ipywidgets>=8.0",
    "nbformat": "nbformat>=5.9",
    "nbclient": "nbclient>=0.10",
    "ipykernel": "ipykernel>=6.25",
    "pytest": "pytest>=8.0,<9.2",
    "hypothesis": "hypothesis>=6.100",
    "transformers": "transformers>=4.40",
}
PRETEND_GPU = """# gpu_check --dry-run: the GPU path of this lesson, on the CPU, at toy size (not a lesson cell)
ON_GPU, GPU_NAME, CAPABILITY, MEMORY_GIB = True, "NVIDIA L4", (8, 9), 24.0  # micro-batches of 8 rows
train_setup.device_name = lambda device: GPU_NAME  # the peak is looked up for this name
print("gpu_check --dry-run: pretending to be on", GPU_NAME)"""
KEEP_MIDDLE = """# gpu_check: keep a copy of the checkpoint written nearest the middle of the run (not a lesson cell)
def gpu_check_keep_middle(on_log):
    middle = config.checkpoint_interval * max(1, config.max_steps // config.checkpoint_interval // 2)

    def keep(record):
        on_log(record)
        if record["kind"] == "checkpoint" and record["step"] == middle:
            shutil.copy(CHECKPOINT, CHECKPOINT.with_name("gpu-check-middle.pt"))
            print(f"gpu_check: kept the checkpoint of step {middle}")

    return keep"""
RUN_LINE = "ref.train(model, config, on_log=on_log, resume=ON_GPU, step_fn=STEP)"


def missing_packages() -> list[str]:
    return [requirement for name, requirement in REQUIREMENTS.items() if importlib.util.find_spec(name) is None]


def install(wheels: Path | None) -> str:
    missing = missing_packages()
    if not missing:
        return "all present"
    if wheels is None:
        raise SystemExit(f"missing: {', '.join(missing)}; pass --wheels DIR (see this script's docstring)")
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels), *missing]
    subprocess.run(command, check=True)
    importlib.invalidate_caches()
    still = missing_packages()
    if still:
        raise SystemExit(f"still missing after pip: {', '.join(still)}")
    return "installed " + ", ".join(missing)


def _env() -> dict:
    path = os.environ.get("PYTHONPATH")
    return os.environ | {"PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def run_bench(args, out: Path) -> dict:
    command = [sys.executable, str(ROOT / "tests/benchmarks/bench_train_gpu.py"), "--json", str(out / "bench.json")]
    if args.dry_run:
        command += ["--device", "cpu", "--tiny", "--variants", "eager", "--steps", "2", "--warmup", "1"]
    else:
        command += ["--steps", "10", "--warmup", "3"]
    if args.nanogpt:
        command += ["--nanogpt", str(args.nanogpt)]
    done = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=args.step_timeout)
    (out / "bench.log").write_text(done.stdout + done.stderr)
    print(done.stdout, flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench_train_gpu failed:\n{done.stderr[-2000:]}")
    rows = json.loads((out / "bench.json").read_text())["rows"]
    ok = [r for r in rows if "error" not in r]
    parts = []
    for mode in ("compile", "eager"):
        course = next((r for r in ok if r["model"] == "course" and r["mode"] == mode), None)
        if course is None:
            continue
        parts.append(f"{mode}: course {course['tokens_per_s']:,.0f} tok/s, MFU {course['mfu']:.1%}")
        parts += [f"/{r['model']} {course['tokens_per_s'] / r['tokens_per_s']:.2f}" for r in ok
                  if r["mode"] == mode and r["model"] != "course"]  # fmt: skip
    failed = [f"{r['label']}: {r['error']}" for r in rows if "error" in r]
    return {"result": "; ".join(parts) + (f"; FAILED {failed}" if failed else ""), "ok": not failed}


def run_ladder(args, out: Path) -> dict:
    """Lesson 12's ladder at GPT-2 small's size (bench_ladder_gpu.py): every rung's tokens/s and validation loss
    after the same tokens of Tiny Shakespeare; at toy size on the CPU with --dry-run."""
    command = [sys.executable, str(ROOT / "tests/benchmarks/bench_ladder_gpu.py"), "--json", str(out / "ladder.json")]
    if args.dry_run:
        command += ["--device", "cpu", "--tiny", "--seq-len", "32", "--tokens", "1024"]  # 8 steps of 4 x 32
    else:
        command += ["--tokens", str(args.ladder_tokens)]
    done = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=args.step_timeout)
    (out / "ladder.log").write_text(done.stdout + done.stderr)
    print(done.stdout, flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench_ladder_gpu failed:\n{done.stderr[-2000:]}")
    rows = json.loads((out / "ladder.json").read_text())["rows"]
    first = rows[0]
    parts = [f"{r['rung']} {r['tokens_per_s'] / first['tokens_per_s']:.2f}x, {r['val_loss']:.3f}" for r in rows]
    finite = all(r["val_loss"] == r["val_loss"] and r["tokens_per_s"] > 0 for r in rows)  # no NaN, a pace measured
    return {"result": f"GPT-2 {first['tokens_per_s']:,.0f} tok/s; tokens/s vs GPT-2, val loss: " + "; ".join(parts),
            "ok": finite and len(rows) == LADDER_RUNGS}  # fmt: skip


def run_gpu_tests(args, out: Path) -> dict:
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "tests/test_train.py"]
    done = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=args.step_timeout)
    (out / "pytest_gpu.log").write_text(done.stdout + done.stderr)
    summary = next(
        (line for line in reversed(done.stdout.splitlines()) if re.search(r"passed|failed|skipped", line)), ""
    )
    print(summary, flush=True)
    return {"result": summary.strip("= "), "ok": done.returncode in (0, 5) and "failed" not in summary}


def lesson_notebook(args, first_run: bool):
    """The instructor source, without the self-grading cell, with the check's budget and (first run) the
    callback that keeps the middle checkpoint; with --dry-run, made to take its GPU path at toy size."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") != "self_grade"]

    def cell_with(piece: str) -> int:
        found = [i for i, c in enumerate(nb.cells) if piece in c.source]
        if len(found) != 1:
            raise RuntimeError(f"lesson 11 changed: {len(found)} cells hold {piece!r}; update gpu_check.py")
        return found[0]

    def replace(piece: str, old: str, new: str) -> None:
        cell = nb.cells[cell_with(piece)]
        if cell.source.count(old) != 1:
            raise RuntimeError(f"lesson 11 changed: {old!r} is not in its cell once; update gpu_check.py")
        cell.source = cell.source.replace(old, new)

    replace("def gpu_plan(", "TIME_BUDGET_MIN = 20 ", f"TIME_BUDGET_MIN = {args.budget_min} ")
    if args.dry_run:
        replace(
            "def gpu_plan(",
            'GPU_MODEL, SEQ_LEN, COMPILE = "gpt2", 1024, True',
            'GPU_MODEL, SEQ_LEN, COMPILE = "tiny", 64, False',
        )
        nb.cells.insert(cell_with("SMALL = autograding()") + 1, nbformat.v4.new_code_cell(PRETEND_GPU))
        replace(
            "SMOKE_BUDGET_S = 30",
            "N_EVALS, N_SAMPLES, N_CHECKPOINTS = 10, 4, 10",
            "N_EVALS, N_SAMPLES, N_CHECKPOINTS = 2, 1, 4",
        )
        # two validation batches an evaluation, not twenty: on a CPU at toy size each batch scores 512 positions
        # over GPT-2's 50,257 tokens, and twenty took 4 s an evaluation, half of the dry run
        replace("def gpu_plan(", "max(1, min(20, (val_tokens", "max(1, min(2, (val_tokens")
        # no safety stops: how far each run gets must not depend on how busy the CPU is
        replace("SMOKE_BUDGET_S = 30", "max_time_s=safety_stop - spent)", "max_time_s=None)")
        replace("SMOKE_BUDGET_S = 30", "max_time_s=1.1 * budget_s)", "max_time_s=None)")
    if first_run:
        replace(RUN_LINE, RUN_LINE, RUN_LINE.replace("on_log=on_log", "on_log=gpu_check_keep_middle(on_log)"))
        nb.cells.insert(cell_with(RUN_LINE.replace("on_log=on_log", "on_log=gpu_check_keep_middle(on_log)")),
                        nbformat.v4.new_code_cell(KEEP_MIDDLE))  # fmt: skip
    return nb


def execute(nb, folder: Path, args) -> str:
    """Run the notebook in `folder`; return everything its cells printed."""
    from nbclient import NotebookClient

    from course_lib.workflow.kernels import WatchfulKernelManager

    client = NotebookClient(
        nb, timeout=args.step_timeout, kernel_name="python3", kernel_manager_class=WatchfulKernelManager,
        resources={"metadata": {"path": str(folder)}},
    )  # fmt: skip
    os.environ["PYTHONPATH"] = _env()["PYTHONPATH"]  # the kernel imports course_lib from this checkout
    client.execute()
    texts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                texts.append(output["text"])
    return "".join(texts)


def _find(pattern: str, text: str, default: str = "not found") -> str:
    match = re.search(pattern, text, re.M)
    return match.group(1) if match else default


def learners_work(folder: Path) -> Path:
    """A work folder with a learner's saved lessons 05, 06 and 09 (the instructor's answers), for lesson 11 to train
    their GPT; the path goes to the kernel as COURSE_WORK_DIR."""
    import nbformat

    from tests.nbtools import solved

    work = folder / "work"
    for lesson in ("05_multi_head_attention", "06_transformer_blocks", "09_char_gpt"):
        (work / lesson).mkdir(parents=True, exist_ok=True)
        nbformat.write(solved(lesson), work / lesson / f"{lesson}.ipynb")
    return work


def run_lesson(args, out: Path, folder: Path, first_run: bool) -> dict:
    import nbformat

    nb = lesson_notebook(args, first_run)
    before = os.environ.get("COURSE_WORK_DIR")
    if not args.course_model:  # the learner's GPT trains: the kernel's your_code finds it in this work folder
        os.environ["COURSE_WORK_DIR"] = str(learners_work(folder))
    try:
        text = execute(nb, folder, args)
    finally:
        nbformat.write(nb, out / f"lesson11_run{1 if first_run else 2}.ipynb")
        if before is None:  # the kernel has it; this process's later work does not
            os.environ.pop("COURSE_WORK_DIR", None)
        else:
            os.environ["COURSE_WORK_DIR"] = before
    (out / f"lesson11_run{1 if first_run else 2}.txt").write_text(text)
    last_loss = _find(r"^training loss: .*step (\d+: [\d.]+)$", text)
    if first_run:
        parts = [
            _find(r"^The training runs below train (.*?), configured", text),
            "; ".join(re.findall(r"^(micro-batch \d+ x \d+: .*)$", text, re.M)) or "no micro-batch measured",
            _find(r"^(per step: .*)$", text, "no comparison (the course's GPT2 trained)"),
            _find(r"^(in a budget of .*)$", text, ""),
            _find(r"^(peak memory of a step .*)$", text, ""),
            _find(r"^(budget: .*)$", text),
            _find(r"^tokens/s: (planned .*)$", text),
            _find(r"^(the run: .*)$", text),
            _find(r"^(NOT EVEN \d+ STEPS FIT.*)$", text, "the plan fits the budget"),
            _find(r"^(the run reads .*)$", text),
            _find(r"^(overfitting: .*)$", text, "no overfitting line (FineWeb-Edu, or too few evaluations)"),
            f"last loss step {last_loss}",
        ]
        kept = _find(r"^gpu_check: kept the checkpoint of step (\d+)$", text, "")
        return {"result": "; ".join(parts), "ok": bool(kept), "kept": kept, "last": last_loss}
    continued = _find(r"holds step (\d+) of a run planned for", text, "")
    return {"result": f"continued from step {continued or '?'}; last loss step {last_loss}", "ok": bool(continued),
            "continued": continued, "last": last_loss}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="on a CPU, at toy size: checks this script")
    parser.add_argument("--wheels", type=Path, help="a folder of wheels to install missing packages from")
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout: its model.py joins the benchmark")
    parser.add_argument("--budget-min", type=float, default=None, help="lesson 11's TIME_BUDGET_MIN (1.0; dry 0.5)")
    parser.add_argument("--step-timeout", type=int, default=300, help="seconds at most for one step or cell")
    parser.add_argument("--out", type=Path, help="keep the notebooks, JSON and logs here")
    parser.add_argument("--ladder-tokens", type=int, default=1_000_000, help="lesson 12's ladder: tokens a rung")
    parser.add_argument(
        "--course-model", action="store_true", help="lesson 11 trains the course's GPT2, not a learner's"
    )
    parser.add_argument("--requirements", action="store_true", help="print the pip requirements and stop")
    args = parser.parse_args()
    if args.requirements:
        print(" ".join(f"'{r}'" for r in REQUIREMENTS.values()))
        return
    args.budget_min = args.budget_min or (0.5 if args.dry_run else 1.0)
    if args.dry_run:
        os.environ["OMP_NUM_THREADS"] = "1"  # this process's children: the benchmark, pytest, the kernels
    started = time.perf_counter()
    rows: list[tuple[str, dict, float]] = []

    def step(name: str, function, *parameters) -> dict:
        print(f"\n=== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            result = function(*parameters)
        except Exception as error:  # the table says what failed; the later steps still run
            result = {"result": f"FAILED: {type(error).__name__}: {str(error).strip()[-600:]}", "ok": False}
        rows.append((name, result, time.perf_counter() - t0))
        return result

    step("packages", lambda: {"result": install(args.wheels), "ok": True})
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: use --dry-run to check the script on a CPU")
    device = "CPU (dry run)" if args.dry_run else torch.cuda.get_device_name(0)
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    out.mkdir(parents=True, exist_ok=True)
    step("benchmark", run_bench, args, out)
    step("CUDA tests (pytest -m gpu)", run_gpu_tests, args, out)
    step("lesson 12 ladder (bench_ladder_gpu.py)", run_ladder, args, out)
    folder = Path(tempfile.mkdtemp(prefix="gpu-check-lesson11-"))
    first = step(f"lesson 11, first run (budget {args.budget_min:g} min)", run_lesson, args, out, folder, True)
    checkpoints = folder / "lesson11-run" / "checkpoints"
    if first.get("kept"):
        shutil.copy(checkpoints / "gpu-check-middle.pt", checkpoints / "gpt2.pt")  # the runtime "died" there
    second = step("lesson 11, second run (continues)", run_lesson, args, out, folder, False)
    if second.get("continued") != first.get("kept"):  # it must continue from the step the first run kept
        second["ok"] = False
        second["result"] += f" (expected: from step {first.get('kept') or '? (the first run kept none)'})"
    shutil.rmtree(folder, ignore_errors=True)

    total = time.perf_counter() - started
    print(f"\n## gpu_check: {device}, torch {torch.__version__}, {total / 60:.1f} min in all\n")
    print("| step | ok | seconds | result |\n|---|---|---|---|")
    for name, result, seconds in rows:
        print(f"| {name} | {'yes' if result.get('ok') else 'NO'} | {seconds:.0f} | {result['result']} |")
    print(f"\noutputs kept in {out}")
    if not all(result.get("ok") for _, result, _ in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
