"""A stand-in for the class command's grading worker (course_lib/workflow/nbgrader_runs/worker.py), for the tests of
the pool that starts workers (tests/test_classroom.py): the same command line and the same records, no nbgrader.
A student named `crash...` ends the process with a real segmentation fault while on that student; one named
`hang...` never finishes; every other student is graded at once with full marks.

    python -m tests.stand_in_worker COURSE LESSON RECORDS STUDENT... [-- OPTION...]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from course_lib.workflow.nbgrader_runs.records import Outcome, Started, write_record


def main() -> None:
    argv = sys.argv[1:]
    argv = argv[: argv.index("--")] if "--" in argv else argv
    _, lesson, records, *students = argv
    for student in students:
        if student.startswith(("crash", "hang")):  # only these say they started: nothing else can look stuck
            write_record(Path(records), Started(student, time.time()))
        if student.startswith("crash"):
            os.kill(os.getpid(), signal.SIGSEGV)
        if student.startswith("hang"):
            while True:
                time.sleep(60)
        outcome = Outcome(student, lesson, graded=True, fingerprint="", scores={"x": [1.0, 1.0]}, pid=os.getpid())
        write_record(Path(records), outcome)


if __name__ == "__main__":
    main()
