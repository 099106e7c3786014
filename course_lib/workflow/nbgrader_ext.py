"""The nbgrader preprocessors the course plugs in through notebooks/nbgrader_config.py (docs/ARCHITECTURE.md,
Trusted grading).

- `RestoreAndFlag` (autograde): nbgrader already overwrites edited locked cells with their original text, but
  it does not say so, and it does not bring back deleted read-only cells. This preprocessor restores every
  locked cell (test cells, read-only set-up cells), puts a warning cell at the top of the graded notebook that
  names what was changed, and sets the submission's `flagged` mark in the gradebook for the instructor. It runs
  before any of the submission's code, so it also makes the process's `TrustedGrader` then (`trusted_grader`),
  which loads the grader's code.
- `TrustedVerdicts` (autograde, right after the notebook has run): replaces every test cell's outputs with the
  verdict that `course_lib.workflow.trusted` reaches outside the notebook's kernel, so nbgrader's scores,
  feedback and formgrader all show trusted results. It also puts back course files the submission changed on
  disk, and flags (with a note at the top) a submission whose interference the grader could tell.
- `KeepGradingWhenKernelDies` (autograde): nbgrader's Execute step, which by default runs no cell at all when the
  trusted verdicts decide every test cell (a lesson of this course, on a system that can fork): no kernel starts,
  and the graded notebook keeps only what grading put there (the test cells' verdicts; `trusted_decides`). With
  `run_cells = "always"`, or for a notebook the trusted grader cannot grade, it runs the notebook as nbgrader's
  Execute does, except that a kernel that dies (`os._exit`, a segfault, the memory killer) ends the run of the
  notebook but not its grading: the cells it did not reach get an error output, and the trusted verdicts then
  grade each exercise on its own, so only the exercise that killed its process scores 0. Its kernel is confined
  and its outputs capped (`kernels.py`: a memory limit, writes only in the submission's own folder, at most
  100,000 printed characters kept per cell); where writes cannot be contained, the course folders a kernel must
  not touch are compared before and after it ran.
- `InlineImages` (generate_assignment): the repository's diagrams go into the student version as data: URIs, as
  `make release` puts them there, so every `generate_assignment` — the command, or formgrader's *Generate* button
  — writes the student version the course ships, never one whose diagrams are broken links to files beside it.
  formgrader writes it into the git-ignored `FORMGRADER_RELEASE` folder, not into the committed `release/`
  (`in_jupyter_server`, read by nbgrader_config.py): its button deletes the lesson's folder before it writes.
- `HideHiddenTestTracebacks` (feedback): a failing hidden test cell keeps only its error's name and message.
  A traceback would print the line that failed, which is hidden test text.
- `WrapLongLines` (feedback): outputs wrap at the page's edge instead of being cut off there (a grader's message
  is one long line).
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbformat import from_dict
from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Enum, Integer

from course_lib import manifest
from course_lib.workflow.course import grade_id, without_repository_url
from course_lib.workflow.kernels import ConfinedKernelManager, CourseWatch, GradingLimits, OutputCap

__all__ = [
    "FLAG_MARKER",
    "FORMGRADER_RELEASE",
    "HideHiddenTestTracebacks",
    "InlineImages",
    "KeepGradingWhenKernelDies",
    "RestoreAndFlag",
    "TrustedVerdicts",
    "WrapLongLines",
    "in_jupyter_server",
    "strip_hidden_tests",
    "trusted_decides",
]

FLAG_MARKER = "course-flag: locked cells restored"
# Set in an autograde's resources by KeepGradingWhenKernelDies when it ran the notebook in a kernel.
KERNEL_RAN = "course_kernel_ran"
_HIDDEN = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.S | re.M)


def _trusted():
    """The trusted grading module, imported on first use: it loads torch and every check (seconds), which
    nbgrader's other commands (generate_assignment, generate_feedback, export, formgrader) load this module for but
    never need."""
    from course_lib.workflow import trusted

    return trusted


@functools.cache
def trusted_grader():
    """This nbgrader process's one `TrustedGrader`, made on the first call: by `RestoreAndFlag`, which runs before
    any submission's code in the process, and then handed to `TrustedVerdicts`. nbgrader builds its preprocessors
    anew for every notebook, from their classes, so the grader cannot be given to them; it is kept here, the one
    place that holds state across the notebooks of a run."""
    return _trusted().TrustedGrader(Path.cwd())


def trusted_decides(info: dict | None) -> bool:
    """Whether `TrustedVerdicts` will write every test cell's verdict of the notebook nbgrader describes with `info`
    (`resources["nbgrader"]`): trusted grading works here (it forks) and the assignment is a lesson of the course.
    Then what the notebook's cells do in a kernel decides no score (every graded cell of the course is a test cell)."""
    if not info or not _trusted().available():
        return False
    try:
        manifest.lesson(info.get("assignment", ""))
    except KeyError:
        return False
    return True


FORMGRADER_RELEASE = "formgrader_release"


def in_jupyter_server() -> bool:
    """Whether this process is a running Jupyter server: nbgrader_config.py is then read for formgrader (or another
    of nbgrader's server extensions), not for a command. Looked up without importing the server's code."""
    import sys

    server = sys.modules.get("jupyter_server.serverapp")
    return server is not None and server.ServerApp.initialized()


def strip_hidden_tests(source: str) -> str:
    """The cell text a student sees: the instructor source without its hidden-test region."""
    return _HIDDEN.sub("", source)


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
    return _same(strip_hidden_tests(source), submitted) or _same(source, submitted)


