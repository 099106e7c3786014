"""Diagrams in notebooks: sources refer to images/ by a relative path, student versions carry them inline."""

from __future__ import annotations

import base64
import re
import shutil

import nbformat
import pytest

from course_lib.workflow.course import CourseError, generated_course
from course_lib.workflow.images import IMAGE_REFERENCE, MissingImageError, inline_images, inline_images_in_file
from tests.nbtools import LESSONS, ROOT, read, release_path, source_path

IMAGES = ROOT.parent / "images"
DIAGRAM = "encoder_decoder_data_flow.png"
BADGE = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.example/x)"
OTHER_LINKS = [
    BADGE,
    "![a web image](https://example.com/picture.png)",
    "[lesson 03](../03_position_encoding/03_position_encoding.ipynb)",
    "![beside the notebook](picture.png)",
]


@pytest.fixture
def lesson_folder(tmp_path):
    """A course laid out like the repository's: images/ three levels above notebooks/source/<id>/."""
    (tmp_path / "images").mkdir()
    shutil.copy(IMAGES / DIAGRAM, tmp_path / "images" / DIAGRAM)
    folder = tmp_path / "notebooks" / "source" / "99_demo"
    folder.mkdir(parents=True)
    return folder


def _notebook(*markdown: str, code: str = "x = 1"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(m) for m in markdown] + [nbformat.v4.new_code_cell(code)]
    return nb


def test_references_become_data_uris_and_other_links_stay(lesson_folder):
    reference = f"![the data flow](../../../images/{DIAGRAM})"
    code = f"# {reference}"  # code cells are not markdown: left alone
    nb = _notebook(f"Text before.\n\n{reference}\n\nText after.", *OTHER_LINKS, code=code)
    assert inline_images(nb, lesson_folder, "99_demo.ipynb") == 1
    first = nb.cells[0].source
    assert first.startswith("Text before.\n\n![the data flow](data:image/png;base64,") and first.endswith("after.")
    encoded = re.search(r"base64,([A-Za-z0-9+/=]+)\)", first)[1]
    assert base64.b64decode(encoded) == (IMAGES / DIAGRAM).read_bytes()
    assert [c.source for c in nb.cells[1:-1]] == OTHER_LINKS and nb.cells[-1].source == code


def test_a_missing_image_names_the_notebook_and_the_file(lesson_folder):
    nb = _notebook("![oops](../../../images/no_such_diagram.png)")
    with pytest.raises(MissingImageError, match=r"99_demo\.ipynb shows \.\./\.\./\.\./images/no_such_diagram\.png"):
        inline_images(nb, lesson_folder, "99_demo.ipynb")


def test_a_file_is_rewritten_only_when_it_shows_an_image(lesson_folder):
    path = lesson_folder / "99_demo.ipynb"
    nbformat.write(_notebook(*OTHER_LINKS), path)
    before = path.read_text(encoding="utf-8")
    assert inline_images_in_file(path, lesson_folder) == 0 and path.read_text(encoding="utf-8") == before
    nbformat.write(_notebook(f"![d](../../../images/{DIAGRAM})"), path)
    assert inline_images_in_file(path, lesson_folder) == 1 and "data:image/png;base64," in path.read_text()


def test_releasing_a_lesson_with_a_missing_image_says_which(lesson_folder):
    """The release path (a copy of the source in a temporary course) resolves paths from the real source folder."""
    root = lesson_folder.parent.parent
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    nbformat.write(_notebook("![oops](../../../images/no_such_diagram.png)"), lesson_folder / "99_demo.ipynb")
    with (
        pytest.raises(CourseError, match=r"99_demo\.ipynb shows .*no_such_diagram\.png"),
        generated_course("99_demo", root),
    ):
        pass


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_image_a_source_shows_exists(lesson):
    for cell in read(source_path(lesson)).cells:
        if cell.cell_type != "markdown":
            continue
        # Every mention of images/ is a reference the release inlines (not an <img> tag or another form it skips).
        assert cell.source.count("images/") == len(IMAGE_REFERENCE.findall(cell.source)), cell.source
        for match in IMAGE_REFERENCE.finditer(cell.source):
            assert (source_path(lesson).parent / match["path"]).is_file(), f"{lesson}: {match['path']} is missing"


@pytest.mark.parametrize("lesson", LESSONS)
def test_student_versions_carry_their_images_inline(lesson):
    released = release_path(lesson).read_text(encoding="utf-8")
    assert not re.search(r"\.\./images/|\]\(images/", released), "a relative image path left in the student version"
    shown = {
        m["path"].rsplit("/", 1)[1] for c in read(source_path(lesson)).cells for m in IMAGE_REFERENCE.finditer(c.source)
    }
    for name in shown:  # the current PNG, not an older one (the full check is test_student_versions_are_up_to_date)
        assert base64.b64encode((IMAGES / name).read_bytes()).decode() in released, f"{lesson}: {name} is stale"


def test_lesson_04_shows_the_encoder_decoder_diagram():
    sources = [c.source for c in read(source_path("04_attention")).cells if c.cell_type == "markdown"]
    assert any(f"](../../../images/{DIAGRAM})" in s for s in sources)
