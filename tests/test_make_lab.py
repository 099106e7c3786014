"""The README's first command: `make lab` starts JupyterLab on the course, with nbgrader's extension working."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.nbtools import LESSONS, stop_process_group

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (ROOT / ".venv" / ".installed").exists(), reason="needs the Makefile's .venv (make test)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_the_student_versions_with_nbgrader(tmp_path):
    port = _free_port()
    log = tmp_path / "lab.log"
    args = f"LAB_ARGS=--no-browser --port={port} --IdentityProvider.token= --ServerApp.password= --allow-root"
    with open(log, "w") as out:
        lab = subprocess.Popen(
            ["make", "lab", args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/release", timeout=2) as r:
                    listing = json.load(r)
                break
            except OSError:
                assert lab.poll() is None, log.read_text()
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not answer within 2 minutes:\n{log.read_text()}")
        assert sorted(item["name"] for item in listing["content"]) == LESSONS
        # nbgrader's server extension found the course root and its config (it logs these problems otherwise).
        text = log.read_text()
        assert "nbgrader.server_extensions.formgrader | extension was successfully loaded" in text
        assert "No nbgrader_config.py file found" not in text and "not a subdirectory" not in text
    finally:
        stop_process_group(lab)
