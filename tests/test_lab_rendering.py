"""In a real JupyterLab, in headless Chromium: altair charts and the lessons' inlined diagrams render with no
network, nbgrader's extension loads, and the last cell of a lesson grades the notebook open in JupyterLab (and says
when what it would grade is not what was run).

Needs Debian's `chromium` (`.ci/run` installs it when it can); skipped with that reason otherwise.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest

from tests.nbtools import ROOT, execute, grade_id, release_path, solved, stop_process_group

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("lab"),  # one worker, one JupyterLab (the module's) for all of them
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]

CELL = """\
from course_lib.lesson import start_lesson
start_lesson("04_attention")
import torch
from course_lib.plotting import attention_heatmap
tokens = ["Your", "journey", "starts", "with", "one"]
weights = torch.softmax(torch.randn(5, 5, generator=torch.Generator().manual_seed(0)), dim=-1)
attention_heatmap(weights, x_labels=tokens, y_labels=tokens, title="offline check")
"""

SAVED_AS = "my lesson 00.ipynb"
FRESH = "fresh 00.ipynb"
UNSAVED = "unsaved 00.ipynb"
DIAGRAM_ALT = "The original transformer"  # lesson 04's encoder-decoder diagram, a data: URI in the student version
COLAB_LINK = "Open this lesson in Colab"
PATIENCE_MS = 300_000  # backstop for what must appear: a busy machine draws and runs slowly, it never fails a test


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyter_lab(root: Path, env: dict[str, str] | None = None):
    """A JupyterLab serving `root` (its working folder too, as `make lab-instructor` starts it in notebooks/), with
    no token and a workspace of its own; yields its address."""
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    server = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--allow-root",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root}",
            # a workspace of its own: JupyterLab would otherwise reopen the tabs of an earlier run (~/.jupyter)
            f"--LabApp.workspaces_dir={root / '.workspaces'}",
        ],
        cwd=root,
        env=None if env is None else dict(os.environ) | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(360):  # a backstop of 3 minutes: a busy machine starts JupyterLab slowly
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start within 3 minutes")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(server)


@dataclass
class Lab:
    """One JupyterLab serving `root` for the whole module; each test opens its files in a workspace of its own."""

    url: str
    root: Path
    workspace: str = ""

    def tree(self, name: str) -> str:
        """The address that opens `name` in this test's workspace: a fresh one, so no tab of an earlier test is
        reopened beside it."""
        return f"{self.url}/lab/workspaces/{self.workspace}/tree/{quote(name)}"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CELL)]
    execute(nb, timeout=600)
    nbformat.write(nb, root / "chart.ipynb")
    # A learner's finished lesson 00, saved under a name of their own: the self-grade cell must find *this* file.
    nbformat.write(solved("00_welcome"), root / SAVED_AS)
    shutil.copy(release_path("04_attention"), root / "04_attention.ipynb")
    shutil.copy(release_path("00_welcome"), root / FRESH)  # a learner's untouched copy of lesson 00
    shutil.copy(release_path("00_welcome"), root / UNSAVED)  # another, for the learner who forgets to save
    with jupyter_lab(root) as url:
        yield Lab(url, root)


@pytest.fixture
def lab(lab_server, request):
    """The module's JupyterLab, in a workspace named after the test; the kernels the test started are shut down
    after it (closing the browser leaves them running, as it does for a learner)."""
    yield Lab(lab_server.url, lab_server.root, request.node.name.removeprefix("test_")[:60])
    # A request that changes something must carry the page's XSRF token (cookie and header), as the browser's do.
    cookies = http.cookiejar.CookieJar()
    client = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    client.open(f"{lab_server.url}/lab", timeout=60).read()
    xsrf = {"X-XSRFToken": next(c.value for c in cookies if c.name == "_xsrf")}
    for session in json.load(client.open(f"{lab_server.url}/api/sessions", timeout=60)):
        url = f"{lab_server.url}/api/sessions/{session['id']}"
        client.open(urllib.request.Request(url, method="DELETE", headers=xsrf), timeout=60)


@contextmanager
def _browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        try:
            yield browser.new_page(viewport={"width": 1200, "height": 900})
        finally:
            browser.close()


def _refuse_outside(page, outside: list[str]) -> None:
    """Let the page reach the local JupyterLab only; record and refuse every other request."""

    def only_local(route):
        if route.request.url.startswith("http://127.0.0.1"):
            route.continue_()
        else:  # a CDN or any other host: refuse, as an offline laptop would
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)


def test_altair_chart_renders_offline_and_nbgrader_extension_loads(lab):
    outside = []
    with _browser() as page:
        _refuse_outside(page, outside)
        page.goto(lab.tree("chart.ipynb"))
        page.wait_for_selector(".vega-embed svg, .vega-embed canvas", timeout=PATIENCE_MS)
        # nbgrader's JupyterLab extension adds a top-level "Nbgrader" menu.
        page.get_by_text("Nbgrader", exact=True).first.wait_for(timeout=PATIENCE_MS)
    assert outside == []


def test_lesson_diagram_renders_offline(lab):
    """Lesson 04's student version shows its diagram from the notebook itself: no file beside it, no network."""
    outside = []
    with _browser() as page:
        _refuse_outside(page, outside)
        page.goto(lab.tree("04_attention.ipynb"))
        image = page.locator(f'img[alt^="{DIAGRAM_ALT}"]')
        image.wait_for(state="attached", timeout=PATIENCE_MS)
        image.scroll_into_view_if_needed(timeout=PATIENCE_MS)
        assert image.get_attribute("src").startswith("data:image/png;base64,")
        loaded = "img => img.complete && img.naturalWidth > 0"
        page.wait_for_function(loaded, arg=image.element_handle(), timeout=PATIENCE_MS)
        width = image.evaluate("img => img.naturalWidth")
        link_href = page.get_by_role("link", name=COLAB_LINK).first.get_attribute("href")
    committed = (ROOT.parent / "images" / "encoder_decoder_data_flow.png").read_bytes()
    assert width == int.from_bytes(committed[16:20], "big")  # the PNG header's width: the whole image decoded
    assert outside == []  # nothing from the web: the Colab link is text, not a badge image that would break offline
    assert link_href.startswith("https://colab.research.google.com/github/")