class RestoreAndFlag(OverwriteCells):
    """OverwriteCells that also restores deleted locked cells and flags any tampering (see module docstring)."""

    def report_change(self, name, attr, old, new):
        # A student version's test cell lacks its hidden tests, so its checksum always differs from the source's:
        # that is how it was released, not a change. Real edits are named in the note that `preprocess` writes.
        if attr == "checksum" and name in self._hidden_cells:
            return
        super().report_change(name, attr, old, new)

    def preprocess(self, nb, resources):
        if _trusted().available():
            trusted_grader()  # made before the first submission's code runs in this process
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
            if strip_hidden_tests(c.source) != c.source
            and c.name in submitted
            and _same(strip_hidden_tests(c.source), submitted[c.name].source)
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
            if cell.name in solution_ids:
                if cell.name not in submitted:
                    problems.append(f"answer cell `{cell.name}` was deleted (its exercise scores 0)")
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
            nb.cells.insert(0, warning_cell(problems))
            flag_submission(info)
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


def warning_cell(problems: list[str]):
    """The note at the top of a graded notebook that lists what the grader found and put right."""
    lines = "\n".join(f"- {p}" for p in problems)
    return new_markdown_cell(
        f"<!-- {FLAG_MARKER} -->\n**Note from the grader:** this submission changed things that must stay as "
        f"released, or reached into the grading. What it changed was put back, the exercises concerned were graded "
        f"as described below, and the submission is flagged for your instructor:\n\n{lines}"
    )


def flag_submission(info) -> None:
    """Set the submission's `flagged` mark in the gradebook (the instructor sees it in formgrader)."""
    with Gradebook(info["db_url"]) as gradebook:
        try:
            submission = gradebook.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
        except MissingEntry:
            return
        submission.flagged = True
        gradebook.db.commit()


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
    _said_limits = False  # the log says once per process what the kernels are held to

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", ConfinedKernelManager)  # nbgrader's Execute sets its own
        super().__init__(**kwargs)

    def _say_limits(self, limits: GradingLimits, kernel: bool) -> None:
        if KeepGradingWhenKernelDies._said_limits:  # once per process: what every submission here is held to
            return
        if kernel:
            log = self.log.info if limits.contained() else self.log.warning
            log("Grading kernels: %s", limits.describe())
        else:
            self.log.info("Grading kernels: %s", limits.describe_without_kernel())
        KeepGradingWhenKernelDies._said_limits = True

    def preprocess(self, nb, resources=None, km=None):
        resources = resources if resources is not None else {}
        info = resources.get("nbgrader", {})
        student = info.get("student")
        limits = GradingLimits(parent=self)
        if self.run_cells == "when-needed" and trusted_decides(info):
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
        resources[KERNEL_RAN] = True
        for line in self._cap.report():
            self.log.warning("Output of %s's notebook cut: %s", student, line)
        changes = watch.changes() if watch is not None else []
        problems = [f"while this submission ran, {change} (writes were not contained)" for change in changes]
        if problems and info:
            nb.cells.insert(0, warning_cell(problems))
            flag_submission(info)
            self.log.warning("Submission of %s flagged: %s", student, "; ".join(problems))
        return nb, resources

    def output(self, outs, msg, display_id, cell_index):
        admitted, note = self._cap.admit(msg, cell_index, outs)
        out = super().output(outs, admitted, display_id, cell_index) if admitted is not None else None
        if note is not None:
            outs.append(note)
        return out


class TrustedVerdicts(NbGraderPreprocessor):
    """Test-cell outputs from trusted verdicts instead of the kernel's (see module docstring)."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        if not trusted_decides(info):
            why = "trusted grading needs os.fork" if not _trusted().available() else "it is not a lesson of this course"
            self.log.warning("%s: %s, so the notebook's own verdicts are kept", info["assignment"], why)
            return nb, resources
        grader = trusted_grader()
        changed = grader.restore_files()
        problems = [f"the course's file `{path}` was changed on disk; it was put back" for path in changed]
        if problems:  # flagged now, so that the mark stands even if grading this notebook fails below
            flag_submission(info)
        limits = _trusted().Limits(memory=GradingLimits(parent=self).memory_bytes())
        grading = grader.grade(nb, info["assignment"], limits=limits)
        for cell in nb.cells:
            verdict = grading.verdicts.get(grade_id(cell))
            if verdict is None and _is_test_cell(cell):  # nbgrader would score a cell without an error as passed
                verdict = _trusted().Verdict(False, "the grader reached no verdict for this test cell.", grade_id(cell))
            if verdict is None:
                continue
            kernel_passed = resources.get(KERNEL_RAN) and not any(
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
            nb.cells.insert(0, warning_cell(problems))
            flag_submission(info)
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


WRAP_CSS = """
/* course: long grading messages wrap at the page's edge (nbgrader_ext.WrapLongLines) */
div.output_area pre, div.output_subarea pre { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


class WrapLongLines(NbGraderPreprocessor):
    """Add a style sheet to the feedback page that wraps long output lines (run after CSSHTMLHeaderPreprocessor)."""

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(WRAP_CSS)
        return nb, resources


class InlineImages(NbGraderPreprocessor):
    """Markdown references to the repository's images become data: URIs (`images.inline_images`), resolved against
    the instructor source's folder. An image that is not there is left as a link, with a warning: a course copied
    without its images/ (a test's, a benchmark's) still generates, and `make release` names the missing file."""

    def preprocess(self, nb, resources):
        from course_lib.workflow.images import MissingImageError, inline_images

        base = Path(resources.get("metadata", {}).get("path") or ".")
        inlined = copy.deepcopy(nb)
        try:
            inline_images(inlined, base)
        except MissingImageError as exc:
            self.log.warning("Diagrams left as links: %s", exc)
            return nb, resources
        return inlined, resources


class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """Reduce error outputs of hidden-test cells to `Name: message` (see module docstring)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
