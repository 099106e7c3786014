"""`FeedbackExporter`, generate_feedback's exporter: the HTML exporter whose formulas show offline
(`OfflineMathExporter`), remembering what each Markdown text and each highlighted code cell became in HTML. A
lesson's text and code are the same in every student's notebook, so a feedback process converts them once instead of
once per student (measured on lesson 01: 398 Markdown conversions for 10 students became 41); the pages are the ones
the exporter without this memory writes, byte for byte (tests/test_nbgrader_fast.py).
"""

from __future__ import annotations

import functools
import json

from jinja2 import pass_context
from nbconvert.filters.highlight import Highlight2HTML

from course_lib.workflow.nbgrader_plugins.offline_math import OfflineMathExporter

__all__ = ["FeedbackExporter"]


def _key(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class FeedbackExporter(OfflineMathExporter):
    """`OfflineMathExporter`, remembering each Markdown text's and each code cell's HTML (see the module
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
