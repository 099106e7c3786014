"""The two nbgrader steps that do less work for the same result (course_lib/workflow/nbgrader_plugins/save_grades.py
and feedback_exporter.py), each against nbgrader's or nbconvert's own step on the same input. Whole runs:
tests/test_class_command.py compares a class's feedback, written in two processes with `FeedbackExporter`, with one
nbgrader process using nbconvert's exporter.
"""

from __future__ import annotations

import copy
import html
import os
import re
import runpy
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.api import Gradebook
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import SaveAutoGrades
from sqlalchemy import event
from sqlalchemy.orm import Session

from course_lib.workflow.nbgrader_plugins import (
    FeedbackExporter,
    OfflineMathExporter,
    SaveAutoGradesInOneCommit,
    offline_math,
)
from tests.nbtools import ROOT, answer_names, grade_id, read, release_path, solved, with_answer
from tests.test_course import _Config
from tests.test_nbgrader_roundtrip import ONE_WRONG

LESSON = "00_welcome"


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def test_the_course_grades_and_writes_feedback_with_them():
    config = runpy.run_path(str(ROOT / "nbgrader_config.py"), init_globals={"get_config": _Config})["c"]
    autograde = config["Autograde"]["autograde_preprocessors"]
    assert SaveAutoGradesInOneCommit in autograde and SaveAutoGrades not in autograde
    assert config["GenerateFeedback"]["exporter_class"] is FeedbackExporter


# ------------------------------------------------------------------------------------------------------------
# SaveAutoGradesInOneCommit


@pytest.fixture
def nbgraders_path(monkeypatch):
    """nbgrader runs `alembic` by name when it makes a gradebook: this interpreter's bin folder first on PATH."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def _gradebook(path, nb) -> str:
    """A gradebook holding `nb`'s graded and answer cells as lesson 00's, and one submission of it by `ann`."""
    url = f"sqlite:///{path}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment(LESSON)
        gradebook.add_notebook(LESSON, LESSON)
        for cell in nb.cells:
            meta = _meta(cell)
            if meta.get("grade"):
                gradebook.add_grade_cell(meta["grade_id"], LESSON, LESSON, max_score=meta["points"], cell_type="code")
            if meta.get("solution"):
                gradebook.add_solution_cell(meta["grade_id"], LESSON, LESSON)
        gradebook.add_student("ann")
        gradebook.add_submission(LESSON, "ann")
    return url


def _graded_notebook():
    """Lesson 00's student version with its first answer written and one test cell failed, as nbgrader's autograde
    hands it to SaveAutoGrades: passed test cells have no error output, the failed one has."""
    nb = read(release_path(LESSON))
    first = answer_names(nb)[0]
    nb = with_answer(nb, first, "def anything():\n    return 1\n")
    failed = next(c for c in nb.cells if _meta(c).get("grade") and not _meta(c).get("solution"))
    failed.outputs = [new_output("error", ename="GradingError", evalue="wrong", traceback=[])]
    return nb


def _saved(preprocessor, tmp_path, name) -> tuple[dict, int]:
    """What `preprocessor` writes to a fresh gradebook for `_graded_notebook()`, and how many commits it made."""
    nb = _graded_notebook()
    url = _gradebook(tmp_path / f"{name}.db", nb)
    commits = []

    def count(session):
        commits.append(session)

    event.listen(Session, "after_commit", count)
    try:
        resources = {"nbgrader": {"notebook": LESSON, "assignment": LESSON, "student": "ann", "db_url": url}}
        preprocessor.preprocess(nb, resources)
    finally:
        event.remove(Session, "after_commit", count)
    with Gradebook(url) as gradebook:
        submitted = gradebook.find_submission_notebook(LESSON, LESSON, "ann")
        rows = {f"grade {g.name}": (g.auto_score, g.needs_manual_grade) for g in submitted.grades}
        rows |= {f"comment {c.name}": c.auto_comment for c in submitted.comments}
    return rows, len(commits)


def test_save_autogrades_in_one_commit_writes_nbgraders_rows_in_one_commit(tmp_path, nbgraders_path):
    theirs, their_commits = _saved(SaveAutoGrades(), tmp_path, "nbgrader")
    ours, our_commits = _saved(SaveAutoGradesInOneCommit(), tmp_path, "course")
    assert ours == theirs
    # The notebook is one that tells the rows apart: a failed and a passed test, a written and an unwritten answer.
    scores = {value[0] for key, value in theirs.items() if key.startswith("grade")}
    assert 0 in scores and any(score > 0 for score in scores)
    comments = {value for key, value in theirs.items() if key.startswith("comment")}
    assert comments == {None, "No response."}
    # nbgrader commits once per row, after the commit(s) opening a gradebook makes; this step once for them all.
    opening = their_commits - len(theirs)
    assert opening in (0, 1) and our_commits == opening + 1


# ------------------------------------------------------------------------------------------------------------
# FeedbackExporter


def _feedback_ready(nb):
    """`nb` with what GetGrades puts in before the feedback template reads it (here every test passed)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        meta = _meta(cell)
        if meta.get("grade"):
            meta["score"] = meta["points"]
        if meta.get("grade") or meta.get("solution"):
            meta["comment"] = None
    return nb


