"""Two of nbgrader's steps, doing less work for the same result (notebooks/nbgrader_config.py plugs them in;
how much they save: tests/benchmarks/RESULTS_class.md).

- `SaveAutoGradesInOneCommit` (autograde): nbgrader's SaveAutoGrades commits the gradebook once per graded cell and
  once per answer cell, and on a disk other jobs are writing to, each commit can wait milliseconds for the disk
  (on the course's shared 2-core machine the 443 commits of one worker's 10 submissions took 3.1 s in one run and
  under a quarter of a second in another). This one writes the same rows, with the same values, in one transaction
  per notebook.
- `FeedbackExporter` (generate_feedback): nbconvert's HTML exporter, remembering what each Markdown text and each
  highlighted code cell became in HTML. A lesson's text and code are the same in every student's notebook, so a
  feedback process converts them once instead of once per student (measured on lesson 01: 398 Markdown
  conversions for 10 students became 41); the pages are the ones the plain exporter writes, byte for byte
  (tests/test_nbgrader_fast.py).
"""

from __future__ import annotations

import functools
import json

from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades

__all__ = ["FeedbackExporter", "SaveAutoGradesInOneCommit"]


class _CommitAtTheEnd:
    """The gradebook's session, except that `commit` only flushes: the changes go to the database within one open
    transaction, which `SaveAutoGradesInOneCommit` commits once."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def __getattr__(self, name):
        return getattr(self._session, name)


class SaveAutoGradesInOneCommit(SaveAutoGrades):
    """nbgrader's SaveAutoGrades (every graded cell's score, every answer cell's comment), in one commit."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id = info["notebook"], info["assignment"]
        self.student_id, self.db_url = info["student"], info["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            session = self.gradebook.db
            self.gradebook.db = _CommitAtTheEnd(session)  # what nbgrader's per-cell steps commit, only flushed
            # Each cell as nbgrader's SaveAutoGrades does it (its preprocess_cell, _add_score and _add_comment).
            nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)
            session.commit()
            self.gradebook.db = session
        return nb, resources


def _key(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter, remembering each Markdown text's and each code cell's HTML (see the module
    docstring). What the HTML is made from is the key: for Markdown the text, the cell's attachments, and the
    notebook's folder where images are embedded; for code the lexer, the formatter's options, the source, its
    language and the cell's metadata."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._markdown: dict[tuple, str] = {}
        self._code: dict[tuple, str] = {}

    def register_filter(self, name, jinja_filter):
        # HTMLExporter makes a highlighter for each notebook (with the notebook's lexer) and registers it here.
        if name == "highlight_code" and isinstance(jinja_filter, Highlight2HTML):
            jinja_filter = functools.partial(self._highlight, jinja_filter)
        return super().register_filter(name, jinja_filter)

    def _highlight(self, highlighter: Highlight2HTML, source, language=None, metadata=None):
        options = _key(highlighter.extra_formatter_options)
        key = (highlighter.pygments_lexer, options, source, language, _key(metadata))
        if key not in self._code:
            self._code[key] = highlighter(source, language, metadata)
        return self._code[key]

    @pass_context  # as the method it extends: the template hands it the cell being written
    def markdown2html(self, context, source):
        cell = context.get("cell", {})
        attachments = cell.get("attachments", {})
        path = context.get("resources", {}).get("metadata", {}).get("path", "") if self.embed_images else ""
        key = (source, _key(attachments), path)
        if key not in self._markdown:
            self._markdown[key] = super().markdown2html(context, source)
        return self._markdown[key]
