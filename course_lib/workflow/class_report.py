"""A class's results for its instructor: `grades.csv` and `class_report.md` (written by `classroom.grade_class`).

- `grades.csv`: one row per student; for each lesson in the gradebook a column per exercise (the points of its
  test cells, visible and hidden), the lesson's total, and whether the submission was flagged. A lesson the
  student did not submit is left empty; one nbgrader could not grade (no graded notebook) says "not graded".
- `class_report.md`: per lesson, the submissions that could not be graded (one line each, with the reason), the
  collection notes, and for each exercise how many students lost points and the grader's most frequent messages
  (the first sentence of each, counted once per student), so an instructor sees what to re-teach.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from course_lib.workflow import manifest

__all__ = ["exercise_of", "first_sentence", "write_grades", "write_report"]


def exercise_of(cell_name: str, exercises: list[str]) -> str | None:
    """The exercise a test cell (`test_<exercise>` or `test_<exercise>_...`) belongs to; the longest name wins."""
    rest = cell_name.removeprefix("test_")
    matches = [e for e in exercises if rest == e or rest.startswith(e + "_")]
    return max(matches, key=len, default=None)


def _lessons(gradebook: Gradebook) -> list[str]:
    known = {lesson.id for lesson in manifest.LESSONS}
    return sorted(a.name for a in gradebook.assignments if a.name in known)


def _exercises(lesson: str) -> list[str]:
    return [e.name for e in manifest.lesson(lesson).exercises]


def _scores(gradebook: Gradebook, lesson: str, student: str):
    """(score per exercise, maximum per exercise, flagged) of one submission, None when there is none."""
    try:
        notebook = gradebook.find_submission_notebook(lesson, lesson, student)
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
    return got, most, bool(notebook.flagged)


def write_grades(course: Path, path: Path) -> Path:
    """`grades.csv` (see module docstring) from the course's gradebook."""
    with Gradebook(f"sqlite:///{(course / 'gradebook.db').resolve()}") as gradebook:
        lessons = _lessons(gradebook)
        header = ["student"]
        for lesson in lessons:
            header += [f"{lesson}/{e}" for e in _exercises(lesson)] + [lesson, f"{lesson} flagged"]
        rows = []
        for student in sorted(s.id for s in gradebook.students):
            row: list[object] = [student]
            for lesson in lessons:
                found = _scores(gradebook, lesson, student)
                if found is None:
                    row += [""] * (len(_exercises(lesson)) + 2)
                    continue
                if not (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file():
                    row += [""] * (len(_exercises(lesson)) + 1) + ["not graded"]
                    continue
                got, _, flagged = found
                row += [f"{got[e]:g}" for e in _exercises(lesson)]
                row += [f"{sum(got.values()):g}", "yes" if flagged else ""]
            rows.append(row)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def first_sentence(message: str) -> str:
    """A grader's message without its `[exercise] ` prefix, cut after its first sentence (at most 200 chars)."""
    if message.startswith("[") and "] " in message:
        message = message.split("] ", 1)[1]
    ends = [i for i in (message.find(". "), message.find("\n")) if i >= 0]
    if ends:
        cut = min(ends)
        message = message[: cut + 1] if message[cut] == "." else message[:cut]
    return message.strip()[:200]


def _messages(course: Path, lesson: str, student: str, exercises: list[str]) -> dict[str, set[str]]:
    """The grader's failure messages in one graded notebook, by exercise."""
    said: dict[str, set[str]] = {}
    try:
        nb = nbformat.read(course / "autograded" / student / lesson / f"{lesson}.ipynb", as_version=4)
    except (OSError, ValueError):
        return said
    for cell in nb.cells:
        owner = exercise_of(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "", exercises)
        if owner is None or cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                said.setdefault(owner, set()).add(first_sentence(str(output.get("evalue", ""))))
    return said


def write_report(course: Path, results, path: Path) -> Path:
    """`class_report.md` (see module docstring) for the lessons in `results` (`classroom.ClassResult`)."""
    lines = ["# What the class got wrong", ""]
    with Gradebook(f"sqlite:///{(course / 'gradebook.db').resolve()}") as gradebook:
        students = sorted(s.id for s in gradebook.students)
        for result in results:
            lesson, exercises = result.lesson, _exercises(result.lesson)
            lines += [f"## {lesson}", "", f"{len(result.graded)} submission(s) graded now, in {result.seconds:.0f} s."]
            lines += [f"- **{s}**: could not be graded: {why}" for s, why in sorted(result.failed.items())]
            lines += [f"- note: {note}" for note in result.notes]
            lost: Counter[str] = Counter()
            said: dict[str, Counter[str]] = {e: Counter() for e in exercises}
            graded = flagged = 0
            for student in students:
                found = _scores(gradebook, lesson, student)
                if found is None or not (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file():
                    continue
                graded += 1
                got, most, is_flagged = found
                flagged += is_flagged
                lost.update(e for e in exercises if got[e] < most[e])
                for exercise, messages in _messages(course, lesson, student, exercises).items():
                    said[exercise].update(messages)
            lines += ["", f"{graded} graded submission(s) in the gradebook, {flagged} flagged.", ""]
            lines += ["| exercise | lost points | most frequent messages (students) |", "|---|---|---|"]
            for exercise in exercises:
                top = "<br>".join(f"{m.replace('|', '/')} ({n})" for m, n in said[exercise].most_common(3))
                lines.append(f"| `{exercise}` | {lost[exercise]} / {graded} | {top} |")
            lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