def test_the_last_cell_grades_the_notebook_open_in_jupyterlab(lab):
    """Run All in a real JupyterLab: the self-grade cell finds the saved notebook through the kernel's session."""
    with _browser() as page:
        page.goto(lab.tree(SAVED_AS))
        page.locator(".jp-Notebook").first.wait_for(timeout=PATIENCE_MS)
        page.get_by_text("| Idle").first.wait_for(timeout=PATIENCE_MS)  # the status bar: the kernel is up
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()  # lesson 00's text names it too
        report = page.get_by_text("Lesson 00_welcome: 15 / 15 points").first
        try:
            report.wait_for(timeout=2 * PATIENCE_MS)  # executes the lesson, then nbgrader generate + autograde
        except Exception:
            page.screenshot(path="/tmp/lab_selfgrade.png", full_page=True)
            raise


def test_run_all_on_a_fresh_lesson_reaches_the_last_cell(lab):
    """Run All in a real JupyterLab on an untouched student version: each failing check shows its message and
    the run goes on to the last cell, whose self-grade gives the unfinished exercises 0."""
    with _browser() as page:
        page.goto(lab.tree(FRESH))
        page.locator(".jp-Notebook").first.wait_for(timeout=PATIENCE_MS)
        page.get_by_text("| Idle").first.wait_for(timeout=PATIENCE_MS)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        # the menu's entry (lesson 00's text names it too)
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        report = page.get_by_text("Lesson 00_welcome: 0 / 15 points").first
        try:
            report.wait_for(timeout=2 * PATIENCE_MS)
        except Exception:
            page.screenshot(path="/tmp/lab_run_all.png", full_page=True)
            raise
        # JupyterLab renders only the cells in view, so the checks' messages are read from the report, which
        # the last cell shows only if Run All got past every failing check (nbclient's test reads each one).
        table = page.locator(".jp-RenderedMarkdown", has_text="Lesson 00_welcome: 0 / 15 points").first.inner_text()
    for exercise in (
        "count_characters",
        "next_token_pairs",
        "normalize_rows",
        "pairwise_distances",
        "gradient_descent",
    ):
        assert f"{exercise}\t0 / 3\t{exercise}" in table and "not written yet" in table, table


def _run_cell(page, containing: str) -> None:
    """Click into the code cell that contains `containing` and run it (Shift+Enter)."""
    cell = page.locator(".jp-CodeCell", has_text=containing).first
    cell.scroll_into_view_if_needed(timeout=PATIENCE_MS)
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")


def test_the_last_cell_asks_to_save_before_it_grades_an_answer_that_was_only_run(lab):
    """A correct answer written and run but not saved: the self-grade cell says to save first (it used to grade
    the file on disk: 0 points, "not written yet"); after Ctrl+S, the same cell gives the exercise its points."""
    answer = next(c.source for c in solved("00_welcome").cells if grade_id(c) == "count_characters")
    with _browser() as page:
        page.goto(lab.tree(UNSAVED))
        page.locator(".jp-Notebook").first.wait_for(timeout=PATIENCE_MS)
        page.get_by_text("| Idle").first.wait_for(timeout=PATIENCE_MS)
        _run_cell(page, "start_lesson(")  # the set-up cell
        cell = page.locator(".jp-CodeCell", has_text="def count_characters").first
        cell.scroll_into_view_if_needed(timeout=PATIENCE_MS)
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(answer)  # typed as one paste: no auto-indent
        page.keyboard.press("Shift+Enter")
        try:
            _run_cell(page, 'grade_this_notebook("00_welcome")')
            page.get_by_text("your saved notebook differs from what you ran in count_characters").first.wait_for(
                timeout=PATIENCE_MS
            )
            assert "raise NotImplementedError" in _saved_answer(lab.root / UNSAVED)  # nothing saved it meanwhile
            page.keyboard.press("Control+s")
            for _ in range(120):
                if "raise NotImplementedError" not in _saved_answer(lab.root / UNSAVED):
                    break
                time.sleep(0.5)
            _run_cell(page, 'grade_this_notebook("00_welcome")')
            report = page.locator(".jp-RenderedMarkdown", has_text="Lesson 00_welcome: 3 / 15 points").first
            report.wait_for(timeout=2 * PATIENCE_MS)
            table = report.inner_text()
        except Exception:
            page.screenshot(path="/tmp/lab_unsaved.png", full_page=True)
            raise
    assert "count_characters\t3 / 3\t✓" in table, table


def _saved_answer(path: Path) -> str:
    return next(c.source for c in nbformat.read(path, as_version=4).cells if grade_id(c) == "count_characters")
