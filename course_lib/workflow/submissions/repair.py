"""A submitted notebook read however it was saved, and the damage whose intent is clear repaired in a copy.

The class command's workers grade what `read_submission` returns, never the student's file itself (that stays in
`submitted/` as it was sent). What the reader does, in order:

1. **Saved forms** are read as if clean, without a note: a UTF-8 byte-order mark, Windows line endings (also
   inside cell sources), sources as one string or as a list of lines, nbformat 3 (converted) and 4.0-4.5 with or
   without cell ids (ids are made where missing or repeated), Colab's and VS Code's metadata. Outputs are left out
   (grading writes its own). A file that is empty or not a notebook at all raises `Unreadable`, saying why.
2. **Cells marked for another notebook** (a grade id the lesson does not have) lose the mark: nbgrader would stop
   on them. They stay in the notebook as ordinary cells.
3. **Each answer cell** (`LessonCells.answers`), in this order of cases:
   - *pasted twice* (its grade id on two or more cells, each a whole answer): the copy graded is the one in force
     when the exercise's visible checks run, as when the notebook runs top to bottom: the last copy above the
     visible check cell that defines the exercise's names; with none above it (or no check cell), the last one
     that does. Copies still as released (the stub) are passed over while another copy holds code. The other
     copies stay as ordinary cells;
   - *split* (consecutive cells that carry the grade id, or one that carries it and the cells right next to it
     that carry no grading mark, up to two): graded as one cell, their code joined in order, when the cell with
     the mark does not define the exercise's names on its own (or does not parse) and the joined code does, or
     when the cells after it do not parse on their own but do joined to it (a method or a body's end split off);
   - *mark stripped* (no cell carries its grade id): the one code cell without a grading mark that defines the
     exercise's names becomes the answer cell; when several do, none is chosen and the exercise scores 0;
   - *deleted* (no cell carries its grade id or defines its names): the exercise scores 0.
   Each repair is said in one line in words a student understands, in a note at the top of the graded notebook
   (marked with `REPAIR_MARKER`; the feedback shows it) and in the class report. A repair never gives points the
   student's code did not earn: it only decides which of the student's cells count as the answer, and the trusted
   grader still runs only that code.
4. **A locked or test cell pasted twice**: the first copy keeps the mark (nbgrader restores its text anyway, and
   `RestoreAndFlag` flags an edit); the other copies become ordinary cells. Deleted ones are `RestoreAndFlag`'s.

Nothing here runs a student's code: cells are read with `ast`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

import nbformat

from course_lib import manifest

__all__ = ["REPAIR_MARKER", "LessonCells", "Repaired", "Unreadable", "decode", "read_submission"]

REPAIR_MARKER = "course-note: repaired before grading"
_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ORDINALS = ["first", "second", "third", "fourth", "fifth"]
ANSWER_METADATA = {"grade": False, "locked": False, "schema_version": 3, "solution": True}


class Unreadable(ValueError):
    """The file is not a notebook that can be graded; the message says why, for a person."""


@dataclass(frozen=True)
class LessonCells:
    """What the reader needs to know of a lesson's notebook."""

    grade_ids: frozenset[str]  # every cell nbgrader tracks in the lesson (answers, checks, locked cells)
    answers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # answer grade id -> the names it defines
    stubs: dict[str, str] = field(default_factory=dict)  # answer grade id -> its text as released

    @classmethod
    def of(cls, lesson: str, released_cells: list[tuple[str, str, bool]]) -> LessonCells:
        """From the lesson's cells as released, `(grade id, source, is an answer)` each (the gradebook's source
        cells, or a student version's cells), and the manifest's names of its exercises."""
        try:
            exercises = {e.name: e.names for e in manifest.lesson(lesson).exercises}
        except KeyError:  # not a lesson of the course: its saved form is read, its cells are not repaired
            exercises = {}
        answers = {name: exercises.get(name, (name,)) for name, _, answer in released_cells if answer}
        stubs = {name: source for name, source, answer in released_cells if answer}
        return cls(frozenset(name for name, _, _ in released_cells), answers if exercises else {}, stubs)

    @classmethod
    def from_notebook(cls, lesson: str, released) -> LessonCells:
        """From a student version of the lesson (an nbformat notebook)."""
        cells = []
        for cell in released.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade_id"):
                cells.append((meta["grade_id"], cell.source, bool(meta.get("solution"))))
        return cls.of(lesson, cells)


