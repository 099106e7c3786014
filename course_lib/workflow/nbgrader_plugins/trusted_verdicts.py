"""`TrustedVerdicts`, in autograde right after the Execute step: every test cell's outputs become the verdict that
`course_lib.workflow.trusted` reaches outside any kernel, so nbgrader's scores, feedback and formgrader all show
trusted results. It also puts back course files the submission changed on disk, and flags (with a note at the top) a
submission whose interference the grader could tell.
"""

from __future__ import annotations

from nbformat import from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

import course_lib.workflow.nbgrader_plugins.common as common
from course_lib.workflow.course import grade_id
from course_lib.workflow.kernels import GradingLimits

__all__ = ["TrustedVerdicts"]


class TrustedVerdicts(NbGraderPreprocessor):
    """Test-cell outputs from trusted verdicts instead of the kernel's (see module docstring)."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        if not common.trusted_decides(info):
            why = (
                "trusted grading needs os.fork"
                if not common.trusted_module().available()
                else "it is not a lesson of this course"
            )
            self.log.warning("%s: %s, so the notebook's own verdicts are kept", info["assignment"], why)
            return nb, resources
        grader = common.trusted_grader()
        changed = grader.restore_files()
        problems = [f"the course's file `{path}` was changed on disk; it was put back" for path in changed]
        if problems:  # flagged now, so that the mark stands even if grading this notebook fails below
            common.flag_submission(info)
        limits = common.trusted_module().Limits(memory=GradingLimits(parent=self).memory_bytes())
        grading = grader.grade(nb, info["assignment"], limits=limits)
        for cell in nb.cells:
            verdict = grading.verdicts.get(grade_id(cell))
            if verdict is None and _is_test_cell(cell):  # nbgrader would score a cell without an error as passed
                verdict = common.trusted_module().Verdict(
                    False, "the grader reached no verdict for this test cell.", grade_id(cell)
                )
            if verdict is None:
                continue
            kernel_passed = resources.get(common.KERNEL_RAN) and not any(
                o.get("output_type") == "error" for o in cell.get("outputs", [])
            )
            message = verdict.message
            if kernel_passed and not verdict.passed:
                message += (
                    " (In your notebook this check passed: graded on its own, with only its answer cell, your "
                    "answer gives the result above.)"
                )
            cell.outputs = [_output(verdict.passed, verdict.exercise, message)]
        problems += grading.notes
        if problems:
            nb.cells.insert(0, common.warning_cell(problems))
            common.flag_submission(info)
            self.log.warning("Submission of %s flagged: %s", info.get("student"), "; ".join(problems))
        return nb, resources


def _is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _output(passed: bool, exercise: str, message: str):
    if passed:
        return from_dict({"output_type": "stream", "name": "stdout", "text": message + "\n"})
    text = f"[{exercise}] {message}"
    return from_dict(
        {"output_type": "error", "ename": "GradingError", "evalue": text, "traceback": [f"GradingError: {text}"]}
    )
