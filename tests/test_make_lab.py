"""The README's first command: `make lab` opens the learner's copies of the lessons in work/, on lesson 00, without
nbgrader's instructor tools and without JupyterLab's "Jupyter news" question; `make lab-instructor` opens the
nbgrader course root with those tools."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
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
LEARNER = ROOT / "jupyter" / "learner"
FIRST_LESSON = "00_welcome/00_welcome.ipynb"
NEWS = "@jupyterlab/apputils-extension:announcements"  # asks whether to fetch Jupyter's news, then fetches it


def test_the_learners_settings_open_lesson_00_and_switch_off_the_news_question():
    server = json.loads((LEARNER / "jupyter_server_config.json").read_text())
    assert server["LabApp"]["default_url"] == f"/lab/tree/{FIRST_LESSON}"
    assert (ROOT / "notebooks" / "release" / FIRST_LESSON).is_file()  # what the workspace copies into work/
    page = json.loads((LEARNER / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"] == {"@jupyter/nbgrader": True, NEWS: True}


def _landing(url: str) -> str:
    """Where the server sends a browser that asks for its root (the page `jupyter lab` opens)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        return urllib.parse.urlsplit(response.getheader("Location") or "").path if response.status in (301, 302) else ""
    finally:
        connection.close()


def _page_config(url: str) -> dict:
    """The configuration JupyterLab's page is served with (its disabled plugins among it)."""
    with urllib.request.urlopen(f"{url}/lab", timeout=30) as response:
        html = response.read().decode()
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "the /lab page carries no configuration"
    return json.loads(found.group(1))


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
    mine = work / LESSONS[1] / f"{LESSONS[1]}.ipynb"  # lesson 00 stays the course's: it is where the lab opens
    mine.parent.mkdir(parents=True)
    mine.write_text("a learner's file: never overwritten", encoding="utf-8")
    with _make("lab", tmp_path / "lab.log", f"WORK={work}") as (url, listing):
        assert listing == LESSONS  # the server's root is work/: the lessons, nothing else
        assert _landing(url) == f"/lab/tree/{FIRST_LESSON}"  # lesson 00 opens, not the Launcher
        assert NEWS in _page_config(url)["disabledExtensions"]
        if CHROMIUM is not None:
            _shows_lessons_and_no_nbgrader(url)
    assert mine.read_text(encoding="utf-8") == "a learner's file: never overwritten"
    for lesson in [LESSONS[0], *LESSONS[2:]]:  # the student version, with the kernel's metadata (test_lab_clean.py)
        copy = read(work / lesson / f"{lesson}.ipynb")
        assert copy.cells == read(ROOT / "notebooks" / "release" / lesson / f"{lesson}.ipynb").cells
        assert copy.metadata["kernelspec"] == kernel_metadata()["kernelspec"]
    text = (tmp_path / "lab.log").read_text()
    assert "nbgrader.server_extensions" not in text, text  # no nbgrader server extension was loaded
    assert not (ROOT / "work").exists() or (ROOT / "work").is_dir()  # WORK= was honoured; nothing else written


PATIENCE_MS = 300_000  # backstop for what must appear: a busy machine draws the page slowly, it never fails it
# Once the app is restored every plugin it will ever load is activated; a disabled one is never registered.
PLUGINS = "async () => { await window.jupyterapp.restored; return window.jupyterapp.listPlugins(); }"


def _page(
    url: str, waiting_for: str | None, then_shown: str | None = None, path: str = "/lab"
) -> tuple[list[str], str, list[str], list[str]]:
    """In headless Chromium, at `path`, once JupyterLab is restored and `waiting_for` is listed in the file browser
    (unless None) and `then_shown` is shown (a text, or a CSS selector when it starts with "."): the file browser's
    names, the page's text, the ids of the frontend plugins the app loaded and the labels of the main area's tabs."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{url}{path}")
            page.wait_for_function("() => window.jupyterapp !== undefined", timeout=PATIENCE_MS)
            plugins = page.evaluate(PLUGINS)
            if waiting_for is not None:
                page.locator(".jp-DirListing-item", has_text=waiting_for).wait_for(timeout=PATIENCE_MS)
            if then_shown is not None:
                shown = (
                    page.locator(then_shown) if then_shown.startswith(".") else page.get_by_text(then_shown, exact=True)
                )
                shown.first.wait_for(timeout=PATIENCE_MS)
            names = page.locator(".jp-DirListing-itemName").all_inner_texts()
            body = page.locator("body").inner_text()
            tabs = page.locator("#jp-main-dock-panel .lm-TabBar-tabLabel").all_inner_texts()
        finally:
            browser.close()
    return [n.strip() for n in names], body, plugins, [t.strip() for t in tabs]


def _nbgrader_plugins(plugins: list[str]) -> list[str]:
    return [p for p in plugins if p.startswith("@jupyter/nbgrader")]


def _shows_lessons_and_no_nbgrader(url: str) -> None:
    """The file browser lists the lessons; opened where `make lab` opens it, the page shows lesson 00 alone (no
    Launcher); neither nbgrader's plugins (no menu, sidebar or exchange error) nor the news question were loaded."""
    names, body, plugins, _ = _page(url, "04_attention")
    assert sorted(names) == LESSONS
    title = ".jp-RenderedMarkdown h1:has-text('Lesson 00 — How this course works')"  # drawn, not only its tab
    _, body, plugins, tabs = _page(url, None, then_shown=title, path=_landing(url))
    assert tabs == ["00_welcome.ipynb"], tabs
    assert len(plugins) > 20 and _nbgrader_plugins(plugins) == [] and NEWS not in plugins, plugins
    for instructor_tool in ("Nbgrader", "Create Assignment", "Error fetching courses", "Formgrader"):
        assert instructor_tool not in body


def test_make_lab_instructor_opens_the_course_root_with_nbgrader(tmp_path):
    with _make("lab-instructor", tmp_path / "lab.log") as (url, listing):
        assert {"source", "release", "nbgrader_config.py"} <= set(listing)
        if CHROMIUM is not None:
            _, body, plugins, _ = _page(
                url, "release", then_shown="Nbgrader"
            )  # the menu the learner's lab must not show
            assert "Nbgrader" in body and _nbgrader_plugins(plugins), plugins
    text = (tmp_path / "lab.log").read_text()
    # nbgrader's server extension found the course root and its config (it logs these problems otherwise).
    assert FORMGRADER_LOADED in text
    assert "No nbgrader_config.py file found" not in text and "not a subdirectory" not in text
