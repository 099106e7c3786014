"""A class's submissions as they come in: which are new, which are resubmissions, which are late, and the history
of the earlier ones (the class command's step 2: `course_lib.workflow.class_command`).

A submission is known by its content, not by its name: `fingerprint` hashes the text of every cell (outputs,
execution counts and metadata left out, so a notebook saved again after running it is the same submission).

- **new**: copied to `submitted/<student>/<lesson>/<lesson>.ipynb` with nbgrader's `timestamp.txt` beside it;
- **unchanged**: the same content as the one in `submitted/`: left alone (whether it is graded again is the class
  command's rule: only when it was never graded, or grading it failed for a reason other than the file);
- **an earlier one**: the same content as one in the student's history, or received before the submission
  collected: not collected (an old copy in an inbox never replaces a newer submission), with a note;
- **resubmitted**: the submission in `submitted/`, its graded notebook and its feedback are moved to
  `history/<student>/<lesson>/<received>/`, with its scores and any manual grading from the gradebook in
  `grade.json` (and its grading record from `class_records/`); its row is removed from the gradebook (so the new
  file's grade starts clean: a manual score given to the old file does not carry over), and the new file takes its
  place, to be graded as a new submission. `history/history.csv` gets one line per resubmission once it is graded
  (old and new score).

When a submission was received is what nbgrader's `timestamp.txt` beside it says (`nbgrader collect` writes one;
so does this module, in `submitted/`), else the file's modification time. With a deadline (stored as the
gradebook's due date, which formgrader shows), nbgrader records how late each submission is; a late submission is
graded as any other and marked in `class_grades.csv` and the class report, never dropped.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.utils import parse_utc

from course_lib.workflow.submissions.repair import decode

__all__ = [
    "Collected",
    "Earlier",
    "Incoming",
    "collect",
    "find_incoming",
    "fingerprint",
    "late_by",
    "parse_deadline",
    "current_score",
    "received_at",
    "record_history",
    "set_deadline",
]

HISTORY = "history"
RECORDS = "class_records"  # the class command's last outcome of each submission (nbgrader_runs.records)
TIMESTAMP = "timestamp.txt"
_STAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's own format, in UTC
_LOG_FIELDS = [
    "lesson",
    "student",
    "earlier received",
    "earlier score",
    "earlier flagged",
    "earlier fingerprint",
    "kept in",
    "new received",
    "new score",
    "new fingerprint",
]


def db_url(course: Path) -> str:
    return f"sqlite:///{(course / 'gradebook.db').resolve()}"


def fingerprint(path: Path) -> str:
    """What a submission says: a hash of its cells' text (code and markdown), or of its bytes if it is no
    readable notebook. Running the cells or saving the file again does not change it."""
    raw = path.read_bytes()
    try:
        cells = json.loads(decode(raw))["cells"]
        said = [(c.get("cell_type"), _text(c.get("source", ""))) for c in cells]
        payload = json.dumps(said, ensure_ascii=False).encode()
    except (ValueError, KeyError, TypeError, AttributeError):  # UnicodeDecodeError is a ValueError
        payload = raw
    return hashlib.sha256(payload).hexdigest()[:16]


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def received_at(path: Path) -> datetime:
    """When the submission at `path` was received: its folder's `timestamp.txt`, else its modification time."""
    stamp = path.parent / TIMESTAMP
    if stamp.is_file():
        try:
            return parse_utc(stamp.read_text(encoding="utf-8").strip()).replace(tzinfo=UTC)
        except (ValueError, OverflowError, AttributeError):
            pass
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _write_stamp(folder: Path, when: datetime) -> None:
    (folder / TIMESTAMP).write_text(when.astimezone(UTC).strftime(_STAMP_FORMAT), encoding="utf-8")


def parse_deadline(text: str) -> datetime:
    """`2026-12-01T23:59` (this machine's time zone) or with an offset (`2026-12-01T23:59+01:00`), as UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--deadline: expected a date and time such as 2026-12-01T23:59, got {text!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # the machine's local time zone
    return when.astimezone(UTC)


def set_deadline(course: Path, lesson: str, deadline: datetime) -> None:
    """Record `deadline` as the lesson's due date in the gradebook (nbgrader keeps naive UTC)."""
    with Gradebook(db_url(course)) as gradebook:
        gradebook.update_or_create_assignment(lesson, duedate=deadline.astimezone(UTC).replace(tzinfo=None))


