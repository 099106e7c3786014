"""Where an autograde's time goes, and what the course's start-up savings buy (a script, not a test).

    .venv/bin/python -m tests.benchmarks.bench_autograde                      # lesson 00, 4 students, 2 rounds
    .venv/bin/python -m tests.benchmarks.bench_autograde --lesson 04_attention --students 3
    .venv/bin/python -m tests.benchmarks.bench_autograde --baseline e12afe5   # "old" = that commit's course_lib

Each round grades the same class (N copies of the reference answers) twice, alternating which path goes first:
- "old": plain `python -m nbgrader`, and the kernel started and stopped as nbgrader does by default (no extra
  kernel arguments, graceful shutdown). With `--baseline REV`, "old" also imports `course_lib` and
  `nbgrader_config.py` as they were at git revision REV (exported with `git archive`), so the whole old path
  runs beside the new one on the same machine at the same time.
- "new": the course as it is (`course.run_nbgrader`, `notebooks/nbgrader_config.py`).

Per submission: from nbgrader's "Creating/updating student" log line to the line that ends that student's
autograde ("Setting destination file permissions"), read from timestamps nbgrader writes into its log. Wall:
the whole `nbgrader autograde` command, start-up included. Medians over all submissions of all rounds.
It also times the parts of one submission outside nbgrader (kernel start, set-up cell, kernel stop) with nbclient.
"""

from __future__ import annotations

import argparse
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

import nbformat

from course_lib.workflow.course import REPO_ROOT
from tests.nbtools import ROOT, solved

_STAMP = re.compile(r"^(\d+\.\d+) (.*)$")
OLD_SETTINGS = """
# bench_autograde "old": nbgrader's defaults
c.Execute.extra_arguments = []
c.Execute.shutdown_kernel = "graceful"
"""


def per_submission_seconds(log: str) -> list[float]:
    """The seconds each submission took inside one `nbgrader autograde`, from its log (stamped lines)."""
    begun, each = None, []
    for line in log.splitlines():
        match = _STAMP.match(line)
        if not match:
            continue
        stamp, message = float(match.group(1)), match.group(2)
        if message.startswith("Creating/updating student"):
            begun = stamp
        elif message.startswith("Setting destination file permissions") and begun is not None:
            each.append(stamp - begun)
            begun = None
    return each


def _run(command: list[str], args: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full_env = dict(os.environ) | env
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    return subprocess.run([*command, *args], cwd=folder, env=full_env, capture_output=True, text=True, timeout=3600)


def build_class(folder: Path, lesson: str, students: int, path: tuple) -> None:
    command, config, env = path
    folder.mkdir(parents=True)
    shutil.copy(config, folder / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / lesson, folder / "source" / lesson)
    result = _run(command, ["generate_assignment", lesson, "--force"], folder, env)
    if result.returncode:
        raise SystemExit(f"generate_assignment failed:\n{result.stderr[-3000:]}")
    full = solved(lesson)
    for i in range(students):
        target = folder / "submitted" / f"s{i:03d}" / lesson
        target.mkdir(parents=True)
        nbformat.write(full, target / f"{lesson}.ipynb")


def autograde(
    folder: Path, lesson: str, command: list[str], env: dict[str, str], extra: tuple | list = ()
) -> tuple[float, list[float]]:
    """Wall seconds of one `nbgrader autograde`, and the seconds each submission took inside it."""
    args = ["autograde", lesson, "--force", "--NbGrader.log_format=%(created).3f %(message)s", *extra]
    start = time.perf_counter()
    result = _run(command, args, folder, env)
    wall = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"autograde failed:\n{result.stderr[-3000:]}")
    return wall, per_submission_seconds(result.stderr)