def _pages(exporter_class, notebooks) -> list[str]:
    """Each notebook's feedback page, from one exporter configured as nbgrader's generate_feedback configures it."""
    converter = GenerateFeedback(coursedir=CourseDirectory(root="."))
    exporter = exporter_class(parent=converter, config=converter.config)
    resources = {"nbgrader": {"notebook": LESSON, "score": 1, "max_score": 2, "late_penalty": 0}}
    return [exporter.from_notebook_node(copy.deepcopy(nb), copy.deepcopy(resources))[0] for nb in notebooks]


@pytest.fixture(scope="module")
def notebooks():
    """Two students' lesson 00: one solved; one with an answer of its own and a Markdown cell it changed."""
    full = _feedback_ready(solved(LESSON))
    name, code, _ = ONE_WRONG[LESSON]
    other = _feedback_ready(with_answer(solved(LESSON), name, code))
    text = next(c for c in other.cells if c.cell_type == "markdown" and not grade_id(c))
    text.source = "A student's own note: **bold** and `code`."
    return full, other


def test_feedback_pages_are_the_exporters_without_memory_byte_for_byte(notebooks):
    full, other = notebooks
    theirs = _pages(OfflineMathExporter, [full, other, full])
    ours = _pages(FeedbackExporter, [full, other, full])
    assert ours == theirs
    assert "A student" in theirs[1] and "A student" not in theirs[0]
    assert "<strong>bold</strong>" in theirs[1] and "<strong>bold</strong>" not in theirs[0]


def test_feedback_converts_a_lesson_text_once_per_process(notebooks, monkeypatch):
    full, other = notebooks
    converted = []
    original = OfflineMathExporter.markdown2html

    def counted(self, context, source):
        converted.append(source)
        return original(self, context, source)

    monkeypatch.setattr(OfflineMathExporter, "markdown2html", counted)
    _pages(FeedbackExporter, [full])
    first = len(converted)
    assert first >= sum(c.cell_type == "markdown" for c in full.cells)
    _pages(FeedbackExporter, [full, full])
    assert len(converted) == 2 * first  # a new exporter (a new process) starts with nothing remembered
    converted.clear()
    _pages(FeedbackExporter, [full, other])
    assert "A student's own note: **bold** and `code`." in converted[first:]  # a changed text is converted
    assert len(converted) < 2 * first


# ------------------------------------------------------------------------------------------------------------
# OfflineMathExporter


def _formulas(nb) -> list[tuple[str, bool]]:
    """The TeX of every formula in `nb`'s Markdown, and whether it is displayed apart, as nbconvert's own Markdown
    parser hands it to MathJax."""
    found: list[tuple[str, bool]] = []

    class Recording(IPythonRenderer):
        def inline_math(self, body):
            found.append((body, False))
            return super().inline_math(body)

        def block_math(self, body):
            found.append((body, True))
            return super().block_math(body)

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            MarkdownWithMath(renderer=Recording(escape=False)).render(cell.source)
    return found


