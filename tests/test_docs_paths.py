"""Every file or folder the instructor and author guides name in backticks is in the repository (issue 12: an
author was once sent to read two files that the repository does not have)."""

from __future__ import annotations

import re

import pytest

from course_lib.workflow.course import REPO_ROOT

GUIDES = ["README.md", "notebooks/AUTHORING.md", "docs/ARCHITECTURE.md"]
_TOP = ("course_lib/", "tests/", "notebooks/", "images/", "data/", ".ci/", "docs/")
_PATH = re.compile(r"`([A-Za-z0-9_./-]+)`")


def named_paths(text: str) -> list[str]:
    """Backticked repository paths: they start with a top-level folder and hold no placeholder."""
    return sorted({p.rstrip("/") for p in _PATH.findall(text) if p.startswith(_TOP) and "*" not in p})


@pytest.mark.parametrize("guide", GUIDES)
def test_named_paths_exist(guide):
    text = (REPO_ROOT / guide).read_text(encoding="utf-8")
    paths = named_paths(text)
    assert paths, "the guide names no path: the pattern is wrong"
    # made at run time (git-ignored): by grading a class, by downloads
    ignored = {"notebooks/gradebook.db", "notebooks/grades.csv", "notebooks/class_report.md", "data/cache"}
    ignored |= {"notebooks/class_grades.csv", "notebooks/history", "notebooks/history/history.csv"}
    missing = [p for p in paths if p not in ignored and not (REPO_ROOT / p).exists()]
    assert not missing, f"{guide} names paths that are not in the repository: {missing}"


def test_a_missing_path_would_be_found():
    assert named_paths("read `notebooks/NOT_HERE.md` and `course_lib/lesson.py`") == [
        "course_lib/lesson.py",
        "notebooks/NOT_HERE.md",
    ]
