"""Fixtures shared by the tests (pytest finds them here without an import)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# `make test` runs two xdist workers on CI's two cores. PyTorch's default of one compute thread per core makes two
# busy workers stall each other (measured for lesson 09's model on the shared 2-core machine: 2 threads per process
# were 9.4x slower per step than 1). So each worker computes on one thread, and so does every kernel and nbgrader
# process it starts (they inherit OMP_NUM_THREADS). Set before torch is imported; an explicit setting wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib.grading.kit import guard  # noqa: E402
from course_lib.workflow.kernels import WAKEUP_LOG_ENV  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def no_guard(monkeypatch):
    """Switch the from-scratch guard off, so the reference objects themselves can be graded."""
    monkeypatch.setattr(guard, "forbidden", lambda exercise: guard.Forbidden())


def pytest_configure(config):
    # Kernel replies that zmq's poll did not announce (course_lib/workflow/kernels.py, WatchfulChannel) are written
    # to one file for the whole run; the xdist workers and what they start inherit its name.
    if not hasattr(config, "workerinput") and WAKEUP_LOG_ENV not in os.environ:
        config._wakeup_folder = tempfile.mkdtemp(prefix="course-wakeups-")  # removed when the run ends
        os.environ[WAKEUP_LOG_ENV] = str(Path(config._wakeup_folder) / "missed.log")


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput"):
        return
    log = Path(os.environ[WAKEUP_LOG_ENV])  # set by pytest_configure, or by whoever ran the tests
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    terminalreporter.write_line(
        f"kernel replies read only when a 1 s poll ran out (zmq missed the wake-up): {len(lines)}"
        + "".join(f"\n  {line}" for line in lines[:20])
    )


def pytest_unconfigure(config):
    # The run's folder for that file, once the summary has read it (a folder named by whoever ran us stays theirs).
    folder = getattr(config, "_wakeup_folder", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(WAKEUP_LOG_ENV, None)
