"""Lesson 11 — checkpoints that survive a crash, and a resume that continues exactly where the run stopped.

A Colab session can disconnect at any moment, also in the middle of writing a checkpoint. So a checkpoint is
written to a temporary file next to the target, flushed to disk, and only then renamed over the old one with
``os.replace``: within one file system that rename is atomic (POSIX ``rename``), so at every instant the path holds
either the old complete checkpoint or the new complete one, never half of one. Across file systems ``os.replace``
raises OSError (EXDEV) rather than copying: hence the temporary file in the target's own folder.

To continue *exactly* as the uninterrupted run would, a checkpoint holds everything the next step depends on:
the model's weights, the optimizer's moments, the GradScaler's scale (fp16), the step number (the learning
rate schedule is a function of it), the data loader's position, and the random number generators' states
(dropout draws from them). ``rng_state()`` / ``set_rng_state()`` capture and restore those generators.

Shape legend: none here (whole state dicts).
"""

from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path

import numpy as np
import torch

FORMAT = "course_lib training checkpoint v1"


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be read: truncated, corrupt, or not a checkpoint of this course."""


def rng_state() -> dict:
    """The states of every random generator training may draw from: torch (CPU and each GPU), Python, NumPy."""
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        # NumPy's state holds an array; kept as a tensor so the file loads with weights_only=True
        "numpy": (np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]),
    }


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state()` captured (GPU states only when the same number of GPUs is present)."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
    version, *rest = state["python"]
    random.setstate((version, tuple(rest[0]), rest[1]))
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))


def save_checkpoint(path: str | os.PathLike, state: dict) -> Path:
    """Write `state` (a dict of tensors, numbers, strings, lists, dicts) to `path` atomically.

    Writes ``.<name>.tmp-<pid>`` in the same folder (os.replace renames atomically within one file system, and
    fails across two),
    flushes it to disk, renames it over `path`, then flushes the folder entry. If anything fails on the way,
    the temporary file is removed and `path` still holds the previous checkpoint.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint written by `save_checkpoint`; CheckpointError (naming the file) if it is damaged.

    Loads with ``weights_only=True``: a checkpoint is data, and unpickling arbitrary objects from a file
    (perhaps downloaded) could run code.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as error:
        size = path.stat().st_size
        raise CheckpointError(
            f"cannot read the checkpoint {path} ({size:,} bytes): it is truncated or corrupt "
            f"({type(error).__name__}: {str(error).splitlines()[0][:200]}). It was not written by a completed "
            "save (saves are atomic, so a crash during a save leaves the previous file); delete it or restore "
            "a copy, then resume again."
        ) from error
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path} is not a training checkpoint of this course (format {found!r})")
    return state
