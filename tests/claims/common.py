"""What every lesson's claims are made of: the `Claim` and `Break` types and the helpers that read printed outputs.

A check reads the printed outputs (stream and text/plain) of an executed notebook and raises AssertionError when
they do not support its claim. Cells are found by a piece of their source, not by position, so adding a cell
elsewhere breaks nothing. Checks leave room for float noise but must be able to fail: orderings are asserted as
orderings, "equal" as a tolerance far below the effect. Timings are never asserted (a shared 2-core machine is
too noisy); for speed, only that the table of medians and ratios is printed. The numbers are those of a normal
run: under nbgrader the lessons use smaller settings, and these checks do not run then.

Each claim carries at least one `Break`: an alteration of the output it reads (a regex substitution) after which
its check must raise AssertionError. `tests/test_notebooks_execute.py` applies every break to the real outputs of
each executed lesson; `tests/test_lesson_claims.py` does the same, in milliseconds, on a few hand-built outputs
(one per `Family`).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from nbformat import NotebookNode
from nbformat.v4 import new_notebook, new_output

FLOAT = r"(-?\d[\d,]*(?:\.\d*)?(?:e[+-]?\d+)?)"  # 1.5, -0.2, 20,479, 5.9e-08


class Unreadable(AssertionError):
    """The output is missing or does not have the expected layout (as opposed to showing a wrong result)."""


class Family(Enum):
    """The kinds of assertion the checks make; each break names the one it defeats."""

    SHOWN = "a line, flag or shape the text quotes is printed"
    MARGIN = "a printed number lies within a margin: a range, a tolerance, a stated value"
    ORDER = "printed values come in the stated order: larger, smaller, rising, falling, ranked"
    MEMBERS = "named items are among a printed list"
    TENSOR = "a printed tensor has the stated entries"
    TABLE = "a printed table has a row for every setting, and every row obeys the rule"
    EXACT = "a printed count or text equals the stated one exactly"


@dataclass(frozen=True)
class Break:
    """In the output of the code cell whose source contains `marker`, substitute `old` (a regex, multiline) by `new`.

    The alteration must make the claim false, as a wrong result would: change a value, not the layout around it,
    so that the check reads the altered output and rejects it (an `Unreadable` failure does not count).
    """

    family: Family
    marker: str
    old: str
    new: str | Callable[[re.Match[str]], str]

    def apply(self, nb: NotebookNode) -> NotebookNode:
        """A copy of `nb` whose cell shows the altered output; ValueError when the alteration changes nothing."""
        cell = code_cell(nb, self.marker)
        text = output(nb, self.marker)
        altered = re.sub(self.old, self.new, text, flags=re.M)
        if altered == text:
            raise ValueError(f"the alteration /{self.old}/ changes nothing in the output of {self.marker!r}")
        changed = copy.deepcopy(cell)
        changed.outputs = [new_output("stream", name="stdout", text=altered)]
        return new_notebook(cells=[changed if c is cell else c for c in nb.cells], metadata=nb.metadata)


@dataclass(frozen=True)
class Claim:
    text: str  # the lesson's words, shortened
    check: Callable[[NotebookNode], None]  # raises AssertionError when the outputs do not support `text`
    breaks: Sequence[Break] = ()  # alterations of the outputs after which `check` must fail


def run_claims(lesson: str, claims: Sequence[Claim], nb: NotebookNode) -> None:
    """Run every claim on the executed notebook `nb`; one AssertionError lists all that fail."""
    failures = []
    for claim in claims:
        try:
            claim.check(nb)
        except AssertionError as error:
            failures.append(f"- {claim.text}\n    {error}")
    if failures:
        raise AssertionError(
            f"{lesson}: {len(failures)} of {len(claims)} claims are not shown by the executed notebook:\n"
            + "\n".join(failures)
        )


def failure_of(claim: Claim, brk: Break, nb: NotebookNode) -> str | None:
    """None when `claim.check` rejects `nb` altered by `brk`; otherwise what went wrong."""
    try:
        altered = brk.apply(nb)
    except (ValueError, AssertionError) as error:
        return f"the alteration does not apply: {error}"
    try:
        claim.check(altered)
    except Unreadable as error:
        return f"the check could not read the altered output (alter a value, not the layout): {error}"
    except AssertionError:
        return None
    except Exception as error:  # a check must fail with a message, not crash
        return f"the check raised {type(error).__name__}: {error}, not AssertionError"
    return f"the check still passes after /{brk.old}/ -> {brk.new!r} in the output of {brk.marker!r}"


def run_breaks(lesson: str, claims: Sequence[Claim], nb: NotebookNode) -> None:
    """Apply every break of every claim to `nb`; one AssertionError lists each that the check did not catch."""
    problems = [
        f"- {claim.text}\n    {brk.family.name}: {problem}"
        for claim in claims
        for brk in claim.breaks
        if (problem := failure_of(claim, brk, nb))
    ]
    if problems:
        total = sum(len(claim.breaks) for claim in claims)
        raise AssertionError(
            f"{lesson}: {len(problems)} of {total} alterations are not caught:\n" + "\n".join(problems)
        )


# ------------------------------------------------------------------------------------------------------------
# Reading outputs
# ------------------------------------------------------------------------------------------------------------


def require(condition: object, message: str) -> None:
    """Raise AssertionError(message) unless `condition` holds (a claim's verdict; not the grader's `expect`)."""
    if not condition:
        raise AssertionError(message)


def _readable(condition: object, message: str) -> None:
    if not condition:
        raise Unreadable(message)


def excerpt(text: str, limit: int = 800) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def code_cell(nb: NotebookNode, marker: str) -> NotebookNode:
    """The one code cell whose source contains `marker`."""
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    _readable(len(cells) == 1, f"expected exactly one code cell containing {marker!r}, found {len(cells)}")
    return cells[0]


def output(nb: NotebookNode, marker: str) -> str:
    """What the code cell containing `marker` printed: its stream text and text/plain results, in order."""
    parts = []
    for out in code_cell(nb, marker).get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", "") + "\n")
    text = "".join(parts)
    _readable(text.strip(), f"the cell containing {marker!r} shows no output (was the notebook executed?)")
    return text


def number(text: str, pattern: str, what: str) -> float:
    """Group 1 of the first match of `pattern` (a line-anchored regex may use ^ and $) as a float."""
    match = re.search(pattern, text, re.M)
    _readable(match, f"{what}: nothing matches /{pattern}/ in the output:\n{excerpt(text)}")
    return float(match.group(1).replace(",", ""))


def rows(text: str, pattern: str, what: str, at_least: int = 1) -> list[tuple[str, ...]]:
    """All matches of `pattern` (one per line), at least `at_least` of them (fewer is a missing row: a claim fails)."""
    found = re.findall(pattern, text, re.M)
    require(
        len(found) >= at_least,
        f"{what}: {len(found)} lines match /{pattern}/, expected {at_least} or more:\n{excerpt(text)}",
    )
    return [m if isinstance(m, tuple) else (m,) for m in found]


def tensors(text: str) -> list:
    """Every `tensor(...)` printed in `text`, in order, as (nested lists of) numbers or bools."""
    found = []
    for match in re.finditer(r"tensor\(", text):
        start = match.end()
        if text[start : start + 1] == "[":
            depth = 0
            for end in range(start, len(text)):
                depth += {"[": 1, "]": -1}.get(text[end], 0)
                if depth == 0:
                    break
            body = text[start : end + 1]
        else:
            body = re.match(r"[^,)]*", text[start:]).group(0)
        try:
            found.append(ast.literal_eval(re.sub(r"\binf\b", "1e999", body)))
        except (ValueError, SyntaxError) as error:
            raise Unreadable(f"cannot read the printed tensor {body!r}: {error}") from None
    return found


def literal(text: str, pattern: str, what: str):
    """Group 1 of `pattern`, read as a Python literal (a printed list or dict)."""
    match = re.search(pattern, text, re.M)
    _readable(match, f"{what}: nothing matches /{pattern}/ in the output:\n{excerpt(text)}")
    try:
        return ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError) as error:
        raise Unreadable(f"{what}: cannot read {match.group(1)!r}: {error}") from None


def close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol


def rising(values: Sequence[float]) -> bool:
    """Strictly increasing."""
    return all(b > a for a, b in zip(values, values[1:], strict=False))


def falling(values: Sequence[float]) -> bool:
    """Strictly decreasing."""
    return all(b < a for a, b in zip(values, values[1:], strict=False))
