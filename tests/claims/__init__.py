"""What the lessons' texts say their code cells show, checked against the executed notebooks.

The markdown of a lesson makes claims about computed results: "the attention mix is far closer to *village* than
to *city*", a list of neighbours, "masked positions get zero weight". A claim that the outputs do not show is a
bug in the lesson. Each lesson has a module here, `l<lesson id>.py` (`l04_attention.py`), whose `CLAIMS` lists
one `Claim` per statement; `common.py` holds the types and the helpers that read printed outputs, and explains
what a check and a `Break` must do. `CLAIMS` below maps each lesson id to its list.
`tests/test_notebooks_execute.py` calls `check_claims` and `check_breaks` on every lesson it executes.
"""

from __future__ import annotations

import importlib
import pkgutil

from nbformat import NotebookNode

from tests.claims.common import Break, Claim, Family, run_breaks, run_claims


def module_name(lesson: str) -> str:
    """The claims module of a lesson: 'l' + its id (a module name cannot start with a digit)."""
    return f"l{lesson}"


CLAIMS: dict[str, list[Claim]] = {
    info.name[1:]: importlib.import_module(f"{__name__}.{info.name}").CLAIMS
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if info.name[:1] == "l" and info.name[1:2].isdigit()
}


def _claims_of(lesson: str) -> list[Claim]:
    if lesson not in CLAIMS:
        raise AssertionError(
            f"{lesson} has no claims module tests/claims/{module_name(lesson)}.py (one with `CLAIMS = []` if the "
            "lesson makes no claims about computed results)"
        )
    return CLAIMS[lesson]


def check_claims(lesson: str, nb: NotebookNode) -> None:
    """Run every claim of `lesson` on the executed notebook `nb`; one AssertionError lists all that fail."""
    run_claims(lesson, _claims_of(lesson), nb)


def check_breaks(lesson: str, nb: NotebookNode) -> None:
    """Apply every break of every claim of `lesson` to `nb`; one AssertionError lists each its check misses."""
    run_breaks(lesson, _claims_of(lesson), nb)


__all__ = ["CLAIMS", "Break", "Claim", "Family", "check_breaks", "check_claims", "module_name"]