def kernel_parts(notebook: Path, extra: list[str], shutdown: str) -> dict[str, float]:
    """Seconds to start a kernel, run the set-up cell (the lesson's imports), run the rest, and stop the kernel."""
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", extra_arguments=list(extra), shutdown_kernel=shutdown
    )
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    parts = {}
    t0 = time.perf_counter()
    with client.setup_kernel():
        t1 = time.perf_counter()
        parts["kernel start"] = t1 - t0
        code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        client.execute_cell(code[0][1], code[0][0])
        t2 = time.perf_counter()
        parts["set-up cell"] = t2 - t1
        for i, cell in code[1:]:
            client.execute_cell(cell, i)
        t3 = time.perf_counter()
        parts["other cells"] = t3 - t2
    parts["kernel stop"] = time.perf_counter() - t3
    return parts


def copy_library(repo: Path, into: Path) -> Path:
    shutil.copytree(repo / "course_lib", into / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (into / "data").symlink_to(repo / "data")
    return into


def export_revision(revision: str, into: Path) -> Path:
    """`course_lib/` and `notebooks/nbgrader_config.py` as they were at `revision`, under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", revision, "course_lib", "notebooks/nbgrader_config.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "data").symlink_to(REPO_ROOT / "data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lesson", default="00_welcome")
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", help="git revision whose course_lib and nbgrader_config.py the old path uses")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-autograde-") as tmp:
        tmp = Path(tmp)
        # Both paths import a copy of course_lib (PYTHONPATH), as a class does: grading restores the package it
        # imported to how it found it, which must never be this checkout while someone is editing it.
        library = copy_library(REPO_ROOT, tmp / "current")
        new_env = {"PYTHONPATH": str(library)}
        old_config = tmp / "old_config.py"
        if args.baseline:
            old_library = export_revision(args.baseline, tmp / "baseline")
            old_env = {"PYTHONPATH": str(old_library)}
            shutil.copy(old_library / "notebooks" / "nbgrader_config.py", old_config)
        else:
            old_env = new_env
            old_config.write_text((ROOT / "nbgrader_config.py").read_text() + OLD_SETTINGS)
        paths = {
            "old": ([sys.executable, "-m", "nbgrader"], old_config, old_env),
            "new": ([sys.executable, "-m", "course_lib.workflow.startup"], ROOT / "nbgrader_config.py", new_env),
        }
        walls: dict[str, list[float]] = {"old": [], "new": []}
        each: dict[str, list[float]] = {"old": [], "new": []}
        for name, path in paths.items():
            build_class(tmp / name, args.lesson, args.students, path)
        for round_ in range(args.rounds):
            order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
            for name in order:
                command, _, env = paths[name]
                wall, seconds = autograde(tmp / name, args.lesson, command, env)
                walls[name].append(wall)
                each[name].extend(seconds)
                print(f"round {round_ + 1} {name}: wall {wall:.1f} s, per submission {[round(s, 1) for s in seconds]}")

        from course_lib.workflow.startup import KERNEL_ARGUMENTS

        sample = tmp / "new" / "submitted" / "s000" / args.lesson / f"{args.lesson}.ipynb"
        parts_old = kernel_parts(sample, [], "graceful")
        parts_new = kernel_parts(sample, KERNEL_ARGUMENTS, "immediate")

    print(f"\n{platform.node()} · {os.cpu_count()} cores · load {os.getloadavg()[0]:.2f} at the end · {args.lesson}")
    print(f"{args.students} submissions × {args.rounds} rounds per path (reference answers)")
    print(f"{'':24}{'old':>9}{'new':>9}{'old/new':>9}")
    for label, data in (("per submission (median)", each), ("autograde wall (median)", walls)):
        old, new = statistics.median(data["old"]), statistics.median(data["new"])
        print(f"{label:24}{old:8.2f}s{new:8.2f}s{old / new:8.2f}×")
    print("\none submission outside nbgrader (nbclient, one run each):")
    for part in parts_old:
        print(f"  {part:22}{parts_old[part]:8.2f}s{parts_new[part]:8.2f}s")


if __name__ == "__main__":
    main()
