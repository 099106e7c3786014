"""course_lib.checkpoint: atomic writes, clear errors for damaged files, random generators restored."""

from __future__ import annotations

import errno
import os
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import checkpoint
from course_lib.checkpoint import CheckpointError, load_checkpoint, rng_state, save_checkpoint, set_rng_state


def test_round_trip(tmp_path):
    state = {"model": {"w": torch.arange(6.0).view(2, 3)}, "step": 7, "config": {"betas": [0.9, 0.95]}}
    path = save_checkpoint(tmp_path / "sub" / "ck.pt", state)
    loaded = load_checkpoint(path)
    assert loaded["step"] == 7 and torch.equal(loaded["model"]["w"], state["model"]["w"])
    assert loaded["config"] == {"betas": [0.9, 0.95]} and loaded["format"] == checkpoint.FORMAT
    assert [p.name for p in path.parent.iterdir()] == ["ck.pt"]  # no temporary file left behind


def test_a_crash_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "ck.pt", {"step": 1})
    good = path.read_bytes()

    def dies_half_way(obj, f):
        f.write(b"PK\x03\x04 half a zip file")
        raise KeyboardInterrupt  # e.g. the session is stopped during the write

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"step": 2})
    assert path.read_bytes() == good and load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]


def _another_file_system(path: Path) -> Path | None:
    """A writable folder on another file system than `path`'s (RAM-backed /dev/shm on Linux), or None."""
    for candidate in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        if candidate.is_dir() and os.access(candidate, os.W_OK) and candidate.stat().st_dev != path.stat().st_dev:
            return candidate
    return None


def test_os_replace_fails_across_file_systems_and_does_not_copy(tmp_path):
    """Lesson 11 says so, and it is why save_checkpoint writes its temporary file next to the checkpoint: a rename
    is atomic within one file system, and across two it raises (EXDEV) instead of falling back to a copy."""
    other = _another_file_system(tmp_path)
    if other is None:
        pytest.skip("no second writable file system here")
    target = save_checkpoint(tmp_path / "ck.pt", {"step": 1})
    with tempfile.NamedTemporaryFile(dir=other, suffix=".pt", delete=False) as f:
        f.write(b"the new checkpoint")
    try:
        with pytest.raises(OSError) as info:
            os.replace(f.name, target)
        assert info.value.errno == errno.EXDEV
        assert load_checkpoint(target)["step"] == 1 and Path(f.name).read_bytes() == b"the new checkpoint"
    finally:
        Path(f.name).unlink(missing_ok=True)


def test_truncated_or_foreign_files_raise_a_clear_error(tmp_path):
    path = save_checkpoint(tmp_path / "ck.pt", {"model": {"w": torch.randn(100, 100)}, "step": 3})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cannot read the checkpoint .*ck.pt .*truncated or corrupt"):
        load_checkpoint(path)
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(path)
    torch.save({"w": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="not a training checkpoint of this course"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")


def test_random_generators_continue_where_they_were(tmp_path):
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    save_checkpoint(tmp_path / "ck.pt", {"rng": rng_state()})
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    set_rng_state(load_checkpoint(tmp_path / "ck.pt")["rng"])
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]
    assert np.random.rand() == expected[2]
