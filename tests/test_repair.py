"""Reading a submitted notebook however it was saved, and repairing what is clearly meant
(course_lib/workflow/submissions/repair.py), on damaged copies of two lessons' solved notebooks (tests/damaged.py).
No nbgrader run here: the class command grades these same files in tests/test_class_command.py.
"""

from __future__ import annotations

import ast
import copy
import json

import nbformat
import pytest

from course_lib.workflow.submissions import REPAIR_MARKER, LessonCells, Unreadable, read_submission
from tests.damaged import DAMAGES, clean, metadata_stripped, pasted_twice
from tests.nbtools import grade_id, read, release_path, solved

# Two lessons, and an exercise of each whose answer has a body to split: a function, and a class with methods.
CASES = [("04_attention", "causal_mask"), ("04_attention", "CausalSelfAttention"), ("01_tokenization", "merge_pair")]
SAVED_FORMS = [k for k, d in DAMAGES.items() if not d.words]


def _cells(lesson: str) -> LessonCells:
    return LessonCells.from_notebook(lesson, read(release_path(lesson)))


def _graded(nb) -> dict[str, str]:
    return {grade_id(c): c.source for c in nb.cells if grade_id(c)}


def _code(source: str) -> str:
    return ast.dump(ast.parse(source))


def _read(raw: bytes, lesson: str):
    repaired = read_submission(raw, _cells(lesson))
    nbformat.validate(repaired.nb)  # what nbgrader is given is a valid nbformat 4.5 notebook
    assert repaired.nb.nbformat_minor == 5
    ids = [c["id"] for c in repaired.nb.cells]
    assert len(set(ids)) == len(ids)
    return repaired


@pytest.mark.parametrize("kind", SAVED_FORMS)
@pytest.mark.parametrize("lesson", ["04_attention", "01_tokenization"])
def test_every_saved_form_reads_as_the_clean_notebook(lesson, kind):
    full = solved(lesson)
    reference = _read(clean(full, ""), lesson)
    got = _read(DAMAGES[kind].build(full, ""), lesson)
    assert got.repairs == [] and not any(REPAIR_MARKER in c.source for c in got.nb.cells)
    said = [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in got.nb.cells]
    assert said == [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in reference.nb.cells]
    assert all("\r" not in c.source for c in got.nb.cells)


def test_the_saved_forms_differ_from_the_clean_file():  # so the test above reads something other than the clean file
    full = solved("04_attention")
    files = {kind: DAMAGES[kind].build(full, "causal_mask") for kind in SAVED_FORMS}
    assert len(set(files.values()) | {clean(full, "")}) == len(files) + 1
    assert files["bom_crlf"].startswith(b"\xef\xbb\xbf") and b"\r\n" in files["bom_crlf"]
    assert all("id" not in c for c in json.loads(files["v4_4_no_ids"])["cells"])
    assert all(isinstance(c["source"], str) for c in json.loads(files["string_sources"])["cells"])


@pytest.mark.parametrize(("lesson", "name"), CASES)
@pytest.mark.parametrize("kind", ["pasted_twice", "split_in_two", "split_by_jupyterlab", "metadata_stripped"])
def test_a_repaired_answer_is_the_students_own_code_and_said(lesson, name, kind):
    full = solved(lesson)
    raw = DAMAGES[kind].build(full, name)
    got = _read(raw, lesson)
    (line,) = got.repairs
    assert f"`{name}`" in line and all(word in line for word in DAMAGES[kind].words), line
    note = got.nb.cells[0]
    assert note.cell_type == "markdown" and REPAIR_MARKER in note.source and f"- {line}" in note.source
    graded = _graded(got.nb)
    assert _code(graded[name]) == _code(_graded(full)[name])  # the answer the student wrote, whole
    assert [grade_id(c) for c in got.nb.cells if grade_id(c)].count(name) == 1
    # every other graded cell is as the clean notebook has it
    assert {k: v for k, v in graded.items() if k != name} == {k: v for k, v in _graded(full).items() if k != name}
    # and the answer is made only of the student's cells' text, in order (a repair adds no code)
    sent = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in json.loads(raw)["cells"]]
    parts = [p for p in graded[name].split("\n\n") if p.strip()]
    assert all(any(p.strip() in s for s in sent) for p in parts)


def _with_copy_at_the_end(lesson: str, name: str, code: str):
    nb = copy.deepcopy(solved(lesson))
    answer = next(c for c in nb.cells if grade_id(c) == name)
    pasted = copy.deepcopy(answer)
    pasted["id"] = "pasted-at-the-end"
    pasted.source = code
    nb.cells.append(pasted)
    return nb


def test_of_two_copies_the_one_above_the_visible_checks_is_graded():
    """A copy pasted at the end of the notebook, after the checks ran: the copy above the checks is the answer."""
    full = solved("04_attention")
    nb = _with_copy_at_the_end("04_attention", "causal_mask", "def causal_mask(T, device=None):\n    return None\n")
    got = _read(clean(nb, ""), "04_attention")
    assert _graded(got.nb)["causal_mask"] == _graded(full)["causal_mask"]
    assert got.repairs == [
        "your answer cell for `causal_mask` appears 2 times; the first copy was graded: the last one above its "
        "visible checks, the code in force when they ran"
    ]
    # the other copy stays, unmarked: it is the student's, and nothing runs it
    assert any(c.source.startswith("def causal_mask(T, device=None):\n    return None") for c in got.nb.cells)


