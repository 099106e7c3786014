"""`OfflineMathExporter`: nbconvert's HTML exporter for feedback pages whose formulas show with no network.

nbconvert leaves a lesson's TeX (`$q k^\\top$`) in the page for MathJax, loaded from a CDN when the page opens:
a student reading the feedback offline saw raw TeX. Here each formula of a Markdown cell is written into the page
as MathML when the page is made (`latex2mathml`; the TeX kept as its `alttext`), which browsers draw themselves
(MathML Core: Chromium since 109, Firefox, Safari), and the page loads no MathJax. A formula latex2mathml cannot
read stays as its TeX, in code type. `tests/test_lab_rendering.py` opens a lesson's feedback page in Chromium with
every request off the machine refused and finds each formula drawn.
"""

from __future__ import annotations

import re
from html import escape

from jinja2 import pass_context
from latex2mathml.converter import convert
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

__all__ = ["OfflineMathExporter", "mathml"]

# What nbconvert's `mathjax` template macro writes into the page's head.
_MATHJAX = re.compile(r"[ \t]*<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->\n?", re.S)


def mathml(tex: str, display: str = "inline") -> str:
    """`tex` as a MathML element (`display`: "inline" or "block"), or as code when it cannot be read."""
    try:
        element = convert(tex.strip(), display=display)
    except Exception:  # latex2mathml raises what the TeX makes it raise; the page still shows the formula's text
        return f'<code class="tex">{escape(tex)}</code>'
    return element.replace("<math ", f'<math alttext="{escape(tex.strip())}" ', 1)


class _MathMLRenderer(IPythonRenderer):
    """nbconvert's Markdown renderer, with formulas as MathML instead of TeX left for MathJax."""

    def inline_math(self, body: str) -> str:
        return mathml(body, "inline")

    def block_math(self, body: str) -> str:
        return mathml(body, "block")

    def latex_environment(self, name: str, body: str) -> str:
        return mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", "block")


class OfflineMathExporter(HTMLExporter):
    """nbconvert's HTMLExporter with formulas written as MathML and no MathJax (see the module docstring)."""

    @pass_context  # as the method it replaces: the template hands it the cell being written
    def markdown2html(self, context, source):
        cell = context.get("cell", {})
        renderer = _MathMLRenderer(
            escape=False,
            attachments=cell.get("attachments", {}),
            embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text,
            exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options,
        )
        return MarkdownWithMath(renderer=renderer).render(source)

    def from_notebook_node(self, nb, resources=None, **kw):
        page, resources = super().from_notebook_node(nb, resources, **kw)
        return _MATHJAX.sub("", page), resources
