"""`KeepGradingWhenKernelDies`, autograde's Execute step (in place of nbgrader's Execute).

By default it runs no cell at all when the trusted verdicts decide every test cell (a lesson of this course, on a
system that can fork): no kernel starts, and the graded notebook keeps only what grading put there (the test cells'
verdicts; `common.trusted_decides`). With `run_cells = "always"`, or for a notebook the trusted grader cannot grade,
it runs the notebook as nbgrader's Execute does, except that a kernel that dies (`os._exit`, a segfault, the memory
killer) ends the run of the notebook but not its grading: the cells it did not reach get an error output, and the
trusted verdicts then grade each exercise on its own, so only the exercise that killed its process scores 0. Its
kernel is confined and its outputs capped (`kernels.py`: a memory limit, writes only in the submission's own folder,
at most 100,000 printed characters kept per cell); where writes cannot be contained, the course folders a kernel must
not touch are compared before and after it ran.

What every submission of the process is held to is said once in the log, and kept in `limits_said` for the class
command's workers to report as data.
"""

from __future__ import annotations

from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbformat import from_dict
from nbgrader.preprocessors import Execute
from traitlets import Enum, Integer

import course_lib.workflow.nbgrader_plugins.common as common
from course_lib.workflow.kernels import ConfinedKernelManager, CourseWatch, GradingLimits, OutputCap

__all__ = ["KeepGradingWhenKernelDies"]


class KeepGradingWhenKernelDies(Execute):
    """nbgrader's Execute step: no kernel where the trusted verdicts decide every test cell, else a confined kernel
    whose outputs are capped, carrying on to grading when it dies (see module docstring)."""

    run_cells = Enum(
        ["when-needed", "always"],
        "when-needed",
        help=(
            "'when-needed': run no cell when the trusted grader decides every test cell of the notebook (a lesson of "
            "the course); 'always': run every cell in a confined kernel, so the graded notebook and the feedback also "
            "show what each cell printed and drew. The scores are the same either way."
        ),
    ).tag(config=True)
    max_stream_chars = Integer(100_000, help="Characters of printed text kept per cell.").tag(config=True)
    max_output_chars = Integer(5_000_000, help="Characters of all outputs (figures too) kept per cell.").tag(
        config=True
    )
    # What every submission of this process is held to, said once in the log and kept here (None: not yet said).
    limits_said: str | None = None

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", ConfinedKernelManager)  # nbgrader's Execute sets its own
        super().__init__(**kwargs)

    def _say_limits(self, limits: GradingLimits, kernel: bool) -> None:
        if KeepGradingWhenKernelDies.limits_said is not None:  # once per process
            return
        said = limits.describe() if kernel else limits.describe_without_kernel()
        log = self.log.warning if kernel and not limits.contained() else self.log.info
        log("Grading kernels: %s", said)
        KeepGradingWhenKernelDies.limits_said = said

    def preprocess(self, nb, resources=None, km=None):
        resources = resources if resources is not None else {}
        info = resources.get("nbgrader", {})
        student = info.get("student")
        limits = GradingLimits(parent=self)
        if self.run_cells == "when-needed" and common.trusted_decides(info):
            self._say_limits(limits, kernel=False)
            return nb, resources  # nothing runs: the trusted verdicts are the grade, and all of it
        self._say_limits(limits, kernel=True)
        watch = None if limits.contained() else CourseWatch(Path.cwd())
        self._cap = OutputCap(self.max_stream_chars, self.max_output_chars)
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except DeadKernelError as exc:
            self.log.warning("The kernel running %s's notebook died (%s); grading what it ran", student, exc)
            message = "the kernel died before this cell ran (an earlier cell ended its process)"
            for cell in nb.cells:
                if cell.cell_type == "code" and cell.get("execution_count") is None and not cell.get("outputs"):
                    cell.outputs = [
                        from_dict(
                            {"output_type": "error", "ename": "DeadKernelError", "evalue": message, "traceback": []}
                        )
                    ]
        resources[common.KERNEL_RAN] = True
        for line in self._cap.report():
            self.log.warning("Output of %s's notebook cut: %s", student, line)
        changes = watch.changes() if watch is not None else []
        problems = [f"while this submission ran, {change} (writes were not contained)" for change in changes]
        if problems and info:
            nb.cells.insert(0, common.warning_cell(problems))
            common.flag_submission(info)
            self.log.warning("Submission of %s flagged: %s", student, "; ".join(problems))
        return nb, resources

    def output(self, outs, msg, display_id, cell_index):
        admitted, note = self._cap.admit(msg, cell_index, outs)
        out = super().output(outs, admitted, display_id, cell_index) if admitted is not None else None
        if note is not None:
            outs.append(note)
        return out