def late_by(seconds: float) -> str:
    """`3 h 5 min` for a number of seconds late."""
    minutes = int(seconds // 60) + (seconds % 60 > 0)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or "0 min"


@dataclass(frozen=True)
class Incoming:
    student: str
    path: Path
    received: datetime


@dataclass(frozen=True)
class Earlier:
    """A submission moved to the history when its student resubmitted."""

    student: str
    folder: Path  # history/<student>/<lesson>/<received>/
    received: datetime
    score: float | None  # None: it had not been graded
    max_score: float | None
    flagged: bool
    fingerprint: str

    @property
    def shown(self) -> str:
        if self.score is None:
            return "not graded"
        return f"{self.score:g}/{self.max_score:g}"


@dataclass
class Collected:
    new: list[str] = field(default_factory=list)
    resubmitted: dict[str, Earlier] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def copied(self) -> list[str]:
        return self.new + list(self.resubmitted)

    @classmethod
    def merged(cls, parts: list[Collected]) -> Collected:
        """One collection from several (the exchange's, then a folder's)."""
        out = cls()
        for part in parts:
            out.new += part.new
            out.resubmitted |= part.resubmitted
            out.unchanged += part.unchanged
            out.notes += part.notes
        return out


def find_incoming(folder: Path, lesson: str, student_id) -> tuple[dict[str, Incoming], list[str]]:
    """The submissions of `lesson` in `folder`: `<student>.ipynb`, `<student>/<any name>.ipynb` (one notebook, or the
    one named `<lesson>.ipynb`), or nbgrader's `<student>/<lesson>/<lesson>.ipynb`; `student_id` is the pattern a
    student id must match. Returns them by student, and notes about what was not used."""
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder}")
    found: dict[str, Path] = {}
    notes = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix == ".ipynb":
            found[path.stem] = path
        elif path.is_dir():
            inner = path / lesson if (path / lesson).is_dir() else path
            notebooks = sorted(inner.glob("*.ipynb"))
            named = [p for p in notebooks if p.stem == lesson]
            if len(named) == 1 or len(notebooks) == 1:
                found[path.name] = (named or notebooks)[0]
            elif notebooks:
                notes.append(f"{path.name}: {len(notebooks)} notebooks, none named {lesson}.ipynb; not collected")
    incoming = {}
    for student, path in found.items():
        if not student_id.match(student):
            notes.append(f"{path.name}: {student!r} is not a usable student id (letters, digits, . _ - @); skipped")
            continue
        incoming[student] = Incoming(student, path, received_at(path))
    return incoming, notes


def _history(course: Path, lesson: str, student: str) -> Path:
    return course / HISTORY / student / lesson


def _earlier_fingerprints(course: Path, lesson: str, student: str) -> dict[str, str]:
    """Fingerprints of the student's archived submissions of `lesson`: {fingerprint: folder name}."""
    out = {}
    for notebook in sorted(_history(course, lesson, student).glob(f"*/submitted/{lesson}.ipynb")):
        out[fingerprint(notebook)] = notebook.parent.parent.name
    return out


def collect(course: Path, lesson: str, incoming: dict[str, Incoming]) -> Collected:
    """Put `incoming` into `submitted/` (see the module docstring): new ones copied, unchanged ones left, a changed
    one replacing the earlier submission, which goes to the history."""
    result = Collected()
    for student, sub in sorted(incoming.items()):
        folder = course / "submitted" / student / lesson
        target = folder / f"{lesson}.ipynb"
        new_print = fingerprint(sub.path)
        if target.exists():
            if fingerprint(target) == new_print:
                result.unchanged.append(student)
                continue
            earlier = _earlier_fingerprints(course, lesson, student)
            if new_print in earlier:
                result.notes.append(
                    f"{student}: {sub.path} is the submission kept in {HISTORY}/{student}/{lesson}/"
                    f"{earlier[new_print]}/, an earlier one; the current submission was kept"
                )
                continue
            current = received_at(target)
            if sub.received < current:
                result.notes.append(
                    f"{student}: {sub.path} differs from the submission collected, but was received earlier "
                    f"({sub.received:%Y-%m-%d %H:%M} UTC, the collected one {current:%Y-%m-%d %H:%M} UTC); "
                    "the collected one was kept"
                )
                continue
            result.resubmitted[student] = archive(course, lesson, student)
        else:
            result.new.append(student)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sub.path, target)
        _write_stamp(folder, sub.received)
    return result