def test_formulas_are_written_as_mathml_and_no_mathjax_is_loaded(monkeypatch):
    """Lesson 04's feedback page: nbconvert's page loads MathJax from a CDN and leaves each formula's TeX for it;
    ours has each formula as MathML (its TeX kept as alttext), no MathJax, and otherwise nbconvert's page (its second
    pass made here too, so the two pages are spelled by the same writer)."""
    nb = _feedback_ready(solved("04_attention"))
    (theirs,) = _pages(HTMLExporter, [nb])
    monkeypatch.setattr(offline_math, "second_pass_changes", lambda page: True)
    (ours,) = _pages(OfflineMathExporter, [nb])
    formulas = _formulas(nb)
    assert len(formulas) >= 10
    assert "cdnjs.cloudflare.com/ajax/libs/mathjax" in theirs and "MathJax" in theirs
    assert "ajax/libs/mathjax" not in ours and "MathJax" not in ours
    alttexts = [html.unescape(t) for t in re.findall(r'<math alttext="([^"]*)"', ours)]
    assert alttexts == [tex.strip() for tex, _ in formulas]
    assert '<code class="tex">' not in ours  # every formula of the lesson could be read
    # the same page otherwise: each formula where nbconvert left its TeX, and no MathJax in the head
    for tex, block in formulas:
        marks = "$$" if block else "$"
        theirs = theirs.replace(f"{marks}{html.escape(tex, quote=False)}{marks}", "FORMULA", 1)
    theirs = re.sub(r"[ \t]*<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->\n?", "", theirs, flags=re.S)
    assert re.sub(r"<math .*?</math>", "FORMULA", ours, flags=re.S) == theirs


# ------------------------------------------------------------------------------------------------------------
# nbconvert's second pass over a page, made only where it changes something


@pytest.mark.parametrize("lesson", ["01_tokenization", "04_attention"])
def test_a_page_the_second_pass_would_not_change_is_the_same_document(lesson, monkeypatch):
    """A lesson's feedback page (diagrams with their alt text, formulas, no JupyterLab areas) skips the pass; written
    out by BeautifulSoup, as the pass writes it, it is the page the pass makes, byte for byte."""
    nb = _feedback_ready(solved(lesson))
    (ours,) = _pages(FeedbackExporter, [nb])
    assert not offline_math.second_pass_changes(ours) and ours.count("<img ") >= 2
    monkeypatch.setattr(offline_math, "second_pass_changes", lambda page: True)
    (passed,) = _pages(FeedbackExporter, [nb])
    assert ours != passed  # the pass spells some tags its own way ...
    assert str(BeautifulSoup(ours, features="html.parser")) == passed  # ... of the same document


def test_an_image_without_alt_text_still_gets_the_second_pass(monkeypatch):
    nb = _feedback_ready(solved(LESSON))
    nb.cells.insert(1, new_markdown_cell('A student\'s drawing: <img src="drawing.png" title="a > b">'))
    (ours,) = _pages(FeedbackExporter, [nb])
    assert "No description has been provided for this image" in ours
    monkeypatch.setattr(offline_math, "second_pass_changes", lambda page: True)
    assert _pages(FeedbackExporter, [nb]) == [ours]


@pytest.mark.parametrize(
    ("page", "changes"),
    [
        ('<p><img alt="a > b" src="x.png"></p>', False),
        ("<IMG SRC=x.png ALT=drawn>", False),
        ("<img src=x.png alt>", False),
        ("<img src=x.png alt/>", False),
        ("<p>no images</p>", False),
        ("<IMG SRC=x.png>", True),
        ('<img src="x.png" data-alt="y">', True),
        ("<img src='alt' title=\"alt=1\">", True),
        ('<img src="x.png', True),  # a tag the parser would read some other way
        ('<img alt="x"><img src="y.png">', True),
        ('<div class="jp-Cell-inputWrapper"></div>', True),
        ('<div class="jp-OutputArea-output"></div>', True),
    ],
)
def test_second_pass_changes_finds_what_the_pass_selects(page, changes):
    assert offline_math.second_pass_changes(page) is changes
    selected = BeautifulSoup(page, features="html.parser").select(
        "img:not([alt]), .jp-Cell-inputWrapper, .jp-OutputArea-output"
    )
    assert bool(selected) is changes or page == '<img src="x.png'  # what BeautifulSoup selects, the same
