"""A lesson `make lab` copied into work/ opens in a real JupyterLab (headless Chromium) without being marked as
modified; the student version copied byte for byte, as `make lab` did before, opens marked (JupyterLab wrote the
kernel's `kernelspec` display name and `language_info` into it), so the check can fail."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_lib.workflow.workspace import copy_new_lessons
from tests.nbtools import ROOT, release_path, stop_process_group

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LESSON = "00_welcome"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _modified_after_opening(folder: Path, names: list[str]) -> dict[str, bool]:
    """Open each notebook in JupyterLab, wait until its kernel is idle, and say whether its tab is marked dirty."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    args = [str(jupyter), "lab", "--no-browser", f"--port={port}", "--IdentityProvider.token=", "--allow-root"]
    args += ["--ServerApp.password=", f"--ServerApp.root_dir={folder}", f"--LabApp.workspaces_dir={folder}/.ws"]
    with open(folder / "lab.log", "w") as log:
        lab = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    found = {}
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/", timeout=2).close()
                break
            except OSError:
                assert lab.poll() is None, (folder / "lab.log").read_text()
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                for name in names:
                    page = browser.new_page()
                    page.goto(f"http://127.0.0.1:{port}/lab/tree/{name}")
                    page.get_by_text("| Idle").first.wait_for(timeout=180_000)
                    time.sleep(3)  # the kernel's info has arrived by now; give the model time to take it in
                    tab = page.locator(".lm-TabBar-tab.jp-mod-current").first
                    found[name] = "jp-mod-dirty" in (tab.get_attribute("class") or "")
                    page.close()
            finally:
                browser.close()
    finally:
        stop_process_group(lab)
    return found


def test_the_learners_copy_opens_unmodified(tmp_path):
    work = tmp_path / "work"
    copy_new_lessons(ROOT / "release", work)
    shutil.copy(release_path(LESSON), work / LESSON / "byte_for_byte.ipynb")
    found = _modified_after_opening(work, [f"{LESSON}/{LESSON}.ipynb", f"{LESSON}/byte_for_byte.ipynb"])
    assert found == {f"{LESSON}/{LESSON}.ipynb": False, f"{LESSON}/byte_for_byte.ipynb": True}