def test_a_copy_still_as_released_is_passed_over():
    lesson, name = "04_attention", "causal_mask"
    stub = _cells(lesson).stubs[name]
    raw = pasted_twice(solved(lesson), name)
    data = json.loads(raw)
    at = next(i for i, c in enumerate(data["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == name)
    data["cells"][at]["source"] = stub  # the first copy left as released, the answer typed into the second
    got = _read(json.dumps(data).encode(), lesson)
    assert _code(_graded(got.nb)[name]) == _code(_graded(solved(lesson))[name])
    assert got.repairs == [
        "your answer cell for `causal_mask` appears 2 times; the copy with your code was graded (the other was still "
        "as released)"
    ]


def test_a_scratch_cell_after_a_whole_answer_is_not_joined_to_it():
    """The answer defines its names on its own: the cell after it, trying it out or redefining it, is left alone."""
    lesson, name = "04_attention", "causal_mask"
    for scratch in ("print(causal_mask(3))\n", "def causal_mask(T, device=None):\n    return 'mine'\n"):
        nb = copy.deepcopy(solved(lesson))
        at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == name)
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(scratch))
        got = _read(clean(nb, ""), lesson)
        assert got.repairs == [] and _graded(got.nb)[name] == _graded(solved(lesson))[name]


def test_a_wrong_answer_is_graded_as_written_and_not_repaired():
    """An answer cell that does not parse, with no cell next to it that completes it, is the student's answer."""
    lesson, name = "04_attention", "causal_mask"
    nb = copy.deepcopy(solved(lesson))
    answer = next(c for c in nb.cells if grade_id(c) == name)
    answer.source = "def causal_mask(T, device=None)\n    return None\n"  # no colon
    got = _read(clean(nb, ""), lesson)
    assert got.repairs == [] and _graded(got.nb)[name] == answer.source


def test_a_stripped_answer_is_not_guessed_when_two_cells_define_it():
    lesson, name = "04_attention", "causal_mask"
    data = json.loads(metadata_stripped(solved(lesson), name))
    data["cells"].append({"cell_type": "code", "metadata": {}, "source": "def causal_mask(T):\n    return 1\n"})
    got = _read(json.dumps(data).encode(), lesson)
    assert name not in _graded(got.nb)
    assert got.repairs == [
        "your answer cell for `causal_mask` had lost its grading marks, and 2 cells define `causal_mask`; none could "
        "be told to be your answer, so `causal_mask` scores 0 (keep your answer in the cell the lesson gave you)"
    ]


def test_an_exercise_of_two_names_is_found_by_both():
    lesson, name = "05_multi_head_attention", "split_merge_heads"
    got = _read(metadata_stripped(solved(lesson), name), lesson)
    assert _code(_graded(got.nb)[name]) == _code(_graded(solved(lesson))[name])
    assert "defines `split_heads` and `merge_heads`" in got.repairs[0]


def test_a_deleted_answer_is_said_to_score_zero():
    got = _read(DAMAGES["answer_deleted"].build(solved("04_attention"), "causal_mask"), "04_attention")
    assert got.repairs == ["your answer cell for `causal_mask` was deleted, so `causal_mask` scores 0"]


def test_a_check_cell_pasted_twice_keeps_one_mark_and_marks_of_other_notebooks_go():
    lesson = "04_attention"
    nb = copy.deepcopy(solved(lesson))
    check = next(i for i, c in enumerate(nb.cells) if grade_id(c) == "test_causal_mask")
    again = copy.deepcopy(nb.cells[check])
    again["id"] = "check-again"
    nb.cells.insert(check + 1, again)
    foreign = nbformat.v4.new_code_cell("x = 1")
    foreign.metadata["nbgrader"] = {"grade_id": "test_from_another_lesson", "grade": True, "points": 5}
    nb.cells.append(foreign)
    got = _read(clean(nb, ""), lesson)
    ids = [grade_id(c) for c in got.nb.cells if grade_id(c)]
    assert ids.count("test_causal_mask") == 1 and "test_from_another_lesson" not in ids
    assert got.repairs == [
        "the cell `test_causal_mask` appears more than once; only the first copy is the lesson's cell"
    ]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "the file is empty"),
        (b"  \n", "the file is empty"),
        (
            b"{ this is not a notebook",
            "it is not valid JSON (Expecting property name enclosed in double quotes at line 1",
        ),
        (b'{"a": 1}', "the file is JSON but not a Jupyter notebook (it has no cells)"),
        (b'{"cells": 3}', "its cells are not a list of cells"),
        (b"\xff\xfe\x00\x00garbage\x80", "the file is not a notebook"),
    ],
)
def test_a_file_that_is_no_notebook_says_why(raw, words):
    with pytest.raises(Unreadable, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_submission(raw, _cells("04_attention"))


def test_utf16_with_a_byte_order_mark_is_read():
    text = nbformat.writes(solved("00_welcome"))
    got = _read(b"\xff\xfe" + text.encode("utf-16-le"), "00_welcome")
    assert got.repairs == [] and _graded(got.nb) == _graded(solved("00_welcome"))