@dataclass
class Repaired:
    nb: object  # the notebook to grade (nbformat 4.5), with the note on top when anything was repaired
    repairs: list[str] = field(default_factory=list)  # one line per repair, for the student and the report


def decode(raw: bytes) -> str:
    """A notebook file's text: UTF-8 with or without a byte-order mark, or UTF-16 with one."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16")
    return raw.decode("utf-8-sig")


def read_submission(raw: bytes, lesson: LessonCells) -> Repaired:
    """The notebook in `raw` (a file's bytes) as it can be graded (see the module docstring)."""
    data = _parse(raw)
    cells = data["cells"]
    for cell in cells:
        _normalise(cell)
    repairs: list[str] = []
    _unknown_marks(cells, lesson.grade_ids)
    for name, names in lesson.answers.items():
        repairs += _repair_answer(cells, name, names, lesson.stubs.get(name))
    repairs += _repeated_locked_cells(cells, set(lesson.answers))
    _ids(cells)
    data["nbformat"], data["nbformat_minor"] = 4, 5
    if not isinstance(data.get("metadata"), dict):
        data["metadata"] = {}
    nb = nbformat.from_dict(data)
    if repairs:
        nb.cells.insert(0, note_cell(repairs))
    return Repaired(nb, repairs)


def note_cell(repairs: list[str]):
    lines = "\n".join(f"- {line}" for line in repairs)
    cell = nbformat.v4.new_markdown_cell(
        f"<!-- {REPAIR_MARKER} -->\n**Note from the grader:** before grading, your notebook was read as follows. "
        f"This decides which of your cells count as your answers; each answer is then graded on its own code only."
        f"\n\n{lines}"
    )
    cell["id"] = "course-repair-note"
    return cell


def _parse(raw: bytes) -> dict:
    try:
        text = decode(raw)
    except UnicodeDecodeError as exc:
        raise Unreadable(f"the file is not a notebook: it is not text (byte {exc.start} is not UTF-8)") from None
    if not text.strip():
        raise Unreadable("the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(
            f"the file is not a notebook: it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(data, dict) or not ("cells" in data or "worksheets" in data):
        raise Unreadable("the file is JSON but not a Jupyter notebook (it has no cells)")
    if data.get("nbformat", 4) < 4:  # nbformat 3 (Jupyter before 2015): nbformat converts it
        try:
            data = json.loads(nbformat.writes(nbformat.reads(json.dumps(data), as_version=4)))
        except Exception as exc:  # nbformat's converter raises what the old file makes it raise
            raise Unreadable(f"the file is an old notebook (nbformat 3) that could not be converted: {exc}") from None
    if not isinstance(data.get("cells"), list) or not all(isinstance(c, dict) for c in data["cells"]):
        raise Unreadable("the file is JSON but not a Jupyter notebook (its cells are not a list of cells)")
    return data


def _text(source) -> str:
    text = "".join(str(s) for s in source) if isinstance(source, list) else str(source or "")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _normalise(cell: dict) -> None:
    """One cell as nbformat 4.5 has it: text sources with Unix line endings, no outputs, dict metadata."""
    cell["source"] = _text(cell.get("source", ""))
    if not isinstance(cell.get("metadata"), dict):
        cell["metadata"] = {}
    if cell.get("cell_type") not in ("code", "markdown", "raw"):
        cell["cell_type"] = "raw"
    if cell["cell_type"] == "code":
        cell["outputs"], cell["execution_count"] = [], None
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    grading = cell["metadata"].get("nbgrader")
    if grading is not None and not (isinstance(grading, dict) and grading.get("grade_id")):
        del cell["metadata"]["nbgrader"]  # a mark without a grade id: nbgrader stops on it ("schema too old")


def _ids(cells: list[dict]) -> None:
    """Every cell gets an id, unique and valid (nbformat 4.5); ids that were fine are kept."""
    seen: set[str] = set()
    for number, cell in enumerate(cells):
        given = cell.get("id")
        if not (isinstance(given, str) and _ID.match(given)) or given in seen:
            given = f"cell-{number}"
            while given in seen:
                given += "-x"
            cell["id"] = given
        seen.add(given)


def _grade_id(cell: dict) -> str | None:
    grading = cell.get("metadata", {}).get("nbgrader")
    return grading.get("grade_id") if isinstance(grading, dict) else None


def _unmark(cell: dict) -> None:
    cell["metadata"].pop("nbgrader", None)


def _unknown_marks(cells: list[dict], known: frozenset[str]) -> None:
    if known:
        for cell in cells:
            if _grade_id(cell) is not None and _grade_id(cell) not in known:
                _unmark(cell)


def _bound(source: str) -> set[str] | None:
    """Names a cell binds at its top level by `def`, `class` or assignment; None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _stands(source: str, names: tuple[str, ...]) -> bool:
    """The code parses and defines every one of the exercise's names."""
    bound = _bound(source)
    return bound is not None and set(names) <= bound


def _same_text(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


def _joined(cells: list[dict], run: list[int]) -> str:
    return "\n\n".join(cells[i]["source"].strip("\n") for i in run) + "\n"


def _plain_code(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and _grade_id(cell) is None


@dataclass
class _Candidate:
    run: list[int]  # the cells it is made of, in order
    source: str

    @property
    def split(self) -> bool:
        return len(self.run) > 1


def _extended(cells: list[dict], run: list[int], names: tuple[str, ...]) -> list[int] | None:
    """The smallest window of `run` and the unmarked code cells right next to it (at most two) whose joined code
    defines `names`: the rest of a split answer."""
    first, last = run[0], run[-1]
    options = [
        [*run, last + 1],
        [first - 1, *run],
        [first - 1, *run, last + 1],
        [*run, last + 1, last + 2],
        [first - 2, first - 1, *run],
    ]
    for window in options:
        added = [i for i in window if i not in run]
        if all(0 <= i < len(cells) and _plain_code(cells[i]) for i in added) and _stands(_joined(cells, window), names):
            return window
    return None


def _continued(cells: list[dict], run: list[int], names: tuple[str, ...]) -> list[int] | None:
    """`run` and the unmarked code cells right after it (at most two) that do not parse on their own but do joined
    to it: the rest of an answer split inside a class or a function (an indented method, a body's end)."""
    window = list(run)
    while len(window) < len(run) + 2:
        after = window[-1] + 1
        if not (after < len(cells) and _plain_code(cells[after]) and _bound(cells[after]["source"]) is None):
            break
        window.append(after)
        if _stands(_joined(cells, window), names):
            return window
    return None


def _runs(indices: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _ordinal(n: int) -> str:
    return _ORDINALS[n] if n < len(_ORDINALS) else f"copy number {n + 1}"


def _names(names: tuple[str, ...]) -> str:
    return " and ".join(f"`{n}`" for n in names)


def _repair_answer(cells: list[dict], name: str, names: tuple[str, ...], stub: str | None) -> list[str]:
    copies = [i for i, c in enumerate(cells) if _grade_id(c) == name]
    if not copies:
        return _find_stripped(cells, name, names)
    written = [i for i in copies if stub is None or not _same_text(cells[i]["source"], stub)]
    if not written:  # only the released stub, once or more: nothing to choose from
        for i in copies[1:]:
            _unmark(cells[i])
        return []
    candidates: list[_Candidate] = []
    for run in _runs(written):
        if all(_stands(cells[i]["source"], names) for i in run):
            rest = _continued(cells, run, names) if len(run) == 1 else None
            if rest is not None:
                candidates.append(_Candidate(rest, _joined(cells, rest)))
            else:
                candidates += [_Candidate([i], cells[i]["source"]) for i in run]
            continue
        window = run if _stands(_joined(cells, run), names) else _extended(cells, run, names)
        if window is not None:
            candidates.append(_Candidate(window, _joined(cells, window)))
        else:
            candidates += [_Candidate([i], cells[i]["source"]) for i in run]
    stubs_left = len(copies) - len(written)
    for i in copies:
        if i not in written:
            _unmark(cells[i])
    if len(candidates) == 1:
        (chosen,) = candidates
        said = []
        if chosen.split:
            said.append(
                f"your answer cell for {_names((name,))} was split into {len(chosen.run)} cells; they were graded as "
                "one cell, their code joined in order"
            )
        if stubs_left:
            said.append(
                f"your answer cell for {_names((name,))} appears {len(copies)} times; the copy with your code was "
                "graded (the other was still as released)"
            )
        _apply(cells, chosen, name)
        return said
    chosen, why = _in_force(cells, candidates, name, names)
    for candidate in candidates:
        if candidate is not chosen:
            for i in candidate.run:
                _unmark(cells[i])
    number = candidates.index(chosen)
    what = f"the {_ordinal(number)} copy" if not chosen.split else f"the {_ordinal(number)} copy (split into cells)"
    said = [
        f"your answer cell for {_names((name,))} appears {len(candidates) + stubs_left} times; {what} was graded: {why}"
    ]
    _apply(cells, chosen, name)
    return said


def _in_force(cells: list[dict], candidates: list[_Candidate], name: str, names: tuple[str, ...]):
    """The copy in force when the exercise's visible checks run (see the module docstring), and why, in words."""
    check = next((i for i, c in enumerate(cells) if _grade_id(c) == f"test_{name}"), None)
    defining = [c for c in candidates if _stands(c.source, names)] or candidates
    if check is not None:
        above = [c for c in defining if c.run[0] < check]
        if above:
            return above[-1], "the last one above its visible checks, the code in force when they ran"
    return defining[-1], "the last one in the notebook, the code in force at its end"


def _apply(cells: list[dict], chosen: _Candidate, name: str) -> None:
    """The chosen copy becomes the one answer cell (joined, for a split one); the other parts of a split leave."""
    head = cells[chosen.run[0]]
    if not chosen.split:
        return
    marked = next((cells[i] for i in chosen.run if _grade_id(cells[i]) == name), head)
    head["metadata"]["nbgrader"] = dict(marked["metadata"]["nbgrader"])
    head["source"] = chosen.source
    for i in sorted(chosen.run[1:], reverse=True):
        del cells[i]


def _find_stripped(cells: list[dict], name: str, names: tuple[str, ...]) -> list[str]:
    """No cell carries the answer's grade id: the one unmarked code cell that defines its names, if exactly one."""
    defining = [i for i, c in enumerate(cells) if _plain_code(c) and set(names) & (_bound(c["source"]) or set())]
    whole = [i for i in defining if _stands(cells[i]["source"], names)]
    if len(defining) == 1 and whole:
        cells[whole[0]]["metadata"]["nbgrader"] = {"grade_id": name, **ANSWER_METADATA}
        return [
            f"your answer cell for {_names((name,))} had lost its grading marks (nbgrader's metadata, which some "
            f"editors drop); the one cell that defines {_names(names)} was graded as your answer"
        ]
    if defining:
        return [
            f"your answer cell for {_names((name,))} had lost its grading marks, and {len(defining)} cells define "
            f"{_names(names)}; none could be told to be your answer, so {_names((name,))} scores 0 (keep your answer "
            "in the cell the lesson gave you)"
        ]
    return [f"your answer cell for {_names((name,))} was deleted, so {_names((name,))} scores 0"]


def _repeated_locked_cells(cells: list[dict], answers: set[str]) -> list[str]:
    """A check or locked cell pasted again: the first copy keeps its mark, the others become ordinary cells."""
    said = []
    seen: set[str] = set()
    for cell in cells:
        name = _grade_id(cell)
        if name is None or name in answers:
            continue
        if name in seen:
            _unmark(cell)
            said.append(f"the cell `{name}` appears more than once; only the first copy is the lesson's cell")
        seen.add(name)
    return list(dict.fromkeys(said))