def _grade_of(course: Path, lesson: str, student: str) -> dict:
    """The gradebook's record of a submission: scores, flag, due date and time, and each cell's grade."""
    if not (course / "gradebook.db").is_file():
        return {}
    try:
        with Gradebook(db_url(course)) as gradebook:
            submission = gradebook.find_submission(lesson, student)
            cells = [
                {
                    "cell": grade.name,
                    "auto_score": grade.auto_score,
                    "manual_score": grade.manual_score,
                    "extra_credit": grade.extra_credit,
                    "max_score": grade.max_score,
                }
                for notebook in submission.notebooks
                for grade in notebook.grades
            ]
            comments = [
                {"cell": c.name, "comment": c.comment} for n in submission.notebooks for c in n.comments if c.comment
            ]
            return {
                "score": submission.score,
                "max_score": submission.max_score,
                "flagged": any(n.flagged for n in submission.notebooks),
                "seconds_late": submission.total_seconds_late,
                "grades": cells,
                "comments": comments,
            }
    except MissingEntry:
        return {}


def archive(course: Path, lesson: str, student: str) -> Earlier:
    """Move a student's current submission of `lesson` (submitted, graded notebook, feedback, gradebook record)
    into the history; the gradebook forgets it, so the next autograde starts a fresh submission."""
    submitted = course / "submitted" / student / lesson
    notebook = submitted / f"{lesson}.ipynb"
    received = received_at(notebook)
    graded = (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file()
    record = _grade_of(course, lesson, student) if graded else {}
    base = _history(course, lesson, student)
    folder = base / received.strftime("%Y-%m-%dT%H%M%SZ")
    number = 1
    while folder.exists():
        number += 1
        folder = base / f"{received.strftime('%Y-%m-%dT%H%M%SZ')}-{number}"
    folder.mkdir(parents=True)
    said = fingerprint(notebook)
    for step in ("submitted", "autograded", "feedback"):
        where = course / step / student / lesson
        if where.exists():
            shutil.move(str(where), str(folder / step))
    outcome = course / RECORDS / lesson / f"{student}.json"
    if outcome.exists():
        shutil.move(str(outcome), str(folder / "grading_record.json"))
    record |= {"student": student, "lesson": lesson, "received": received.isoformat(), "fingerprint": said}
    (folder / "grade.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    if (course / "gradebook.db").is_file():
        with Gradebook(db_url(course)) as gradebook, contextlib.suppress(MissingEntry):
            gradebook.remove_submission(lesson, student)
    return Earlier(
        student, folder, received, record.get("score"), record.get("max_score"), bool(record.get("flagged")), said
    )


def current_score(course: Path, lesson: str, student: str) -> str:
    """`6/9` for a graded submission, `not graded` for one without a graded notebook."""
    if not (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file():
        return "not graded"
    record = _grade_of(course, lesson, student)
    if not record:
        return "not graded"
    return f"{record['score']:g}/{record['max_score']:g}"


def record_history(course: Path, lesson: str, resubmitted: dict[str, Earlier]) -> list[str]:
    """Append one line per resubmission to `history/history.csv`; return the console lines
    (`alice: resubmitted, regraded 6/9 → 9/9`)."""
    if not resubmitted:
        return []
    log = course / HISTORY / "history.csv"
    log.parent.mkdir(parents=True, exist_ok=True)
    fresh = not log.exists()
    lines = []
    with log.open("a", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        if fresh:
            writer.writerow(_LOG_FIELDS)
        for student, earlier in sorted(resubmitted.items()):
            notebook = course / "submitted" / student / lesson / f"{lesson}.ipynb"
            now = current_score(course, lesson, student)
            writer.writerow(
                [
                    lesson,
                    student,
                    earlier.received.isoformat(timespec="seconds"),
                    earlier.shown,
                    "yes" if earlier.flagged else "",
                    earlier.fingerprint,
                    str(earlier.folder.relative_to(course)),
                    received_at(notebook).isoformat(timespec="seconds"),
                    now,
                    fingerprint(notebook),
                ]
            )
            if now == "not graded":
                kept = earlier.folder.relative_to(course)
                lines.append(
                    f"{student}: resubmitted, the new file could not be graded (earlier {earlier.shown}, in {kept})"
                )
            elif earlier.score is None:
                lines.append(f"{student}: resubmitted, graded {now} (the earlier file had not been graded)")
            else:
                lines.append(f"{student}: resubmitted, regraded {earlier.shown} → {now}")
    return lines
