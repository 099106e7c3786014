"""What students get: `python -m course_lib handout DEST [--archive]` (`make handout DEST=...`).

The course's own repository holds the instructor sources (`notebooks/source/`: solutions and hidden tests) and
the tests (which hold solutions too), so it is not what a graded class should clone. The hand-out is a copy of the
tracked files a learner needs, as a new git repository an instructor can publish:

- the student versions (`notebooks/release/`) and the nbgrader configuration self-grading runs with;
- `course_lib` whole: the lessons import its reference implementations, and its checks run the visible tests and
  self-grading (a hidden test's cases are only ever in `notebooks/source/`, which is left out);
- `data/`, `images/`, `jupyter/`, `docs/`, README, LICENSE, Makefile, pyproject.toml, environment.yml;
- not `notebooks/source/`, `tests/`, `.ci/` or the authoring guide.

Before anything is written, every file of the hand-out is searched for each line of every lesson's hidden tests
and for each line of its solutions that is neither in the student version nor in `course_lib` (the references
ship anyway, and say so); a hand-out with one of them is not made. Self-grading in a hand-out runs the visible
checks only and says so (`course.visible_only_source`).

DEST is a new folder, or a hand-out made earlier (it then gets the new files as a new commit, so students can
`git pull`); `--archive` also writes DEST.tar.gz.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nbformat

from course_lib.workflow.course import REPO_ROOT, CourseError, grade_id, lesson_ids

__all__ = ["INCLUDED", "MARKER", "Handout", "build_handout", "secret_lines"]

INCLUDED = (
    "README.md",
    "LICENSE",
    "Makefile",
    "pyproject.toml",
    "environment.yml",
    ".gitignore",
    ".gitattributes",
    "course_lib/",
    "data/",
    "images/",
    "jupyter/",
    "docs/",
    "notebooks/release/",
    "notebooks/nbgrader_config.py",
)
MARKER = ".course-handout"  # in every hand-out: where and when it was made
_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
_SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
_SHORTEST = 13  # shorter lines ("return out", "pass") say nothing about a solution
_NAME_ONLY = re.compile(r"[A-Za-z_][\w.]*,?")


@dataclass
class Handout:
    folder: Path
    files: list[str] = field(default_factory=list)
    archive: Path | None = None
    shipped_solution_lines: int = 0  # lines of the solutions that are in course_lib anyway
    solution_lines: int = 0

    def __str__(self) -> str:
        lines = [f"hand-out: {self.folder} ({len(self.files)} files, a git repository: publish it, e.g. git push)"]
        if self.archive is not None:
            lines.append(f"archive: {self.archive}")
        lines.append(
            f"no hidden test and no solution line is in it; {self.shipped_solution_lines} of the solutions' "
            f"{self.solution_lines} lines are also in course_lib's reference implementations, which ship with it"
        )
        return "\n".join(lines)


def _tracked(repo: Path) -> list[str]:
    """The repository's tracked files (what a clone has), or every file where it is not a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout
        return sorted(p for p in out.decode().split("\0") if p and (repo / p).is_file())
    except (OSError, subprocess.CalledProcessError):
        skip = {"__pycache__", ".git", ".venv", "cache"}
        return sorted(
            str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and not skip & set(p.parts)
        )  # fmt: skip


def _included(path: str) -> bool:
    return any(path == part or (part.endswith("/") and path.startswith(part)) for part in INCLUDED)


def _lines(text: str) -> list[str]:
    """The lines of `text` that say something: long enough, and not a lone name (`SelfAttention,`, an argument on
    a line of its own, tells nothing about a hidden test)."""
    lines = [line.strip() for line in text.splitlines()]
    return [line for line in lines if len(line) >= _SHORTEST and not _NAME_ONLY.fullmatch(line)]


