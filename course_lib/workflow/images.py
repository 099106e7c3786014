"""Diagrams in student notebooks: markdown references to the repository's images/ become inline data: URIs.

An instructor source shows a diagram with a path relative to itself,

    ![The encoder-decoder transformer](../../../images/encoder_decoder_data_flow.png)

which JupyterLab renders from notebooks/source/<id>/. Colab renders neither relative paths nor cell
attachments, but it does render a `data:` URI in markdown, so `make release` replaces each such reference in
the student version by the PNG itself, base64-encoded. Other images and links (the Colab badge, web
addresses, links between notebooks) are left alone. Paths are resolved against the folder passed in, never
against this module's location.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat

__all__ = ["IMAGE_REFERENCE", "MissingImageError", "inline_images", "inline_images_in_file"]

# ![alt](../images/name.png), with any number of ../ in front: a repository image, named relative to the notebook.
IMAGE_REFERENCE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<path>(?:\.\./)+images/[\w.-]+\.png)\)")


class MissingImageError(FileNotFoundError):
    """A notebook refers to a repository image that does not exist."""


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def inline_images(nb: nbformat.NotebookNode, base: Path, notebook: str = "notebook") -> int:
    """Replace, in place, every markdown reference to a repository image by a data: URI; return how many.

    `base` is the folder the references are relative to (the instructor source's folder, even when `nb` is a
    copy elsewhere); `notebook` names the notebook in the error raised for a missing image.
    """
    count = 0

    def embed(match: re.Match) -> str:
        nonlocal count
        png = Path(base) / match["path"]
        if not png.is_file():
            raise MissingImageError(
                f"{notebook} shows {match['path']}, but there is no file {png.resolve()}: draw it in "
                "course_lib/diagrams/ and run `make images`, or fix the name"
            )
        count += 1
        return f"![{match['alt']}]({_data_uri(png)})"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = IMAGE_REFERENCE.sub(embed, cell.source)
    return count


def inline_images_in_file(path: Path, base: Path) -> int:
    """`inline_images` on a notebook file, rewritten only when it referred to an image; returns how many."""
    nb = nbformat.read(path, as_version=4)
    count = inline_images(nb, base, notebook=Path(path).name)
    if count:
        nbformat.write(nb, path)
    return count
