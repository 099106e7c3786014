"""The README's first command: `make lab` opens the learner's copies of the lessons in work/, without nbgrader's
instructor tools; `make lab-instructor` opens the nbgrader course root with them."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from course_lib.workflow.workspace import kernel_metadata
from tests.nbtools import LESSONS, read, stop_process_group

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (ROOT / ".venv" / ".installed").exists(), reason="needs the Makefile's .venv (make test)"),
]
FORMGRADER_LOADED = "nbgrader.server_extensions.formgrader | extension was successfully loaded"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _make(target: str, log: Path, *extra: str):
    """Run `make TARGET` with a fresh port and no token; yield (base URL, root listing) once it answers."""
    port = _free_port()
    args = f"LAB_ARGS=--no-browser --port={port} --IdentityProvider.token= --ServerApp.password= --allow-root"
    args += " --LabApp.expose_app_in_browser=True"  # window.jupyterapp: the page can say which plugins it loaded
    # a workspace of its own: JupyterLab would otherwise reopen the tabs of an earlier run (~/.jupyter)
    args += f" --LabApp.workspaces_dir={log.parent / 'workspaces'}"
    with open(log, "w") as out:
        lab = subprocess.Popen(
            ["make", target, args, *extra], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        for _ in range(600):  # a backstop of 5 minutes: a busy machine starts JupyterLab slowly, never fails it
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/", timeout=2) as r:
                    listing = json.load(r)
                break
            except OSError:
                assert lab.poll() is None, log.read_text()
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not answer within 5 minutes:\n{log.read_text()}")
        yield f"http://127.0.0.1:{port}", sorted(item["name"] for item in listing["content"])
    finally:
        stop_process_group(lab)


def test_make_lab_opens_the_learners_copies_without_instructor_tools(tmp_path):
    work = tmp_path / "work"
    mine = work / "00_welcome" / "00_welcome.ipynb"
    mine.parent.mkdir(parents=True)
    mine.write_text("a learner's file: never overwritten", encoding="utf-8")
    with _make("lab", tmp_path / "lab.log", f"WORK={work}") as (url, listing):
        assert listing == LESSONS  # the server's root is work/: the lessons, nothing else
        if CHROMIUM is not None:
            _shows_lessons_and_no_nbgrader(url)
    assert mine.read_text(encoding="utf-8") == "a learner's file: never overwritten"
    for lesson in LESSONS[1:]:  # the student version, with the kernel's metadata (tests/test_lab_clean.py)
        copy = read(work / lesson / f"{lesson}.ipynb")
        assert copy.cells == read(ROOT / "notebooks" / "release" / lesson / f"{lesson}.ipynb").cells
        assert copy.metadata["kernelspec"] == kernel_metadata()["kernelspec"]
    text = (tmp_path / "lab.log").read_text()
    assert "nbgrader.server_extensions" not in text, text  # no nbgrader server extension was loaded
    assert not (ROOT / "work").exists() or (ROOT / "work").is_dir()  # WORK= was honoured; nothing else written


PATIENCE_MS = 300_000  # backstop for what must appear: a busy machine draws the page slowly, it never fails it
# Once the app is restored every plugin it will ever load is activated; a disabled one is never registered.
PLUGINS = "async () => { await window.jupyterapp.restored; return window.jupyterapp.listPlugins(); }"


def _page(url: str, waiting_for: str, then_shown: str | None = None) -> tuple[list[str], str, list[str]]:
    """In headless Chromium, once JupyterLab is restored and `waiting_for` is listed (and `then_shown` is shown):
    the file browser's names, the page's text and the ids of the frontend plugins the app loaded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{url}/lab")
            page.wait_for_function("() => window.jupyterapp !== undefined", timeout=PATIENCE_MS)
            plugins = page.evaluate(PLUGINS)
            page.locator(".jp-DirListing-item", has_text=waiting_for).wait_for(timeout=PATIENCE_MS)
            if then_shown is not None:
                page.get_by_text(then_shown, exact=True).first.wait_for(timeout=PATIENCE_MS)
            names = page.locator(".jp-DirListing-itemName").all_inner_texts()
            body = page.locator("body").inner_text()
        finally:
            browser.close()
    return [n.strip() for n in names], body, plugins


def _nbgrader_plugins(plugins: list[str]) -> list[str]:
    return [p for p in plugins if p.startswith("@jupyter/nbgrader")]


def _shows_lessons_and_no_nbgrader(url: str) -> None:
    """The file browser lists the lessons; no nbgrader plugin was loaded, so no menu, sidebar or exchange error."""
    names, body, plugins = _page(url, "04_attention")
    assert sorted(names) == LESSONS
    assert len(plugins) > 20 and _nbgrader_plugins(plugins) == [], plugins
    for instructor_tool in ("Nbgrader", "Create Assignment", "Error fetching courses", "Formgrader"):
        assert instructor_tool not in body


def test_make_lab_instructor_opens_the_course_root_with_nbgrader(tmp_path):
    with _make("lab-instructor", tmp_path / "lab.log") as (url, listing):
        assert {"source", "release", "nbgrader_config.py"} <= set(listing)
        if CHROMIUM is not None:
            _, body, plugins = _page(url, "release", then_shown="Nbgrader")  # the menu the learner's lab must not show
            assert "Nbgrader" in body and _nbgrader_plugins(plugins), plugins
    text = (tmp_path / "lab.log").read_text()
    # nbgrader's server extension found the course root and its config (it logs these problems otherwise).
    assert FORMGRADER_LOADED in text
    assert "No nbgrader_config.py file found" not in text and "not a subdirectory" not in text
