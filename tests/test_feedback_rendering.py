"""A student's feedback page, opened in headless Chromium with every request that would leave the machine refused
(as on a laptop without network): lesson 04's formulas are drawn as mathematics, none shows as raw TeX, and the page
asks for nothing outside (nbconvert's page asked a CDN for MathJax and showed raw TeX offline).

The page is made as nbgrader's generate_feedback makes it, with the course's exporter (tests/test_nbgrader_fast.py
has the same pages from the class command's processes). Needs Debian's `chromium` (`.ci/run` installs it when it
can); skipped with that reason otherwise.
"""

from __future__ import annotations

import copy
import shutil

import pytest
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory

from course_lib.workflow.nbgrader_plugins import FeedbackExporter
from tests.nbtools import solved

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]
LESSON = "04_attention"


def _feedback_page(nb) -> str:
    """The feedback page of `nb` (every test passed), as generate_feedback configures the course's exporter."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            meta["score"] = meta["points"]
        if meta.get("grade") or meta.get("solution"):
            meta["comment"] = None
    converter = GenerateFeedback(coursedir=CourseDirectory(root="."))
    exporter = FeedbackExporter(parent=converter, config=converter.config)
    resources = {"nbgrader": {"notebook": LESSON, "score": 31, "max_score": 31, "late_penalty": 0}}
    return exporter.from_notebook_node(nb, resources)[0]


def test_feedback_formulas_render_with_no_network(tmp_path):
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / f"{LESSON}.html"
    page_file.write_text(_feedback_page(solved(LESSON)), encoding="utf-8")
    outside: list[str] = []

    def only_this_file(route):
        if route.request.url.startswith(("file://", "data:")):
            route.continue_()
        else:  # a CDN or any other host: refused, as offline
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.route("**/*", only_this_file)
            page.goto(page_file.as_uri(), wait_until="load")
            drawn = page.evaluate(
                """() => [...document.querySelectorAll('math')].map(m => {
                    const box = m.getBoundingClientRect();
                    return {display: getComputedStyle(m).display, width: box.width, height: box.height,
                            tex: m.getAttribute('alttext')};
                })"""
            )
            text = page.inner_text("body")
            first = page.locator("math").first
            first.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "feedback-formula.png"))  # for a person reading a failure
        finally:
            browser.close()
    assert outside == []
    assert len(drawn) >= 10
    for formula in drawn:
        # laid out by the browser's MathML engine ("math" or "block math"; a browser without it says "inline")
        assert formula["display"] in ("math", "block math", "inline math"), formula
        assert formula["width"] > 0 and formula["height"] > 0, formula
    # no formula's TeX is left as text on the page
    assert "\\sqrt" not in text and "\\top" not in text and "$q" not in text
