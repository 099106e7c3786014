"""Two nbgrader preprocessors the course plugs in through notebooks/nbgrader_config.py (COURSE_SPEC §5).

- `RestoreAndFlag` (autograde): nbgrader already overwrites edited locked cells with their original text, but
  it does not say so, and it does not bring back deleted read-only cells. This preprocessor restores every
  locked cell (test cells, read-only set-up cells), puts a warning cell at the top of the graded notebook that
  names what was changed, and sets the submission's `flagged` mark in the gradebook for the instructor.
- `HideHiddenTestTracebacks` (feedback): a failing hidden test cell keeps only its error's name and message.
  A traceback would print the line that failed, which is hidden test text.
"""

from __future__ import annotations

import re

from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells
from traitlets import Bool

__all__ = ["FLAG_MARKER", "HideHiddenTestTracebacks", "RestoreAndFlag", "strip_hidden_tests"]

FLAG_MARKER = "course-flag: locked cells restored"
_HIDDEN = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.S | re.M)


def strip_hidden_tests(source: str) -> str:
    """The cell text a student sees: the instructor source without its hidden-test region."""
    return _HIDDEN.sub("", source)


def _same(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.strip().splitlines()] == [
        line.rstrip() for line in b.strip().splitlines()
    ]


class RestoreAndFlag(OverwriteCells):
    """OverwriteCells that also restores deleted locked cells and flags any tampering (see module docstring)."""

    add_missing_cells = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            source_nb = gradebook.find_notebook(info["notebook"], info["assignment"])
            source_cells = [
                (cell.name, cell.source, cell.cell_type, bool(cell.locked)) for cell in source_nb.source_cells
            ]
            grade_ids = {cell.name for cell in source_nb.grade_cells}
            solution_ids = {cell.name for cell in source_nb.solution_cells}

        submitted = {
            cell.metadata["nbgrader"]["grade_id"]: cell
            for cell in nb.cells
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        }
        problems = []
        for name, source, _, locked in source_cells:
            if name in solution_ids:
                if name not in submitted:
                    problems.append(f"answer cell `{name}` was deleted (its exercise scores 0)")
                continue
            if not (locked or name in grade_ids):
                continue
            if name not in submitted:
                problems.append(f"locked cell `{name}` was deleted")
            elif not _same(strip_hidden_tests(source), submitted[name].source):
                problems.append(f"locked cell `{name}` was edited")

        nb, resources = super().preprocess(nb, resources)  # restores sources, re-adds deleted grade cells
        self._restore_read_only_cells(nb, source_cells, grade_ids)
        if problems:
            nb.cells.insert(0, self._warning_cell(problems))
            self._flag(info)
            self.log.warning("Submission of %s flagged: %s", info.get("student"), "; ".join(problems))
        return nb, resources

    @staticmethod
    def _restore_read_only_cells(nb, source_cells, grade_ids) -> None:
        """Re-insert deleted locked cells that are not grade cells (nbgrader only restores grade cells)."""
        order = [name for name, *_ in source_cells]
        for index, (name, source, cell_type, locked) in enumerate(source_cells):
            present = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
            if not locked or name in grade_ids or name in present:
                continue
            cell = NotebookNode(
                {
                    "cell_type": cell_type,
                    "metadata": {
                        "deletable": False,
                        "editable": False,
                        "nbgrader": {"grade": False, "grade_id": name, "locked": True, "solution": False},
                    },
                    "source": source,
                }
            )
            if cell_type == "code":
                cell["execution_count"] = None
                cell["outputs"] = []
            # Insert after the nearest earlier source cell still present (or first).
            position = 0
            for earlier in reversed(order[:index]):
                hits = [
                    i
                    for i, c in enumerate(nb.cells)
                    if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == earlier
                ]
                if hits:
                    position = hits[0] + 1
                    break
            nb.cells.insert(position, cell)

    @staticmethod
    def _warning_cell(problems):
        lines = "\n".join(f"- {p}" for p in problems)
        return new_markdown_cell(
            f"<!-- {FLAG_MARKER} -->\n**Note from the grader:** this submission changed cells that must stay "
            f"as released. They were put back before grading and the submission is flagged for your "
            f"instructor:\n\n{lines}"
        )

    @staticmethod
    def _flag(info) -> None:
        with Gradebook(info["db_url"]) as gradebook:
            try:
                submission = gradebook.find_submission_notebook(
                    info["notebook"], info["assignment"], info["student"]
                )
            except MissingEntry:
                return
            submission.flagged = True
            gradebook.db.commit()


class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """Reduce error outputs of hidden-test cells to `Name: message` (see module docstring)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
