"""What grading one submission came to, as data: a worker writes one `Outcome` per submission, the class command
reads them (house style: workers return records, not log lines).

A record is a small JSON file, `<folder>/<student>.json`, written whole or not at all (a temporary file renamed over
it), so a reader never sees half of one. Before a worker starts on a submission it writes a `started` record for
it; the outcome replaces it. A `started` record left behind means the worker stopped while grading that submission.

The class command keeps each student's last outcome of a lesson in `notebooks/class_records/<lesson>/`: it is how a
later run knows that a file which could not be graded has not changed since (and is not tried again), and what
was repaired in it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_lib.workflow.submissions.collection import RECORDS

__all__ = ["RECORDS", "Outcome", "Started", "exercise_of", "read_outcome", "read_record", "write_record"]


def exercise_of(cell_name: str, exercises: list[str]) -> str | None:
    """The exercise a test cell (`test_<exercise>` or `test_<exercise>_...`) belongs to; the longest name wins."""
    rest = cell_name.removeprefix("test_")
    matches = [e for e in exercises if rest == e or rest.startswith(e + "_")]
    return max(matches, key=len, default=None)


@dataclass(frozen=True)
class Started:
    """A worker began grading `student`'s submission (at `at`, seconds of the worker's clock since the epoch)."""

    student: str
    at: float
    kind: str = "started"


@dataclass(frozen=True)
class Outcome:
    """What grading one submission came to."""

    student: str
    lesson: str
    graded: bool
    fingerprint: str  # of the submitted file that was graded (`submissions.fingerprint`)
    reason: str = ""  # why it was not graded, in words for the instructor and the student
    retry: bool = False  # a later run tries it again although the file is unchanged (grading, not the file, failed)
    scores: dict[str, list[float]] = field(default_factory=dict)  # exercise -> [points, out of]
    flagged: bool = False  # the gradebook's tamper flag
    repairs: list[str] = field(default_factory=list)  # what was repaired in the file, or could not be
    seconds: float = 0.0  # grading it took in the worker
    peak_mib: int = 0  # the worker's peak resident memory so far
    limits: str = ""  # what the grading processes were held to
    pid: int = 0  # the worker process that graded it (0: none came back with an outcome)
    started: float = 0.0  # when the worker began on it (seconds since the epoch)
    kind: str = "outcome"

    @property
    def score(self) -> tuple[float, float]:
        """(points, out of) over every exercise."""
        return sum(p for p, _ in self.scores.values()), sum(m for _, m in self.scores.values())


def write_record(folder: Path, record: Started | Outcome) -> Path:
    """Write `record` as `folder/<student>.json`, replacing what was there in one step."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{record.student}.json"
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".record-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        json.dump(asdict(record), f, indent=1, ensure_ascii=False)
    os.replace(temporary, target)
    return target


def read_record(path: Path) -> Started | Outcome | None:
    """The record in `path`, or None where there is none (or it cannot be read: a record is never half-written,
    but a person may have edited one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("kind") == "started":
            return Started(data["student"], float(data["at"]))
        data.pop("kind", None)
        return Outcome(**data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def read_outcome(folder: Path, student: str) -> Outcome | None:
    """`student`'s outcome in `folder`, None when there is none."""
    record = read_record(folder / f"{student}.json")
    return record if isinstance(record, Outcome) else None
