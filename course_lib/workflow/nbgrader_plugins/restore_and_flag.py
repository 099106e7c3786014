"""`RestoreAndFlag`, in autograde's sanitizing step (in place of nbgrader's OverwriteCells).

nbgrader already overwrites edited locked cells with their original text, but it does not say so, and it does not
bring back deleted read-only cells. This step restores every locked cell (test cells, read-only set-up cells), puts a
warning cell at the top of the graded notebook that names what was changed, and sets the submission's `flagged`
mark in the gradebook for the instructor. It runs before any of the submission's code, so it also makes the
process's `TrustedGrader` then (`common.trusted_grader`), which loads the grader's code.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbformat import from_dict
from nbgrader.api import Gradebook
from nbgrader.preprocessors import OverwriteCells

import course_lib.workflow.nbgrader_plugins.common as common
from course_lib.workflow.course import grade_id, without_repository_url

__all__ = ["RestoreAndFlag"]


@dataclass(frozen=True)
class _SourceCell:
    name: str
    source: str
    cell_type: str
    locked: bool
    checksum: str | None
    points: float | None  # None for cells that are not graded


def _same(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


def _unchanged(source: str, submitted: str) -> bool:
    """A locked cell is unchanged as released, or as the instructor wrote it: the instructor's own source notebook,
    submitted as it is, has its hidden tests in its test cells. A hand-out's set-up cell clones its own URL."""
    source, submitted = without_repository_url(source), without_repository_url(submitted)
    return _same(common.strip_hidden_tests(source), submitted) or _same(source, submitted)


class RestoreAndFlag(OverwriteCells):
    """OverwriteCells that also restores deleted locked cells and flags any tampering (see module docstring)."""

    def report_change(self, name, attr, old, new):
        # A student version's test cell lacks its hidden tests, so its checksum always differs from the source's:
        # that is how it was released, not a change. Real edits are named in the note that `preprocess` writes.
        if attr == "checksum" and name in self._hidden_cells:
            return
        super().report_change(name, attr, old, new)

    def preprocess(self, nb, resources):
        if common.trusted_module().available():
            common.trusted_grader()  # made before the first submission's code runs in this process
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            source_nb = gradebook.find_notebook(info["notebook"], info["assignment"])
            points = {cell.name: cell.max_score for cell in source_nb.grade_cells}
            solution_ids = {cell.name for cell in source_nb.solution_cells}
            source_cells = [
                _SourceCell(c.name, c.source, c.cell_type, bool(c.locked), c.checksum, points.get(c.name))
                for c in source_nb.source_cells
            ]

        submitted = {grade_id(cell): cell for cell in nb.cells if grade_id(cell)}
        self._hidden_cells = {  # released without their hidden tests, and submitted as released
            c.name
            for c in source_cells
            if common.strip_hidden_tests(c.source) != c.source
            and c.name in submitted
            and _same(common.strip_hidden_tests(c.source), submitted[c.name].source)
        }
        # Graded and answer cells only: every lesson has a `setup` and a `self_grade` cell.
        known = {cell.name for cell in source_cells if cell.points is not None or cell.name in solution_ids}
        if known and not known & set(submitted):
            raise ValueError(
                f"this submission has none of the graded cells of {info['assignment']}/{info['notebook']}: "
                "it is probably another lesson's notebook (or cells were re-created by copy and paste)"
            )
        problems = []
        for cell in source_cells:
            if cell.name in solution_ids:  # a deleted answer scores 0 (the grader says so); it is not tampering
                continue
            if not (cell.locked or cell.points is not None):
                continue
            if cell.name not in submitted:
                problems.append(f"locked cell `{cell.name}` was deleted")
                self._insert(nb, cell, [c.name for c in source_cells])
            elif not _unchanged(cell.source, submitted[cell.name].source):
                problems.append(f"locked cell `{cell.name}` was edited")

        nb, resources = super().preprocess(nb, resources)  # puts back the original text of locked cells
        if problems:
            nb.cells.insert(0, common.warning_cell(problems))
            common.flag_submission(info)
            self.log.warning("Submission of %s flagged: %s", info.get("student"), "; ".join(problems))
        return nb, resources

    @staticmethod
    def _insert(nb, cell: _SourceCell, order: list[str]) -> None:
        """Re-insert a deleted locked cell after the nearest earlier source cell still present."""
        metadata = {"grade": cell.points is not None, "grade_id": cell.name, "locked": True, "solution": False}
        metadata |= {"schema_version": 3, "checksum": cell.checksum}
        if cell.points is not None:
            metadata["points"] = cell.points
        node = from_dict(
            {
                "id": f"restored-{cell.name}"[:64],
                "cell_type": cell.cell_type,
                "metadata": {"deletable": False, "editable": False, "nbgrader": metadata},
                "source": cell.source,
            }
        )
        if cell.cell_type == "code":
            node["execution_count"] = None
            node["outputs"] = []
        position = 0
        for earlier in reversed(order[: order.index(cell.name)]):
            hits = [i for i, c in enumerate(nb.cells) if grade_id(c) == earlier]
            if hits:
                position = hits[0] + 1
                break
        nb.cells.insert(position, node)
