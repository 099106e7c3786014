"""Damaged submissions, built from a solved lesson the way real ones arrive damaged: saved by another editor or an
older Jupyter, written with a byte-order mark and Windows line endings, an answer cell pasted twice or split in two,
its grading marks stripped, cells deleted. Each builder returns the file's bytes, as the student would send them.

`DAMAGES` names every kind with what grading it should give: which exercise the damage touches (None: none), and
the words the grader's note must contain. The class command's tests (tests/test_class_command.py) and the class
benchmark (tests/benchmarks/bench_class.py) grade them.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass

import nbformat


def _dict(nb) -> dict:
    """A notebook as plain JSON data (a deep copy)."""
    return json.loads(nbformat.writes(nb))


def _dump(data: dict, indent: int | None = 1) -> bytes:
    return (json.dumps(data, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


def _lines(source) -> list[str]:
    text = "".join(source) if isinstance(source, list) else source
    return text.splitlines(keepends=True)


def _joined(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def _index(data: dict, name: str) -> int:
    return next(
        i for i, c in enumerate(data["cells"]) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == name
    )


def clean(nb, name: str) -> bytes:
    """As nbformat writes it: the reference."""
    return nbformat.writes(nb).encode("utf-8") + b"\n"


def bom_crlf(nb, name: str) -> bytes:
    """A UTF-8 byte-order mark and Windows line endings (an editor on Windows)."""
    return b"\xef\xbb\xbf" + nbformat.writes(nb).replace("\n", "\r\n").encode("utf-8")


def string_sources(nb, name: str) -> bytes:
    """Every cell's source stored as one string (nbformat allows a string or a list of lines)."""
    data = _dict(nb)
    for cell in data["cells"]:
        cell["source"] = _joined(cell["source"])
    return _dump(data)


def list_sources(nb, name: str) -> bytes:
    """Every cell's source as a list of lines, the last line included even when empty."""
    data = _dict(nb)
    for cell in data["cells"]:
        cell["source"] = _lines(cell["source"])
    return _dump(data, indent=2)


def _minor(nb, minor: int, ids: bool) -> bytes:
    data = _dict(nb)
    data["nbformat_minor"] = minor
    for cell in data["cells"]:
        if not ids:
            cell.pop("id", None)
    return _dump(data)


def v4_0_no_ids(nb, name: str) -> bytes:
    """nbformat 4.0, as the oldest Jupyter of version 4 saved it: no cell ids."""
    return _minor(nb, 0, ids=False)


def v4_4_no_ids(nb, name: str) -> bytes:
    """nbformat 4.4 without cell ids (Jupyter before cell ids, 2021)."""
    return _minor(nb, 4, ids=False)


def v4_4_with_ids(nb, name: str) -> bytes:
    """nbformat 4.4 that has cell ids all the same (a tool that added ids without raising the version)."""
    return _minor(nb, 4, ids=True)


def v4_5_no_ids(nb, name: str) -> bytes:
    """nbformat 4.5 whose cells have no ids (invalid, but written by tools that rewrite the version only)."""
    return _minor(nb, 5, ids=False)


def colab(nb, name: str) -> bytes:
    """Colab's download: nbformat 4.0, no cell ids, Colab's own id in each cell's metadata, its notebook metadata,
    compact JSON."""
    rng = random.Random(7)
    data = _dict(nb)
    data["nbformat_minor"] = 0
    data["metadata"] = {
        "colab": {"provenance": [], "toc_visible": True},
        "kernelspec": {"name": "python3", "display_name": "Python 3"},
        "language_info": {"name": "python"},
    }
    for cell in data["cells"]:
        cell.pop("id", None)
        cell["metadata"]["id"] = "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789") for _ in range(12)
        )
        cell["source"] = _lines(cell["source"])
        if cell["cell_type"] == "code":
            cell["metadata"]["colab"] = {"base_uri": "https://localhost:8080/"}
            cell["metadata"]["outputId"] = "".join(rng.choice("0123456789abcdef") for _ in range(36))
    return _dump(data, indent=None)


def vscode(nb, name: str) -> bytes:
    """VS Code's save: its kernel's name, a full `language_info`, execution counts, its language tag on cells."""
    data = _dict(nb)
    data["metadata"]["kernelspec"] = {"display_name": ".venv", "language": "python", "name": "python3"}
    data["metadata"]["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.12.3",
    }
    count = 0
    for cell in data["cells"]:
        cell["source"] = _lines(cell["source"])
        if cell["cell_type"] == "code":
            count += 1
            cell["execution_count"] = count
            cell["metadata"]["vscode"] = {"languageId": "python"}
    return _dump(data)


