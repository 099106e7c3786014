"""A class's results for its instructor: `class_grades.csv` and `class_report.md` (the class command's last step).

- `class_grades.csv`: one row per student; for each lesson in the gradebook a column per exercise (the points of
  its test cells, visible and hidden), the lesson's total, whether the submission was flagged, how late it was
  (with a deadline), and which answers look copied from the course's code (`similarity.py`: for a person to look
  at; no score changes). A lesson the student did not submit is left empty; one that could not be graded (no graded
  notebook) says "not graded". nbgrader's own `export` writes `grades.csv`, with fewer columns: a name this file
  never has, so neither replaces the other.
- `class_report.md`: per lesson, one line for each submission that could not be graded (with the reason; in this
  run, or in an earlier one and not tried again because the file has not changed), that was graded with something
  to look at (`remarks`: repaired before grading, flagged, out of memory, a dead kernel, a time-out, a refused
  write, output cut), that came late, or whose answers look copied; the resubmissions graded in this run (old and
  new score); the collection notes and what the grading processes were held to; and for each exercise how many of
  the lesson's graded students (all of them, whichever run graded them) lost points and the grader's most frequent
  messages (the first sentence of each, counted once per student), so an instructor sees what to re-teach.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from course_lib import manifest
from course_lib.workflow import similarity
from course_lib.workflow.kernels import CUT_MARKER
from course_lib.workflow.nbgrader_plugins import FLAG_MARKER
from course_lib.workflow.nbgrader_runs.records import exercise_of
from course_lib.workflow.submissions import REPAIR_MARKER, late_by

__all__ = [
    "GRADES_FILE",
    "REPORT_FILE",
    "copy_flags",
    "exercise_of",
    "first_sentence",
    "remarks",
    "shorten",
    "write_grades",
    "write_report",
]

GRADES_FILE = "class_grades.csv"
REPORT_FILE = "class_report.md"


def _lessons(gradebook: Gradebook) -> list[str]:
    known = {lesson.id for lesson in manifest.LESSONS}
    return sorted(a.name for a in gradebook.assignments if a.name in known)


def _exercises(lesson: str) -> list[str]:
    return [e.name for e in manifest.lesson(lesson).exercises]


def _scores(gradebook: Gradebook, lesson: str, student: str):
    """(score per exercise, maximum per exercise, flagged, seconds late) of one submission, None when there is
    none."""
    try:
        notebook = gradebook.find_submission_notebook(lesson, lesson, student)
        late = gradebook.find_submission(lesson, student).total_seconds_late
    except MissingEntry:
        return None
    exercises = _exercises(lesson)
    got: dict[str, float] = dict.fromkeys(exercises, 0.0)
    most: dict[str, float] = dict.fromkeys(exercises, 0.0)
    for grade in notebook.grades:
        owner = exercise_of(grade.name, exercises)
        if owner is not None:
            got[owner] += grade.score or 0.0
            most[owner] += grade.max_score or 0.0
    return got, most, bool(notebook.flagged), late


def _solutions(course: Path, lesson: str) -> dict[str, str]:
    """The instructor's solution of each exercise of `lesson`, when its source is at hand."""
    path = course / "source" / lesson / f"{lesson}.ipynb"
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return {}
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nb.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }


def copy_flags(course: Path, lesson: str, student: str, threshold: float | None) -> list[similarity.Match]:
    """The answers of a student's submission that look like the course's code with names changed (none when
    `threshold` is None: not looked for)."""
    if threshold is None:
        return []
    try:
        nb = nbformat.read(course / "submitted" / student / lesson / f"{lesson}.ipynb", as_version=4)
    except (OSError, ValueError, AttributeError):
        return []
    answers = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
            answers[meta["grade_id"]] = cell.source
    return similarity.suspicious(answers, lesson, threshold, _solutions(course, lesson))


