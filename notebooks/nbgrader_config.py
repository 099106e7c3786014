# nbgrader configuration of the course. The folder holding this file is the nbgrader course root:
#   source/<lesson>/<lesson>.ipynb    instructor sources (solutions, hidden tests)  — edit these
#   release/<lesson>/<lesson>.ipynb   student versions, written by `make release` and committed — never edit by hand
# Student versions come from `make release` (python -m course_lib release), which also refreshes each source's Colab
# badge and set-up cell; a class is graded with `make class` (python -m course_lib class: gradebook, collection,
# autograde, feedback, class_grades.csv and class_report.md). Any other nbgrader command runs here through
# `make nbgrader ARGS="..."` (export, release_feedback, ...). A class's gradebook.db, submitted/, autograded/ and
# feedback/ hold learners' work and grades: they stay out of git.
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ClearSolutions,
    ComputeChecksums,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    IncludeHeaderFooter,
    InstantiateTests,
    LimitOutput,
    LockCells,
    OverwriteKernelspec,
    SaveCells,
)

from course_lib.workflow.nbgrader_plugins import (
    FORMGRADER_RELEASE,
    FeedbackExporter,
    HideHiddenTestTracebacks,
    InlineImages,
    KeepGradingWhenKernelDies,
    RestoreAndFlag,
    SaveAutoGradesInOneCommit,
    TrustedVerdicts,
    WrapLongLines,
    in_jupyter_server,
)
from course_lib.workflow.startup import KERNEL_ARGUMENTS

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "transformers-from-scratch"

# Solutions and hidden tests are delimited as usual; student versions get this stub in answer cells.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN TESTS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN TESTS"
c.ClearOutput.enabled = True

# Every generate_assignment — `make release`, the class command, formgrader's Generate button (which writes into
# formgrader_release/, below) — puts the repository's diagrams into the student version as data: URIs, so it writes
# the student version the course ships: for an up-to-date lesson, the committed file byte for byte, never one whose
# diagrams are broken links. nbgrader's own list, with InlineImages first.
c.GenerateAssignment.preprocessors = [
    InlineImages,
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    ClearSolutions,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    SaveCells,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
]
# formgrader (`make lab-instructor`) writes student versions into the git-ignored formgrader_release/, and releases
# to the exchange from there: its Generate button deletes the lesson's folder before it writes, and must never
# delete or replace the committed release/ (a generation that failed half-way left the lesson without its student
# version). Commands (`make release`, the class command, `make nbgrader`) keep release/.
if in_jupyter_server():
    c.CourseDirectory.release_directory = FORMGRADER_RELEASE

# A lesson's submission is graded without running it: the trusted grader (below) runs each answer cell on its own
# in a sandbox and decides every test cell, so no kernel is started and no other cell (the lessons' training demos,
# cells a student added) runs at all. The graded notebook and the feedback then show the test cells' verdicts and
# no other outputs. "always" runs every cell in a confined kernel first, as nbgrader does, for instructors who want
# each cell's outputs in formgrader and the feedback (the same scores; each submission then also takes as long as
# its notebook takes to run).
c.KeepGradingWhenKernelDies.run_cells = "when-needed"

# Where a kernel runs ("always", or a notebook that is not a lesson of the course): per-cell time limit (seconds).
# A cell that runs longer is interrupted, gets an error output, and the rest of the notebook (and of the class) is
# still graded. Lessons switch training cells to their smallest configuration when NBGRADER_EXECUTION is set.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
# A kernel gets 3 minutes to start (nbclient's default is 1): on a loaded machine the first one can be slow.
c.Execute.startup_timeout = 180
# Faster per submission, same grading (course_lib/workflow/startup.py): the kernel skips an unused import that
# costs seconds, and it is stopped at once after the last cell instead of being asked to shut down and waited for
# (its outputs are all in by then; nothing it does afterwards can reach the grade).
c.Execute.extra_arguments = KERNEL_ARGUMENTS
c.Execute.shutdown_kernel = "immediate"

# Each process that runs a submission's code (the trusted grader's sandboxes, and a kernel) may allocate at most
# this much memory: a memory bomb ends its own cell with MemoryError (course_lib/workflow/kernels.py,
# course_lib/grading/kit/confine.py). Where Linux's Landlock is available, a kernel writes only in its own
# autograded/<student>/<lesson>/ folder and a temporary one; elsewhere the log says so and some folders are checked
# instead. `python -m course_lib class --memory 2G` overrides the limit for one run. Of what one cell prints, the
# first 100,000 characters are kept.
c.GradingLimits.memory = "4G"
c.GradingLimits.contain_writes = True
c.KeepGradingWhenKernelDies.max_stream_chars = 100_000

# Edited or deleted locked cells are put back before grading, and the submission is flagged
# (RestoreAndFlag replaces nbgrader's OverwriteCells in the sanitizing step).
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreAndFlag,
    CheckCellMetadata,
]

# Verdicts are reached outside any kernel (course_lib.workflow.trusted): TrustedVerdicts writes every test cell's
# outputs with the trusted result, before nbgrader scores them. KeepGradingWhenKernelDies is nbgrader's Execute
# step: it runs nothing for a lesson (run_cells above); where it does run a kernel, one that dies ends the run, not
# the grading. SaveAutoGradesInOneCommit is nbgrader's SaveAutoGrades with one commit per notebook instead of one
# per cell (course_lib/workflow/nbgrader_plugins/save_grades.py): the same rows.
c.Autograde.autograde_preprocessors = [
    KeepGradingWhenKernelDies,
    TrustedVerdicts,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGradesInOneCommit,
    AssignLatePenalties,
    CheckCellMetadata,
]

# Feedback must never show hidden tests: nbgrader 0.9's feedback exporter keeps them unless told otherwise,
# and a failing hidden test's traceback would quote its failing line, so that is cut to the message. Long
# messages wrap at the page's edge.
# The feedback pages are nbgrader's, from an exporter that converts each Markdown text of the lesson once per process
# instead of once per student (course_lib/workflow/nbgrader_plugins/feedback_exporter.py), and skips nbconvert's
# re-parse of a finished page where it would change nothing (offline_math.py): the same documents.
c.GenerateFeedback.exporter_class = FeedbackExporter
c.GenerateFeedback.preprocessors = [
    GetGrades,
    HideHiddenTestTracebacks,
    ClearHiddenTests,
    CSSHTMLHeaderPreprocessor,
    WrapLongLines,
]
