"""The repository speaks for itself: no file sends its reader to a document or an issue that is not in it.

Texts once pointed to a product definition, a house style guide and numbered issues that live outside the
repository, so a reader could not follow them. Whatever a file needs to say it says itself, or it points to a file
here (the rules of the course: docs/ARCHITECTURE.md). This reads every text file git knows of (tracked or new, not
ignored) and the cells of every notebook, and names each file and line that cites one of those outside documents.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Spelt in pieces, so that this file does not cite what it looks for.
_SPEC, _STYLE = "COURSE" + "_SPEC", "STYLE" + r"\.md"
CITATION = re.compile(
    rf"(?i)\bissue\s*#?\s*\d+|{_SPEC}|\bspec\w*\s*§|\bcourse\s+spec(ification)?\b|\b{_STYLE}",
)
# Third-party data files (tokenizer tables, texts) are not the course's writing; data/*.md are.
_SKIP_PREFIXES = ("data/",)
_IGNORED_PARTS = {".git", ".venv", "__pycache__", "work", "cache", "node_modules"}


def text_files(root: Path = ROOT) -> list[Path]:
    """Files git tracks or would track (not ignored); without git, a walk that leaves out the usual ignored folders."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        paths = [root / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for p in root.rglob("*") if not _IGNORED_PARTS & set(p.relative_to(root).parts)]
    return sorted(p for p in paths if p.is_file() and _is_ours(p.relative_to(root).as_posix()))


def _is_ours(name: str) -> bool:
    return not name.startswith(_SKIP_PREFIXES) or name.endswith(".md")


def lines(path: Path) -> list[tuple[str, str]]:
    """(where, text) for each line; a notebook's are its cells' lines, so a line number is the cell's own."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return []  # binary: images
    text = data.decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        out = []
        for number, cell in enumerate(json.loads(text)["cells"]):
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            out += [(f"cell {number} line {n}", line) for n, line in enumerate(source.splitlines(), 1)]
        return out
    return [(str(n), line) for n, line in enumerate(text.splitlines(), 1)]


def citations(paths: list[Path], root: Path = ROOT) -> list[str]:
    return [
        f"{path.relative_to(root)}:{where}: {line.strip()}"
        for path in paths
        for where, line in lines(path)
        if CITATION.search(line)
    ]


def test_no_file_cites_a_document_outside_the_repository():
    files = text_files()
    names = {p.relative_to(ROOT).as_posix() for p in files}
    assert {"README.md", "notebooks/AUTHORING.md", "course_lib/lesson.py", "tests/conftest.py"} <= names
    assert any(name.endswith(".ipynb") for name in names)
    found = citations(files)
    assert not found, "cite what is outside the repository; say it here or point to docs/:\n" + "\n".join(found)


def test_a_planted_citation_is_found(tmp_path):
    issue, spec, style = "iss" + "ue", "COURSE" + "_SPEC", "STYLE" + ".md"  # in pieces, as above
    (tmp_path / "a.py").write_text(f'"""Limits (see {issue} 12)."""\nx = 1  # an {issue} with no number is fine\n')
    (tmp_path / "b.md").write_text(f"Fine.\nAs the {spec}.md §5 says\nthe course sp" + "ec §6\n")
    (tmp_path / "c.md").write_text(f"Read {style} first; the t{issue} 3 is not an {issue} #7.\n")
    cell = "Follow the course " + "specification.\n"
    (tmp_path / "d.ipynb").write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["Intro\n", cell]}]}))
    (tmp_path / "e.png").write_bytes(b"\x89PNG\0" + f"{issue} 12".encode())
    found = citations(sorted(tmp_path.iterdir()), tmp_path)
    assert [f.split(": ", 1)[0] for f in found] == [
        "a.py:1",
        "b.md:2",
        "b.md:3",
        "c.md:1",
        "d.ipynb:cell 0 line 2",
    ]


def test_data_files_are_skipped_but_their_notes_are_read():
    assert not _is_ours("data/encoder.json") and _is_ours("data/README.md") and _is_ours("course_lib/data.py")
