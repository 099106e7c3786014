"""`OfflineMathExporter`: nbconvert's HTML exporter for feedback pages whose formulas show with no network.

nbconvert leaves a lesson's TeX (`$q k^\\top$`) in the page for MathJax, loaded from a CDN when the page opens:
a student reading the feedback offline saw raw TeX. Here each formula of a Markdown cell is written into the page
as MathML when the page is made (`latex2mathml`; the TeX kept as its `alttext`), which browsers draw themselves
(MathML Core: Chromium since 109, Firefox, Safari), and the page loads no MathJax. A formula latex2mathml cannot
read stays as its TeX, in code type. `tests/test_lab_rendering.py` opens a lesson's feedback page in Chromium with
every request off the machine refused and finds each formula drawn.

It also skips nbconvert's second pass over the page where that pass would change nothing. nbconvert's HTML exporter
parses every finished page with BeautifulSoup to give images without alternative text one and to make JupyterLab's
cell and output areas focusable, then writes the whole tree out again: more than half of a feedback page's time
(lesson 01: 3,600 tags a page). A feedback page has no JupyterLab areas (nbgrader's template is the classic one), and
the lessons' images carry their alternative text, so here the page goes through that pass only when it holds an image
without one or one of those areas. The page is then the template's output as it is: the same document, which
BeautifulSoup would have written out with its own spelling of the same tags (`tests/test_nbgrader_fast.py`).
"""

from __future__ import annotations

import contextlib
import re
from html import escape

import nbconvert.exporters.html as nbconvert_html
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


# What nbconvert's second pass looks for (HTMLExporter.from_notebook_node): JupyterLab's cell and output areas, and
# images without an alt attribute. A tag is read as the HTML parser reads it: quoted values may hold anything.
_LAB_AREAS = re.compile(r"jp-Cell-inputWrapper|jp-OutputArea-output")
_IMG_START = re.compile(r"<img\b", re.I)
_IMG_TAG = re.compile(r"""<img\b((?:[^>"']|"[^"]*"|'[^']*')*)>""", re.I)
_QUOTED = re.compile(r""""[^"]*"|'[^']*'""")
_ALT = re.compile(r"(?:^|\s)alt(?:\s*=|\s|/|$)", re.I)


def second_pass_changes(page: str) -> bool:
    """Whether nbconvert's second pass over `page` would add anything: an image tag without alt text, or a tag that
    can be read no other way, or JupyterLab's areas (their class names anywhere)."""
    if _LAB_AREAS.search(page):
        return True
    tags = _IMG_TAG.findall(page)
    if len(tags) != len(_IMG_START.findall(page)):
        return True
    return any(not _ALT.search(_QUOTED.sub("", attributes)) for attributes in tags)


class _Unchanged(str):
    """The page as the template wrote it, for nbconvert's second pass: nothing in it matches what the pass selects."""

    def select(self, selector):
        return []


@contextlib.contextmanager
def _second_pass_only_where_needed():
    """While nbconvert's exporter writes a page here, its BeautifulSoup parses only pages the pass would change."""
    soup = nbconvert_html.BeautifulSoup

    def parse_where_needed(page: str, features: str):
        return soup(page, features=features) if second_pass_changes(page) else _Unchanged(page)

    nbconvert_html.BeautifulSoup = parse_where_needed
    try:
        yield
    finally:
        nbconvert_html.BeautifulSoup = soup


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
        with _second_pass_only_where_needed():
            page, resources = super().from_notebook_node(nb, resources, **kw)
        return _MATHJAX.sub("", page), resources
