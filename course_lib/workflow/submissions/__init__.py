"""What students send: reading a submitted notebook however it was saved, repairing what is clearly meant
(`repair.py`), and collecting a class's files into the course: new, unchanged, resubmitted, late, and the history of
earlier ones (`collection.py`). Nothing here runs nbgrader or a student's code; the class command
(`course_lib.workflow.class_command`) uses both, and its workers grade what `repair.read_submission` returns.
"""

from course_lib.workflow.submissions.collection import (
    HISTORY,
    RECORDS,
    Collected,
    Earlier,
    Incoming,
    collect,
    current_score,
    find_incoming,
    fingerprint,
    late_by,
    parse_deadline,
    received_at,
    record_history,
    set_deadline,
)
from course_lib.workflow.submissions.repair import REPAIR_MARKER, LessonCells, Repaired, Unreadable, read_submission

__all__ = [
    "HISTORY",
    "RECORDS",
    "REPAIR_MARKER",
    "Collected",
    "Earlier",
    "Incoming",
    "LessonCells",
    "Repaired",
    "Unreadable",
    "collect",
    "current_score",
    "find_incoming",
    "fingerprint",
    "late_by",
    "parse_deadline",
    "read_submission",
    "received_at",
    "record_history",
    "set_deadline",
]
