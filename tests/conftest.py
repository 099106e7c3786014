"""Fixtures shared by the tests (pytest finds them here without an import)."""

from __future__ import annotations

import os

# `make test` runs two xdist workers on CI's two cores. PyTorch's default of one compute thread per core makes two
# busy workers stall each other (measured for lesson 09's model on the shared 2-core machine: 2 threads per process
# were 9.4x slower per step than 1). So each worker computes on one thread, and so does every kernel and nbgrader
# process it starts (they inherit OMP_NUM_THREADS). Set before torch is imported; an explicit setting wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib.grading.kit import guard  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def no_guard(monkeypatch):
    """Switch the from-scratch guard off, so the reference objects themselves can be graded."""
    monkeypatch.setattr(guard, "forbidden", lambda reference: guard.Forbidden())
