"""The claim checks of tests/lesson_claims.py pass on the outputs a lesson shows and fail on altered ones.

These build tiny notebooks by hand, so they run in milliseconds; the real outputs are checked by
tests/test_notebooks_execute.py, which executes every lesson.
"""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tests import lesson_claims
from tests.lesson_claims import CLAIMS, Claim, check_claims
from tests.nbtools import LESSONS

VILLAGE_SOURCE = "mixed = ref.simple_self_attention(vectors)  # (5, 16)\nsummary = mixed.mean(dim=0)"
NEIGHBOURS_SOURCE = "def neighbours(word: str, k: int = 6) -> list[str]:\n    ..."


def notebook(*cells: tuple[str, str]):
    """A notebook whose code cells have the given (source, printed text)."""
    code = []
    for source, printed in cells:
        cell = new_code_cell(source)
        if printed:
            cell.outputs = [new_output("stream", name="stdout", text=printed)]
        code.append(cell)
    return new_notebook(cells=code)


def village_output(to_village: float, to_city: float) -> str:
    return (
        f"attention mix  cosine to village: {to_village:.3f}   to city: {to_city:.3f}\n"
        "plain average  cosine to village: 0.844   to city: 0.206\n"
    )


def test_every_lesson_has_an_entry():
    missing = [lesson for lesson in LESSONS if lesson not in CLAIMS]
    assert not missing, f"add these lessons to CLAIMS in tests/lesson_claims.py (an empty list if need be): {missing}"
    assert all(isinstance(c, Claim) and c.text and callable(c.check) for claims in CLAIMS.values() for c in claims)


def test_village_claim_passes_on_the_lessons_numbers_and_fails_when_city_wins():
    lesson_claims.att_village(notebook((VILLAGE_SOURCE, village_output(0.866, 0.193))))
    with pytest.raises(AssertionError, match="not far closer to village"):
        lesson_claims.att_village(notebook((VILLAGE_SOURCE, village_output(0.31, 0.42))))
    with pytest.raises(AssertionError, match="not far closer to village"):  # closer, but not "far" closer
        lesson_claims.att_village(notebook((VILLAGE_SOURCE, village_output(0.40, 0.35))))


def test_neighbour_claim_needs_the_named_words_among_the_printed_neighbours():
    lines = [
        "   king: henry, edward, crown, lawful, vi, richard   (gensim agrees: True)",
        " father: brother, kinsman, princely, harry, son, meaning   (gensim agrees: True)",
        "  night: day, morrow, morning, supper, church, shrift   (gensim agrees: True)",
        "   thou: thyself, art, wilt, dost, didst, shalt   (gensim agrees: True)",
        "    eye: finger, lip, tooth, ear, beauty, glass   (gensim agrees: True)",
        "   love: heart's, hate, duty, dearly, tender, vow   (gensim agrees: True)",
    ]
    good = "\n".join(lines) + "\n"
    lesson_claims.emb_neighbour_lists(notebook((NEIGHBOURS_SOURCE, good)))
    lesson_claims.emb_gensim_agrees(notebook((NEIGHBOURS_SOURCE, good)))
    without_henry = good.replace("henry, ", "")
    with pytest.raises(AssertionError, match=r"\['henry'\] among the neighbours of 'king'"):
        lesson_claims.emb_neighbour_lists(notebook((NEIGHBOURS_SOURCE, without_henry)))
    disagreeing = good.replace("shalt   (gensim agrees: True)", "shalt   (gensim agrees: False)")
    with pytest.raises(AssertionError, match=r"gensim disagrees for \['thou'\]"):
        lesson_claims.emb_gensim_agrees(notebook((NEIGHBOURS_SOURCE, disagreeing)))


def test_an_unexecuted_cell_or_a_missing_cell_fails_with_a_clear_message():
    with pytest.raises(AssertionError, match="was the notebook executed"):
        lesson_claims.att_village(notebook((VILLAGE_SOURCE, "")))
    with pytest.raises(AssertionError, match="exactly one code cell"):
        lesson_claims.att_village(notebook(("print('something else')", "something else\n")))


def test_check_claims_reports_every_failing_claim_at_once(monkeypatch):
    # Two claims that read the same cell: the mix is far closer to village; the plain average is close to the mix.
    claims = [
        c for c in CLAIMS["04_attention"] if c.check in (lesson_claims.att_village, lesson_claims.att_plain_average)
    ]
    assert len(claims) == 2
    monkeypatch.setitem(CLAIMS, "04_attention", claims)
    check_claims("04_attention", notebook((VILLAGE_SOURCE, village_output(0.866, 0.193))))
    with pytest.raises(AssertionError) as failure:
        check_claims("04_attention", notebook((VILLAGE_SOURCE, village_output(0.2, 0.6))))
    assert "2 of 2 claims" in str(failure.value)
    assert "far closer to village" in str(failure.value) and "plain average" in str(failure.value)


def test_printed_tensors_are_read_as_numbers_and_bools():
    text = "tensor([[ True, False],\n        [ True,  True]])\nrow sums: tensor([1.000, 0.500])\ntensor(-inf)\n"
    assert lesson_claims.tensors(text) == [[[True, False], [True, True]], [1.0, 0.5], float("-inf")]
    printed = lesson_claims.output(notebook(("x = 1", "tensor([1, 2], dtype=torch.int32)\n")), "x = 1")
    assert lesson_claims.tensors(printed) == [[1, 2]]
