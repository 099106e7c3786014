"""nbgrader's plug-ins: the steps `notebooks/nbgrader_config.py` puts into nbgrader's commands, one per file
(docs/ARCHITECTURE.md, "Trusted grading" and "Grading a class").

autograde, sanitizing: `RestoreAndFlag` (restore_and_flag.py: locked cells put back, tampering flagged);
autograde, grading: `KeepGradingWhenKernelDies` (keep_grading.py: nbgrader's Execute step, which runs no kernel for
a lesson), `TrustedVerdicts` (trusted_verdicts.py: every test cell's verdict reached outside any kernel),
`SaveAutoGradesInOneCommit` (save_grades.py);
generate_assignment: `InlineImages` (inline_images.py: diagrams as data: URIs; formgrader writes elsewhere);
generate_feedback: `HideHiddenTestTracebacks`, `WrapLongLines`, and the `FeedbackExporter` (feedback_exporter.py),
an `OfflineMathExporter` (offline_math.py: formulas as MathML, no MathJax from a CDN; nbconvert's second pass over
the page only where it changes something).
What they share (the notes at the top of a graded notebook, the gradebook's flag, the process's trusted grader):
common.py.

They run inside nbgrader's processes; what starts those processes for a class is `course_lib.workflow.nbgrader_runs`.
"""

from course_lib.workflow.nbgrader_plugins.common import FLAG_MARKER, strip_hidden_tests, warning_cell
from course_lib.workflow.nbgrader_plugins.feedback_exporter import FeedbackExporter
from course_lib.workflow.nbgrader_plugins.hide_hidden_tests import HideHiddenTestTracebacks
from course_lib.workflow.nbgrader_plugins.inline_images import FORMGRADER_RELEASE, InlineImages, in_jupyter_server
from course_lib.workflow.nbgrader_plugins.keep_grading import KeepGradingWhenKernelDies
from course_lib.workflow.nbgrader_plugins.offline_math import OfflineMathExporter
from course_lib.workflow.nbgrader_plugins.restore_and_flag import RestoreAndFlag
from course_lib.workflow.nbgrader_plugins.save_grades import SaveAutoGradesInOneCommit
from course_lib.workflow.nbgrader_plugins.trusted_verdicts import TrustedVerdicts
from course_lib.workflow.nbgrader_plugins.wrap_long_lines import WRAP_CSS, WrapLongLines

__all__ = [
    "FLAG_MARKER",
    "FORMGRADER_RELEASE",
    "WRAP_CSS",
    "FeedbackExporter",
    "HideHiddenTestTracebacks",
    "InlineImages",
    "KeepGradingWhenKernelDies",
    "OfflineMathExporter",
    "RestoreAndFlag",
    "SaveAutoGradesInOneCommit",
    "TrustedVerdicts",
    "WrapLongLines",
    "in_jupyter_server",
    "strip_hidden_tests",
    "warning_cell",
]