def pasted_twice(nb, name: str) -> bytes:
    """The answer cell copied and pasted right below itself (the same grade id twice), then the first copy broken
    while trying something: the second copy, the one the visible checks ran after, is the student's answer."""
    data = _dict(nb)
    at = _index(data, name)
    second = copy.deepcopy(data["cells"][at])
    second["id"] = f"{second.get('id', 'x')}-copy"
    data["cells"][at]["source"] = _joined(data["cells"][at]["source"]) + "\n\nraise RuntimeError('trying something')\n"
    data["cells"].insert(at + 1, second)
    return _dump(data)


def split_in_two(nb, name: str) -> bytes:
    """The answer cell split in two at a blank line inside the code, the second half without nbgrader's metadata
    (a split or a cut and paste into a new cell): neither half is the answer alone."""
    data = _dict(nb)
    at = _index(data, name)
    text = _joined(data["cells"][at]["source"])
    lines = text.splitlines(keepends=True)
    # cut inside the function or class body: after the first line of the body's second half, at a blank line
    body = [i for i, line in enumerate(lines) if line.strip() == "" and i > 0 and lines[i - 1].startswith(" ")]
    cut = body[len(body) // 2] if body else len(lines) // 2
    data["cells"][at]["source"] = "".join(lines[:cut]).rstrip("\n")
    tail = nbformat.v4.new_code_cell("".join(lines[cut:]).strip("\n"))
    tail_data = json.loads(json.dumps(tail))
    tail_data["id"] = f"{data['cells'][at].get('id', 'x')}-tail"
    data["cells"].insert(at + 1, tail_data)
    return _dump(data)


def split_by_jupyterlab(nb, name: str) -> bytes:
    """JupyterLab's Split Cell (Ctrl+Shift+-): both halves keep the cell's metadata, so the grade id is there twice.
    Split between the imports and the definition (the first half defines nothing), or inside the body where the
    answer imports nothing (neither half parses)."""
    data = _dict(nb)
    at = _index(data, name)
    lines = _joined(data["cells"][at]["source"]).splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ")))
    if cut == 0:
        cut = next(i for i, line in enumerate(lines) if i > 1 and line.startswith("    ") and ":" not in line)
    head, tail = "".join(lines[:cut]).strip("\n"), "".join(lines[cut:]).strip("\n")
    second = copy.deepcopy(data["cells"][at])
    second["id"] = f"{second.get('id', 'x')}-split"
    data["cells"][at]["source"] = head
    second["source"] = tail
    data["cells"].insert(at + 1, second)
    return _dump(data)


def metadata_stripped(nb, name: str) -> bytes:
    """The answer cell's nbgrader metadata gone (an editor dropped it, or the answer was retyped in a new cell and
    the original deleted)."""
    data = _dict(nb)
    at = _index(data, name)
    data["cells"][at]["metadata"] = {}
    return _dump(data)


def checks_deleted(nb, name: str) -> bytes:
    """The exercise's visible and hidden test cells deleted."""
    data = _dict(nb)
    data["cells"] = [c for c in data["cells"] if not (_gid(c) or "").startswith(f"test_{name}")]
    return _dump(data)


def answer_deleted(nb, name: str) -> bytes:
    """The exercise's answer cell deleted."""
    data = _dict(nb)
    del data["cells"][_index(data, name)]
    return _dump(data)


def _gid(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


@dataclass(frozen=True)
class Damage:
    build: Callable[[object, str], bytes]
    touches: bool  # whether the damaged exercise may lose points (only a deleted answer does)
    words: tuple[str, ...]  # what the grader's note about it must say ("" for none: graded as if clean)


DAMAGES: dict[str, Damage] = {
    "bom_crlf": Damage(bom_crlf, False, ()),
    "string_sources": Damage(string_sources, False, ()),
    "list_sources": Damage(list_sources, False, ()),
    "v4_0_no_ids": Damage(v4_0_no_ids, False, ()),
    "v4_4_no_ids": Damage(v4_4_no_ids, False, ()),
    "v4_4_with_ids": Damage(v4_4_with_ids, False, ()),
    "v4_5_no_ids": Damage(v4_5_no_ids, False, ()),
    "colab": Damage(colab, False, ()),
    "vscode": Damage(vscode, False, ()),
    "pasted_twice": Damage(pasted_twice, False, ("appears 2 times", "the second copy")),
    "split_in_two": Damage(split_in_two, False, ("split into 2 cells",)),
    "split_by_jupyterlab": Damage(split_by_jupyterlab, False, ("split into 2 cells",)),
    "metadata_stripped": Damage(metadata_stripped, False, ("lost its grading marks",)),
    "checks_deleted": Damage(checks_deleted, False, ("was deleted",)),
    "answer_deleted": Damage(answer_deleted, True, ("was deleted",)),
}
