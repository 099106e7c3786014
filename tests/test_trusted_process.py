"""What making a `TrustedGrader` does to its process (course_lib/workflow/trusted.py, `_warm_up`), in a fresh
interpreter: nbgrader's grading processes start from nothing, unlike the test suite's, which has imported torch's
compiler by the time it grades.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.nbtools import ROOT

pytestmark = pytest.mark.slow

FIRST_GRADE = f"""
import sys
sys.path.insert(0, {str(ROOT.parent)!r})
import torch
assert "torch._dynamo" not in sys.modules  # as in a fresh nbgrader process
from course_lib.workflow.trusted import Limits, TrustedGrader
from tests.nbtools import grade_id, read, solved, source_path

grader = TrustedGrader()
print("threads", torch.get_num_threads())
lesson = "04_attention"
nb = solved(lesson)
hidden = {{grade_id(c): c.source for c in read(source_path(lesson)).cells if grade_id(c)}}
for cell in nb.cells:
    if (grade_id(cell) or "").startswith("test_train_step"):
        cell.source = hidden[grade_id(cell)]
grading = grader.grade(nb, lesson, only=("train_step",), limits=Limits(time=120.0))
for test, verdict in sorted(grading.verdicts.items()):
    print(test, verdict.passed, verdict.message)
"""


def test_the_first_submission_a_process_grades_can_make_an_optimizer_in_its_sandbox():
    """The first optimizer a process makes imports torch's compiler, which asks for a temporary folder: a sandbox
    under Landlock could not, and the first submission of each nbgrader process lost `train_step`'s points."""
    env = {"OMP_NUM_THREADS": "2", "PATH": ""}
    shown = subprocess.run(
        [sys.executable, "-c", FIRST_GRADE], capture_output=True, text=True, timeout=600, env=env, check=True
    ).stdout
    lines = shown.splitlines()
    assert lines[0] == "threads 1"  # the checks' tiny tensors: a thread pool only waits for its threads
    verdicts = lines[1:]
    assert [line.split()[:2] for line in verdicts] == [["test_train_step", "True"], ["test_train_step_hidden", "True"]]
