"""The claim checks of tests/claims/ pass on the outputs a lesson shows and fail on altered ones.

These build tiny notebooks by hand, so they run in milliseconds: for each family of claims (`Family`), one claim
on outputs copied from a real run, altered by each of that claim's own breaks. The real outputs, and every break
of every claim, are checked by tests/test_notebooks_execute.py, which executes every lesson.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tests.claims import CLAIMS, Break, Claim, Family, check_breaks, check_claims, module_name
from tests.claims import l01_tokenization as l01
from tests.claims import l02_embeddings as l02
from tests.claims import l03_position_encoding as l03
from tests.claims import l04_attention as l04
from tests.claims.common import failure_of, output, tensors
from tests.nbtools import LESSONS

CLAIMS_DIR = Path(__file__).parent / "claims"


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


NEIGHBOURS = (
    "   king: henry, edward, crown, lawful, vi, richard   (gensim agrees: True)\n"
    " father: brother, kinsman, princely, harry, son, meaning   (gensim agrees: True)\n"
    "  night: day, morrow, morning, supper, church, shrift   (gensim agrees: True)\n"
    "   thou: thyself, art, wilt, dost, didst, shalt   (gensim agrees: True)\n"
    "    eye: finger, lip, tooth, ear, beauty, glass   (gensim agrees: True)\n"
    "   love: heart's, hate, duty, dearly, tender, vow   (gensim agrees: True)\n"
)

# For each family, a claim whose breaks are (mostly) of that family, and what its cells printed in a real run.
EXAMPLES = {
    Family.SHOWN: (
        "01_tokenization",
        l01.tok_dataloader,
        [
            (
                l01.LOADER,
                "20 batches per epoch; x (8, 32), y (8, 32), dtype torch.int64\n"
                "True — the targets are the inputs shifted by one\n"
                "hound's head between his knees.\n",
            )
        ],
    ),
    Family.MARGIN: (
        "03_position_encoding",
        l03.pos_offset_curves,
        [
            (
                l03.CURVES,
                "offset 0: 32.00   lowest: 13.37 at offset -53   offset 60: 15.87\n"
                "largest gap between the curves: 5.7e-06;  largest |f(k) - f(-k)|: 0.0e+00\n"
                "<Figure size 800x350 with 1 Axes>\n",
            )
        ],
    ),
    Family.ORDER: ("04_attention", l04.att_village, [(l04.VILLAGE, village_output(0.866, 0.193))]),
    Family.MEMBERS: ("02_embeddings", l02.emb_neighbour_lists, [(l02.NEIGHBOURS, NEIGHBOURS)]),
    Family.TENSOR: (
        "04_attention",
        l04.att_dropout,
        [
            (
                l04.DROPOUT,
                "tensor([[2.000, 0.000, 0.000, 0.000, 0.000, 0.000],\n"
                "        [1.009, 0.991, 0.000, 0.000, 0.000, 0.000],\n"
                "        [0.000, 0.663, 0.000, 0.000, 0.000, 0.000],\n"
                "        [0.000, 0.000, 0.501, 0.000, 0.000, 0.000],\n"
                "        [0.402, 0.398, 0.000, 0.000, 0.411, 0.000],\n"
                "        [0.338, 0.330, 0.320, 0.000, 0.348, 0.000]])\n"
                "row sums in training: tensor([2.000, 2.000, 0.663, 0.501, 1.210, 1.337])\n"
                "row sums in evaluation: tensor([1., 1., 1., 1., 1., 1.])\n",
            )
        ],
    ),
    Family.TABLE: (
        "04_attention",
        l04.att_variance,
        [
            (
                l04.VARIANCE,
                "  d_k   var(q·k)   var(q·k / sqrt(d_k))\n"
                "    4        4.0                  1.006\n"
                "   16       15.6                  0.973\n"
                "   64       65.3                  1.021\n"
                "  256      253.4                  0.990\n"
                " 1024     1041.1                  1.017\n",
            )
        ],
    ),
    Family.EXACT: (
        "04_attention",
        l04.att_shakespeare_counts,
        [
            (
                l04.COUNTS,
                "cows     appears   0 times in Tiny Shakespeare\n"
                "huts     appears   0 times in Tiny Shakespeare\n"
                "fields   appears   2 times in Tiny Shakespeare\n"
                "village  appears   1 times in Tiny Shakespeare\n"
                "city     appears  55 times in Tiny Shakespeare\n",
            )
        ],
    ),
}


def claim_of(lesson: str, check) -> Claim:
    (claim,) = [c for c in CLAIMS[lesson] if c.check is check]
    return claim


# ------------------------------------------------------------------------------------------------------------
# The layout: a claims module per lesson, a break per claim, an example per family
# ------------------------------------------------------------------------------------------------------------


def test_every_lesson_has_a_claims_module():
    missing = [module_name(lesson) for lesson in LESSONS if not (CLAIMS_DIR / f"{module_name(lesson)}.py").is_file()]
    assert not missing, f"add tests/claims/<module>.py for {missing} (with `CLAIMS = []` if need be)"
    assert sorted(CLAIMS) == sorted(LESSONS), "a claims module for a lesson that notebooks/source/ does not have"


def test_a_lesson_without_a_claims_module_fails():
    with pytest.raises(AssertionError, match=r"99_new has no claims module tests/claims/l99_new\.py"):
        check_claims("99_new", notebook())
    with pytest.raises(AssertionError, match="no claims module"):
        check_breaks("99_new", notebook())


def test_every_claim_quotes_the_lesson_and_has_a_way_to_fail():
    for lesson, claims in CLAIMS.items():
        texts = [c.text for c in claims]
        assert len(set(texts)) == len(texts), f"{lesson}: two claims with the same text"
        for claim in claims:
            assert isinstance(claim, Claim) and claim.text and callable(claim.check), claim
            assert claim.breaks, f"{lesson}: give the claim {claim.text!r} a Break that its check must catch"
            for brk in claim.breaks:
                assert isinstance(brk, Break) and isinstance(brk.family, Family) and brk.marker, brk
                re.compile(brk.old)


def test_every_family_is_used_and_has_an_example():
    used = {brk.family for claims in CLAIMS.values() for claim in claims for brk in claim.breaks}
    assert used == set(Family), f"families no claim uses: {set(Family) - used}"
    assert set(EXAMPLES) == set(Family)


@pytest.mark.parametrize("family", list(Family), ids=lambda family: family.name)
def test_the_family_example_passes_and_fails_once_altered(family):
    lesson, check, cells = EXAMPLES[family]
    claim = claim_of(lesson, check)
    assert family in {brk.family for brk in claim.breaks}, f"{check.__name__} has no break of {family}"
    nb = notebook(*cells)
    claim.check(nb)
    problems = [f"{brk}: {problem}" for brk in claim.breaks if (problem := failure_of(claim, brk, nb))]
    assert not problems


# ------------------------------------------------------------------------------------------------------------
# Breaks: applied to a copy, and each way a break can fail to show anything is reported
# ------------------------------------------------------------------------------------------------------------


def test_a_break_alters_a_copy_and_leaves_the_notebook_as_it_was():
    nb = notebook((l04.VILLAGE, village_output(0.866, 0.193)))
    altered = Break(Family.ORDER, l04.VILLAGE, r"(?<=to city: )0\.193", "0.800").apply(nb)
    assert "to city: 0.800" in output(altered, l04.VILLAGE)
    assert output(nb, l04.VILLAGE) == village_output(0.866, 0.193)


def test_a_break_that_does_not_show_a_failure_is_reported():
    claim = claim_of("04_attention", l04.att_village)
    nb = notebook((l04.VILLAGE, village_output(0.866, 0.193)))
    # alters the plain average, which this claim does not read
    harmless = Break(Family.ORDER, l04.VILLAGE, r"0\.206", "0.300")
    assert "still passes" in failure_of(claim, harmless, nb)
    stale = Break(Family.ORDER, l04.VILLAGE, r"to town: \S+", "0.9")
    assert "does not apply" in failure_of(claim, stale, nb)
    layout = Break(Family.ORDER, l04.VILLAGE, r"to city:", "city")  # the number can no longer be read
    assert "could not read the altered output" in failure_of(claim, layout, nb)
    crashing = Claim("crashes", lambda nb: {}["x"], [harmless])
    assert "raised KeyError" in failure_of(crashing, harmless, nb)


def test_check_breaks_lists_every_break_its_check_misses(monkeypatch):
    claim = claim_of("04_attention", l04.att_village)
    harmless = Break(Family.ORDER, l04.VILLAGE, r"0\.206", "0.300")
    stale = Break(Family.ORDER, l04.VILLAGE, r"to town: \S+", "0.9")
    weak = Claim(claim.text, claim.check, [*claim.breaks, harmless, stale])
    monkeypatch.setitem(CLAIMS, "04_attention", [weak])
    nb = notebook((l04.VILLAGE, village_output(0.866, 0.193)))
    with pytest.raises(AssertionError) as failure:
        check_breaks("04_attention", nb)
    assert "2 of 3 alterations are not caught" in str(failure.value)
    assert "still passes" in str(failure.value) and "does not apply" in str(failure.value)


# ------------------------------------------------------------------------------------------------------------
# Checks and the readers they use
# ------------------------------------------------------------------------------------------------------------


def test_village_claim_passes_on_the_lessons_numbers_and_fails_when_city_wins():
    l04.att_village(notebook((l04.VILLAGE, village_output(0.866, 0.193))))
    with pytest.raises(AssertionError, match="not far closer to village"):
        l04.att_village(notebook((l04.VILLAGE, village_output(0.31, 0.42))))
    with pytest.raises(AssertionError, match="not far closer to village"):  # closer, but not "far" closer
        l04.att_village(notebook((l04.VILLAGE, village_output(0.40, 0.35))))


def test_neighbour_claim_needs_the_named_words_among_the_printed_neighbours():
    l02.emb_neighbour_lists(notebook((l02.NEIGHBOURS, NEIGHBOURS)))
    l02.emb_gensim_agrees(notebook((l02.NEIGHBOURS, NEIGHBOURS)))
    without_henry = NEIGHBOURS.replace("henry, ", "")
    with pytest.raises(AssertionError, match=r"\['henry'\] among the neighbours of 'king'"):
        l02.emb_neighbour_lists(notebook((l02.NEIGHBOURS, without_henry)))
    disagreeing = NEIGHBOURS.replace("shalt   (gensim agrees: True)", "shalt   (gensim agrees: False)")
    with pytest.raises(AssertionError, match=r"gensim disagrees for \['thou'\]"):
        l02.emb_gensim_agrees(notebook((l02.NEIGHBOURS, disagreeing)))


def test_an_unexecuted_cell_or_a_missing_cell_fails_with_a_clear_message():
    with pytest.raises(AssertionError, match="was the notebook executed"):
        l04.att_village(notebook((l04.VILLAGE, "")))
    with pytest.raises(AssertionError, match="exactly one code cell"):
        l04.att_village(notebook(("print('something else')", "something else\n")))


def test_check_claims_reports_every_failing_claim_at_once(monkeypatch):
    # Two claims that read the same cell: the mix is far closer to village; the plain average is close to the mix.
    claims = [claim_of("04_attention", l04.att_village), claim_of("04_attention", l04.att_plain_average)]
    monkeypatch.setitem(CLAIMS, "04_attention", claims)
    check_claims("04_attention", notebook((l04.VILLAGE, village_output(0.866, 0.193))))
    with pytest.raises(AssertionError) as failure:
        check_claims("04_attention", notebook((l04.VILLAGE, village_output(0.2, 0.6))))
    assert "2 of 2 claims" in str(failure.value)
    assert "far closer to village" in str(failure.value) and "plain average" in str(failure.value)


def test_printed_tensors_are_read_as_numbers_and_bools():
    text = "tensor([[ True, False],\n        [ True,  True]])\nrow sums: tensor([1.000, 0.500])\ntensor(-inf)\n"
    assert tensors(text) == [[[True, False], [True, True]], [1.0, 0.5], float("-inf")]
    printed = output(notebook(("x = 1", "tensor([1, 2], dtype=torch.int32)\n")), "x = 1")
    assert tensors(printed) == [[1, 2]]