def secret_lines(repo: Path = REPO_ROOT) -> tuple[dict[str, str], dict[str, str], int]:
    """What must not be in a hand-out, each line with where it is from: (hidden test lines, solution lines that are
    in neither the student version nor course_lib, and how many solution lines course_lib holds anyway)."""
    root = repo / "notebooks"
    library = "\n".join(p.read_text(encoding="utf-8") for p in sorted((repo / "course_lib").rglob("*.py")))
    hidden: dict[str, str] = {}
    solutions: dict[str, str] = {}
    shipped = set()
    for lesson in lesson_ids(root):
        source = root / "source" / lesson / f"{lesson}.ipynb"
        if not source.is_file():
            continue
        nb = nbformat.read(source, as_version=4)
        released = (root / "release" / lesson / f"{lesson}.ipynb").read_text(encoding="utf-8")
        visible = "\n".join(_HIDDEN.sub("", c.source) for c in nb.cells)
        for cell in nb.cells:
            where = f"{lesson} `{grade_id(cell) or 'a cell'}`"
            for block in _HIDDEN.findall(cell.source):
                hidden |= {line: where for line in _lines(block) if line not in visible}
            for block in _SOLUTION.findall(cell.source):
                for line in _lines(block):
                    if _found(line, released):
                        continue  # the student version has it too (a comment kept, a signature)
                    if line in library:
                        shipped.add(line)
                    else:
                        solutions[line] = where
    return hidden, solutions, len(shipped) + len(solutions)


def _found(line: str, text: str) -> bool:
    """`line` in `text`, as it is or as a JSON string writes it (a notebook's source)."""
    return line in text or json.dumps(line, ensure_ascii=False)[1:-1] in text


def leaks(folder: Path, repo: Path = REPO_ROOT) -> list[str]:
    """Each file of `folder` that holds a hidden test line or a solution line (`secret_lines`), with the line."""
    hidden, solutions, _ = secret_lines(repo)
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a picture
        for kind, lines in (("hidden test", hidden), ("solution", solutions)):
            for line, where in lines.items():
                if _found(line, text):
                    found.append(f"{path.relative_to(folder)}: {kind} line of {where}: {line[:80]}")
    return found


def _git(folder: Path, *args: str) -> str:
    env = dict(os.environ)
    for key, value in (("GIT_AUTHOR_NAME", "course hand-out"), ("GIT_AUTHOR_EMAIL", "handout@localhost")):
        env.setdefault(key, value)
        env.setdefault(key.replace("AUTHOR", "COMMITTER"), value)
    result = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, env=env)
    if result.returncode:
        raise CourseError(f"git {' '.join(args)} failed in {folder}: {result.stderr.strip()}")
    return result.stdout


def _prepare(dest: Path) -> bool:
    """Make sure `dest` may be written: a new or empty folder, or an earlier hand-out (True)."""
    if not dest.exists() or (dest.is_dir() and not any(dest.iterdir())):
        return False
    if (dest / MARKER).is_file() and (dest / ".git").is_dir():
        return True
    raise CourseError(
        f"{dest} exists and is not a hand-out made by this command: choose a new folder (nothing was written)"
    )


def build_handout(dest: Path, archive: bool = False, repo: Path = REPO_ROOT) -> Handout:
    """Build the students' hand-out in `dest` (see the module docstring)."""
    dest = dest.resolve()
    if dest == repo.resolve() or repo.resolve() in dest.parents:
        raise CourseError(f"{dest} is inside the course's own repository: choose a folder outside it")
    again = _prepare(dest)
    files = [p for p in _tracked(repo) if _included(p)]
    with tempfile.TemporaryDirectory(prefix="handout-") as tmp:
        staged = Path(tmp) / "handout"
        for name in files:
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, staged / name)
        made = datetime.now(UTC).isoformat(timespec="seconds")
        (staged / MARKER).write_text(
            "The students' hand-out of the course, made by `make handout` (python -m course_lib handout) on "
            f"{made}.\nIt has no instructor sources and no hidden tests; `make grade` runs the visible checks only.\n",
            encoding="utf-8",
        )
        found = leaks(staged, repo)
        if found:
            raise CourseError("the hand-out would show what it must not, so it was not made:\n" + "\n".join(found[:20]))
        if again:
            for old in dest.iterdir():
                if old.name != ".git":
                    shutil.rmtree(old) if old.is_dir() else old.unlink()
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staged, dest, dirs_exist_ok=True)
    if not again:
        _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    if _git(dest, "status", "--porcelain").strip():
        _git(dest, "commit", "-q", "-m", f"The course's students' hand-out ({made})")
    _, solutions, total = secret_lines(repo)
    result = Handout(dest, files + [MARKER], None, total - len(solutions), total)
    if archive:
        result.archive = dest.with_name(dest.name + ".tar.gz")
        _git(dest, "archive", "--format=tar.gz", f"--prefix={dest.name}/", "-o", str(result.archive), "HEAD")
    return result
