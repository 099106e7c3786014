"""`WrapLongLines`, in generate_feedback (after CSSHTMLHeaderPreprocessor): outputs wrap at the page's edge instead of
being cut off there (a grader's message is one long line)."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["WRAP_CSS", "WrapLongLines"]

WRAP_CSS = """
/* course: long grading messages wrap at the page's edge (course_lib.workflow.nbgrader_plugins.WrapLongLines) */
div.output_area pre, div.output_subarea pre { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


class WrapLongLines(NbGraderPreprocessor):
    """Add a style sheet to the feedback page that wraps long output lines."""

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(WRAP_CSS)
        return nb, resources
