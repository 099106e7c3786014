"""Self-grading (`make grade`, `python -m course_lib grade`, a lesson's last cell) reads a notebook as an
instructor's class run does: a saved form another editor wrote grades as if clean, and an answer cell pasted twice,
split in two or stripped of its marks is repaired and named in the report, in a copy (the learner's file is left as
it was)."""

from __future__ import annotations

import pytest

from course_lib.workflow.selfgrade import READ_AS, grade_notebook
from tests.damaged import DAMAGES
from tests.nbtools import answer_names, solved

LESSON = "00_welcome"


@pytest.mark.parametrize("kind", ["bom_crlf", "pasted_twice", "split_in_two", "metadata_stripped"])
def test_a_damaged_notebook_self_grades_like_a_clean_one_and_the_report_says_how_it_was_read(kind, tmp_path):
    full = solved(LESSON)
    names = answer_names(full)
    raw = DAMAGES[kind].build(full, names[-1])
    path = tmp_path / f"{LESSON}.ipynb"
    path.write_bytes(raw)
    report = grade_notebook(path)
    rows = report.by_name()
    assert set(rows) == set(names), kind
    assert all(r.score == r.max_score > 0 for r in rows.values()), (kind, str(report))
    notes = [flag for flag in report.flags if flag.startswith(READ_AS)]
    if DAMAGES[kind].words:
        assert len(notes) == 1 and all(word in notes[0] for word in DAMAGES[kind].words), (kind, report.flags)
        assert f"`{names[-1]}`" in notes[0] or names[-1] in notes[0], notes
    else:
        assert not notes, (kind, report.flags)  # a saved form is read silently, as if clean
    assert path.read_bytes() == raw, "the learner's file is never changed"


def test_a_file_that_is_no_notebook_gets_a_clear_error(tmp_path):
    from course_lib.workflow.course import CourseError

    path = tmp_path / f"{LESSON}.ipynb"
    path.write_bytes(b"\xef\xbb\xbf{}")
    with pytest.raises(CourseError, match="not a readable notebook .*no cells"):
        grade_notebook(path)
