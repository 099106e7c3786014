"""A learner's work lives in work/, which no course command and no update overwrites or deletes: proved with the
real tools (copy_new_lessons, `make release`'s function, `nbgrader generate_assignment --force`, `git pull`) on
a throw-away clone of a course that holds lesson 00."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from course_lib.workflow.course import release, run_nbgrader
from course_lib.workflow.workspace import copy_new_lessons

ROOT = Path(__file__).resolve().parents[1]
LESSON = "00_welcome"
pytestmark = pytest.mark.slow


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def test_copy_never_overwrites_and_copies_what_is_new(tmp_path):
    release_dir, work = tmp_path / "release", tmp_path / "work"
    (release_dir / "a").mkdir(parents=True)
    (release_dir / "a" / "a.ipynb").write_text("course a v1")
    first = copy_new_lessons(release_dir, work)
    assert [p.name for p in first.new] == ["a.ipynb"] and first.kept == []
    (work / "a" / "a.ipynb").write_text("mine")
    (release_dir / "a" / "a.ipynb").write_text("course a v2")
    (release_dir / "b").mkdir()
    (release_dir / "b" / "b.ipynb").write_text("course b")
    second = copy_new_lessons(release_dir, work)
    assert [p.name for p in second.new] == ["b.ipynb"] and [p.name for p in second.kept] == ["a.ipynb"]
    assert (work / "a" / "a.ipynb").read_text() == "mine"
    assert "b/b.ipynb" in str(second)
    with pytest.raises(FileNotFoundError, match="no student versions"):
        copy_new_lessons(tmp_path / "nowhere", work)


def test_release_generate_and_git_pull_leave_the_learners_file_alone(tmp_path):
    origin, learner = tmp_path / "origin", tmp_path / "learner"
    for part in ("nbgrader_config.py", f"source/{LESSON}", f"release/{LESSON}"):
        source, target = ROOT / "notebooks" / part, origin / "notebooks" / part
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    shutil.copy(ROOT / ".gitignore", origin / ".gitignore")  # the course's own ignore rules
    shutil.copytree(ROOT / "images", origin / "images")  # the diagrams the lesson shows (release inlines them)
    _git(origin, "init", "-q", "-b", "main")
    _git(origin, "-c", "user.name=course", "-c", "user.email=c@example.org", "add", "-A")
    _git(origin, "-c", "user.name=course", "-c", "user.email=c@example.org", "commit", "-qm", "lesson 00")
    _git(tmp_path, "clone", "-q", str(origin), str(learner))

    copy_new_lessons(learner / "notebooks" / "release", learner / "work")
    mine = learner / "work" / LESSON / f"{LESSON}.ipynb"
    mine.write_text(mine.read_text(encoding="utf-8").replace("YOUR CODE HERE", "my answer"), encoding="utf-8")
    copy = learner / "work" / LESSON / f"{LESSON}-Copy1.ipynb"  # what JupyterLab's Duplicate writes
    shutil.copy(mine, copy)
    before = {p: p.read_bytes() for p in (mine, copy)}
    assert _git(learner, "status", "--porcelain") == ""  # work/ is ignored: git never sees it

    release([LESSON], root=learner / "notebooks")  # `make release`
    generated = run_nbgrader(["generate_assignment", LESSON, "--force"], learner / "notebooks")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    _git(learner, "checkout", "--", ".")  # whatever those commands changed among tracked files

    # An update of the lesson upstream, then the learner's `git pull`.
    upstream = origin / "notebooks" / "release" / LESSON / f"{LESSON}.ipynb"
    upstream.write_text(upstream.read_text(encoding="utf-8").replace("Lesson 00", "Lesson 00 (2nd ed.)"))
    _git(origin, "-c", "user.name=course", "-c", "user.email=c@example.org", "commit", "-qam", "update")
    _git(learner, "pull", "-q", "--ff-only")
    assert "2nd ed." in (learner / "notebooks" / "release" / LESSON / f"{LESSON}.ipynb").read_text()

    again = copy_new_lessons(learner / "notebooks" / "release", learner / "work")  # the next `make lab`
    assert again.new == []
    assert {p: p.read_bytes() for p in (mine, copy)} == before