def write_grades(course: Path, path: Path, copy_threshold: float | None = similarity.DEFAULT_THRESHOLD) -> Path:
    """`class_grades.csv` (see module docstring) from the course's gradebook."""
    with Gradebook(f"sqlite:///{(course / 'gradebook.db').resolve()}") as gradebook:
        lessons = _lessons(gradebook)
        header = ["student"]
        for lesson in lessons:
            header += [f"{lesson}/{e}" for e in _exercises(lesson)] + [lesson, f"{lesson} flagged"]
            header += [f"{lesson} late", f"{lesson} looks copied"]
        rows = []
        # a student whose file could not be read at all has no gradebook record, and still has a row
        sent = {p.parent.parent.name for lesson in lessons for p in (course / "submitted").glob(f"*/{lesson}/*.ipynb")}
        for student in sorted({s.id for s in gradebook.students} | sent):
            row: list[object] = [student]
            for lesson in lessons:
                found = _scores(gradebook, lesson, student)
                if found is None:
                    submitted = (course / "submitted" / student / lesson / f"{lesson}.ipynb").is_file()
                    row += [""] * (len(_exercises(lesson)) + 1) + ["not graded" if submitted else "", "", ""]
                    continue
                got, _, flagged, late = found
                late_cell = late_by(late) if late else ""
                if not (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file():
                    row += [""] * (len(_exercises(lesson)) + 1) + ["not graded", late_cell, ""]
                    continue
                copied = copy_flags(course, lesson, student, copy_threshold)
                row += [f"{got[e]:g}" for e in _exercises(lesson)]
                row += [f"{sum(got.values()):g}", "yes" if flagged else "", late_cell]
                row.append(" ".join(f"{m.exercise} ({m.score:.0%})" for m in copied))
            rows.append(row)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def shorten(text: str, width: int) -> str:
    """`text` whole when it fits in `width` characters, else cut at the last space that lets `… ` fit (never
    inside a word)."""
    text = text.strip()
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width - 1)
    return text[: cut if cut > 0 else width - 1].rstrip() + " …"


def first_sentence(message: str) -> str:
    """A grader's message without its `[exercise] ` prefix, cut after its first sentence (at most 200 chars, cut
    at a word)."""
    if message.startswith("[") and "] " in message:
        message = message.split("] ", 1)[1]
    ends = [i for i in (message.find(". "), message.find("\n")) if i >= 0]
    if ends:
        cut = min(ends)
        message = message[: cut + 1] if message[cut] == "." else message[:cut]
    return shorten(message, 200)


_OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "Cannot allocate memory")
_REFUSED = ("Permission denied", "readonly database", "Operation not permitted", "Invalid cross-device link")


def _cell_name(cell, index: int, exercises: list[str]) -> str:
    name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    if not name:
        return f"cell {index + 1}"
    owner = exercise_of(name, exercises)
    return f"`{owner or name}`"


def remarks(nb, exercises: list[str]) -> list[str]:
    """What a graded notebook shows happened to its submission besides the scores, one phrase per kind: what was
    repaired before grading, the grader's notes (the submission is flagged), and where its kernel ran out of memory,
    died, was stopped at the time limit, was refused a write, or printed more than was kept."""
    notes: list[str] = []
    where: dict[str, list[str]] = {}  # kind of event -> the cells it happened in
    refused: list[str] = []
    cut: list[str] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and REPAIR_MARKER in cell.source:
            notes += [f"repaired: {line[2:]}" for line in cell.source.splitlines() if line.startswith("- ")]
        if cell.cell_type == "markdown" and FLAG_MARKER in cell.source:
            notes += [f"flagged: {line[2:]}" for line in cell.source.splitlines() if line.startswith("- ")]
        if cell.cell_type != "code":
            continue
        name = _cell_name(cell, index, exercises)
        for output in cell.get("outputs", []):
            text = str(output.get("data", {}).get("text/plain", ""))
            if output.get("output_type") == "display_data" and text.startswith(CUT_MARKER):
                cut.append(f"{name} ({text.removeprefix(CUT_MARKER).strip()})")
            if output.get("output_type") != "error":
                continue
            error, value = output.get("ename", ""), str(output.get("evalue", ""))
            if error == "DeadKernelError":
                kind = "its kernel died at"
            elif error == "CellTimeoutError":
                kind = "stopped at the time limit in"
            elif any(word in f"{error}: {value}" for word in _OUT_OF_MEMORY):
                kind = "ran out of memory (the limit per process) in"
            elif any(word in value for word in _REFUSED):
                kind = "a write was refused in"
                refused.append(shorten(first_sentence(f"{error}: {value}"), 160))
            else:
                continue
            where.setdefault(kind, [])
            if name not in where[kind]:
                where[kind].append(name)
    said = notes + [f"{kind} {', '.join(cells[:1] if 'died' in kind else cells)}" for kind, cells in where.items()]
    said = [f"{p} ({refused[0]})" if p.startswith("a write was refused") else p for p in said]
    said += [f"output cut in {c}" for c in cut]
    return list(dict.fromkeys(said))


