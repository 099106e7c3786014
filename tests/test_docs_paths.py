"""Every file or folder the guides name is in the repository: the README, the author guide and `docs/*.md` (an
author was once sent to read two files that the repository does not have). A guide names a path in backticks,
from the repository root, or links to it (`[text](path)`, relative to the guide's own folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_lib.workflow.course import REPO_ROOT

GUIDES = [
    "README.md",
    "notebooks/AUTHORING.md",
    *sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "docs").glob("*.md")),
]
_TOP = ("course_lib/", "tests/", "notebooks/", "images/", "data/", ".ci/", "docs/")
_PATH = re.compile(r"`([A-Za-z0-9_./-]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# made at run time (git-ignored): by grading a class, by downloads
_MADE_LATER = {"notebooks/gradebook.db", "notebooks/grades.csv", "notebooks/class_report.md", "data/cache"}
_MADE_LATER |= {"notebooks/class_grades.csv", "notebooks/history", "notebooks/history/history.csv"}
_MADE_LATER |= {"notebooks/formgrader_release", "notebooks/class_records"}


def named_paths(text: str) -> list[str]:
    """Backticked repository paths: they start with a top-level folder and hold no placeholder."""
    return sorted({p.rstrip("/") for p in _PATH.findall(text) if p.startswith(_TOP) and "*" not in p})


def linked_paths(text: str) -> list[str]:
    """Targets of relative links (no URL scheme, no bare `#anchor`, no `<placeholder>`), without their `#anchor`."""
    targets = (t.split("#")[0] for t in _LINK.findall(text) if "://" not in t and not t.startswith(("#", "mailto:")))
    return sorted({t for t in targets if t and "<" not in t and "*" not in t})


def missing_paths(guide: str, root: Path = REPO_ROOT) -> list[str]:
    text = (root / guide).read_text(encoding="utf-8")
    named = [p for p in named_paths(text) if p not in _MADE_LATER and not (root / p).exists()]
    folder = (root / guide).parent
    linked = [p for p in linked_paths(text) if not (folder / p).exists()]
    return named + [f"{p} (link)" for p in linked]


def test_the_guides_are_found():
    assert {"README.md", "docs/GRADING.md", "docs/MEASUREMENTS.md"} <= set(GUIDES)


@pytest.mark.parametrize("guide", GUIDES)
def test_named_paths_exist(guide):
    text = (REPO_ROOT / guide).read_text(encoding="utf-8")
    assert named_paths(text) or linked_paths(text), "the guide names no path: the pattern is wrong"
    missing = missing_paths(guide)
    assert not missing, f"{guide} names paths that are not in the repository: {missing}"


def test_a_missing_path_would_be_found(tmp_path):
    assert named_paths("read `notebooks/NOT_HERE.md` and `course_lib/lesson.py`") == [
        "course_lib/lesson.py",
        "notebooks/NOT_HERE.md",
    ]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "HERE.md").write_text("here")
    (tmp_path / "docs" / "guide.md").write_text(
        "See [here](HERE.md#top), [gone](GONE.md), [web](https://example.org/x.md), [up](#top), `docs/GONE2.md` "
        "and [any](../images/<name>.png)."
    )
    assert missing_paths("docs/guide.md", tmp_path) == ["docs/GONE2.md", "GONE.md (link)"]