def _graded(course: Path, lesson: str, student: str):
    try:
        return nbformat.read(course / "autograded" / student / lesson / f"{lesson}.ipynb", as_version=4)
    except (OSError, ValueError):
        return None


def _messages(nb, exercises: list[str]) -> dict[str, set[str]]:
    """The grader's failure messages in one graded notebook, by exercise."""
    said: dict[str, set[str]] = {}
    if nb is None:
        return said
    for cell in nb.cells:
        owner = exercise_of(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "", exercises)
        if owner is None or cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":  # an answer cell's own error may have no message
                message = first_sentence(str(output.get("evalue", ""))) or str(output.get("ename", "an error"))
                said.setdefault(owner, set()).add(message)
    return said


def write_report(
    course: Path, results, path: Path, copy_threshold: float | None = similarity.DEFAULT_THRESHOLD
) -> Path:
    """`class_report.md` (see module docstring) for the lessons in `results` (`steps.ClassResult`)."""
    lines = ["# What the class got wrong", ""]
    with Gradebook(f"sqlite:///{(course / 'gradebook.db').resolve()}") as gradebook:
        students = sorted(s.id for s in gradebook.students)
        for result in results:
            lesson, exercises = result.lesson, _exercises(result.lesson)
            lines += [f"## {lesson}", "", f"{len(result.graded)} submission(s) graded now, in {result.seconds:.0f} s."]
            lines += [f"- **{s}**: could not be graded: {why}" for s, why in sorted(result.failed.items())]
            lines += [
                f"- **{s}**: could not be graded: {why} (in an earlier run; not tried again until the file changes)"
                for s, why in sorted(result.not_retried.items())
            ]
            lost: Counter[str] = Counter()
            said: dict[str, Counter[str]] = {e: Counter() for e in exercises}
            graded = flagged = late_ones = copied_ones = 0
            for student in students:
                found = _scores(gradebook, lesson, student)
                if found is None or not (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file():
                    continue
                graded += 1
                got, most, is_flagged, late = found
                flagged += is_flagged
                lost.update(e for e in exercises if got[e] < most[e])
                nb = _graded(course, lesson, student)
                found_remarks = remarks(nb, exercises) if nb is not None else []
                if late:
                    late_ones += 1
                    found_remarks.append(f"late by {late_by(late)}")
                copied = copy_flags(course, lesson, student, copy_threshold)
                if copied:
                    copied_ones += 1
                    found_remarks.append(
                        "look at: answers that read like the course's code with other names (no points were taken "
                        "for this): " + ", ".join(map(str, copied))
                    )
                if found_remarks:
                    lines.append(f"- **{student}**: graded; " + "; ".join(found_remarks))
                for exercise, messages in _messages(nb, exercises).items():
                    if got[exercise] < most[exercise]:  # what those who lost points were told
                        said[exercise].update(messages)
            lines += [f"- note: {note}" for note in result.notes]
            if result.peak_mib:
                lines.append(f"- note: the nbgrader processes peaked at {result.peak_mib} MiB resident (the largest)")
            if result.resubmitted:
                lines += ["", "Resubmitted and graded again now (the earlier submissions are kept in history/):"]
                lines += [f"- {line}" for line in result.resubmitted]
            summary = f"{graded} graded submission(s) in the gradebook, {flagged} flagged, {late_ones} late"
            if copy_threshold is not None:
                summary += f", {copied_ones} with answers that look copied (similarity at least {copy_threshold:g})"
            lines += ["", summary + ".", ""]
            lines += ["| exercise | students who lost points | most frequent messages (students) |", "|---|---|---|"]
            for exercise in exercises:
                top = "<br>".join(f"{m.replace('|', '/')} ({n})" for m, n in said[exercise].most_common(3))
                lines.append(f"| `{exercise}` | {lost[exercise]} of {graded} | {top} |")
            lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
