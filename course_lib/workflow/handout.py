"""What students get: `python -m course_lib handout DEST --url URL [--archive]` (`make handout DEST=... URL=...`).

The course's own repository holds the instructor sources (`notebooks/source/`: solutions and hidden tests) and
the tests (which hold solutions too), so it is not what a graded class should clone. The hand-out is a copy of the
tracked files a learner needs, as a new git repository an instructor can publish:

- the student versions (`notebooks/release/`) and the nbgrader configuration self-grading runs with;
- `course_lib` whole: the lessons import its reference implementations, and its checks run the visible tests and
  self-grading (a hidden test's cases are only ever in `notebooks/source/`, which is left out);
- `data/`, `images/`, `jupyter/`, `docs/`, LICENSE, pyproject.toml, environment.yml;
- a README written for students (`student_readme`: how to open the course, work and grade yourself), and a
  Makefile with only what a student runs (`make lab`, `make grade`; `student_makefile`);
- not `notebooks/source/`, `tests/`, `.ci/` or the authoring guide.

URL is where the instructor will publish the hand-out (a GitHub repository: Colab opens notebooks from GitHub).
Every lesson's Colab link and set-up cell, which clones the repository on Colab, and the hand-out's pyproject.toml
point there (`course.point_at`). Without it they point at the course's own repository, where a student who
follows one finds the solutions; the command says so.

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

from course_lib import manifest
from course_lib.workflow.course import (
    REPO_ROOT,
    CourseError,
    colab_link,
    grade_id,
    lesson_ids,
    point_at,
    repo_url,
)

__all__ = [
    "INCLUDED",
    "MARKER",
    "Handout",
    "build_handout",
    "check_url",
    "secret_lines",
    "student_makefile",
    "student_readme",
]

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
    url: str = ""  # where its Colab links and set-up cells point
    warning: str | None = None  # what the instructor must know before publishing it

    def __str__(self) -> str:
        lines = [f"warning: {self.warning}"] if self.warning else []
        where = "e.g. git push" if self.warning else f"at {self.url}"
        lines.append(f"hand-out: {self.folder} ({len(self.files)} files, a git repository: publish it, {where})")
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


_GITHUB = re.compile(r"https://github\.com/[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")


def check_url(url: str) -> str:
    """The hand-out's repository URL as the links use it (`https://github.com/owner/name`); a clear error for one
    Colab cannot open notebooks from."""
    url = url.strip().rstrip("/").removesuffix(".git")
    if not _GITHUB.fullmatch(url):
        raise CourseError(
            f"URL: expected the GitHub repository the hand-out will be published at, https://github.com/<owner>/"
            f"<name>, got {url!r} (Colab opens notebooks from GitHub, so the lessons' links need one)"
        )
    return url


def _exposed(course: str, dest: Path) -> str:
    return (
        f"the hand-out's Colab links and set-up cells (which clone the repository on Colab) still point at {course}, "
        "the course's own repository, where notebooks/source/ holds every solution and hidden test. Make it again "
        "with the URL you will publish it at: "
        f"make handout DEST={dest} URL=https://github.com/<owner>/<name>"
    )


# The Makefile's targets a student has no use for: they need the tests, the instructor sources or a class.
INSTRUCTOR_TARGETS = ("test", "lint", "images", "release", "class", "feedback", "handout", "nbgrader", "lab-instructor")
_TARGET = re.compile(r"^([A-Za-z][\w-]*):(?!=)", re.M)


def student_makefile(course: str) -> str:
    """The course's Makefile with only what a student runs (`make lab`, `make grade`, `make clean-venv`): each
    paragraph that defines one of `INSTRUCTOR_TARGETS` is left out, and the header says what is left."""
    kept = []
    for paragraph in course.split("\n\n"):
        if set(_TARGET.findall(paragraph)) & set(INSTRUCTOR_TARGETS):
            continue
        kept.append(paragraph)
    text = "\n\n".join(kept)
    header, _, rest = text.partition("\nPYTHON ?=")
    comments = [line for line in header.splitlines() if line.startswith("#   make lab")]
    header = (
        "# `make lab` opens the course in JupyterLab, `make grade NB=work/<lesson>/<lesson>.ipynb` grades a notebook;\n"
        "# both create ./.venv first if it is missing.  Override the interpreter or torch with\n" + "\n".join(comments)
    )
    text = header + "\nPYTHON ?=" + rest
    return re.sub(r"^\.PHONY:.*$", ".PHONY: lab grade clean-venv", text, flags=re.M)


def student_readme(url: str) -> str:
    """The hand-out's README: how a student opens the course, works, and grades their own notebook."""
    rows = "\n".join(
        f"| `{lesson.id}` | {lesson.title} | [open in Colab]({colab_link(lesson.id, url)}) |"
        for lesson in manifest.LESSONS
    )
    return f"""# Transformers from Scratch

An interactive Jupyter course from raw text to training GPT-2: tokenizers, embeddings, position encodings,
attention, transformer blocks, the encoder–decoder, small decoder-only models, GPT-2, training it on a GPU, and
what changed after GPT-2. Every lesson explains, draws what it computes, and has exercises you solve in the
notebook; `course_lib` is the course's package, with a reference implementation of everything the lessons teach.

## Open the course

**On your computer** (Python 3.11 or newer, `git` and `make`):

```bash
git clone {url} transformers-from-scratch
cd transformers-from-scratch
make lab
```

`make lab` creates `.venv` with PyTorch and the course's packages the first time (a few minutes), then opens
JupyterLab on your own copies of the lessons. On Linux without an NVIDIA GPU, `make lab TORCH_INDEX=cpu` installs
PyTorch's CPU build (pip's default Linux build is the CUDA one, several GB). With conda instead:
`conda env create -f environment.yml && conda activate transformers-from-scratch`, then
`python -m course_lib.workflow.workspace && cd work && JUPYTER_CONFIG_PATH=../jupyter/learner jupyter lab`.

**On Colab:** open a lesson with its link in the table below (or the *Open this lesson in Colab* link at the top
of each notebook) and run its set-up cell first: it clones this repository and installs the course (about a
minute, once per session). Colab forgets everything when the session ends, so download your notebook
(*File → Download .ipynb*) to keep your answers. Lesson 11 wants a GPU: *Runtime → Change runtime type*.

## Work

- **Your copies are in `work/`.** `make lab` copies each lesson into `work/<lesson>/` once and never overwrites a
  file there, so `git pull` (to get the course's updates) never touches your work.
- **Start with lesson 00.** It shows how an exercise is laid out: the task, an answer cell for your code, a
  locked cell of visible checks that tells you what is wrong (or prints a green ✓), and a locked cell of hidden
  checks, empty in your copy. Keep the function names the exercises give, and leave the locked cells alone.
- **Run All** runs a whole lesson before you have done its exercises: a failing check shows its message in red
  and the lesson goes on with the course's reference.
- **Write it yourself.** An answer that uses the shortcut an exercise forbids, or the course's own reference,
  earns nothing. A few names no answer may use at all (`sys`, `exec`, `threading`, ...) are listed in lesson 00
  and in `docs/GRADING.md`, which says everything answers are held to.

## Grade yourself

Save the notebook, then run its last cell, or in a terminal:

```bash
make grade NB=work/04_attention/04_attention.ipynb
```

It grades your saved notebook the way your course's grading does (each answer cell on its own, in its own
process, then the checks) and shows each exercise's score with the grader's messages. The hidden checks are not
in this repository, so it runs the visible checks only and says so: your grade also counts checks that did not
run here.

## Lessons

| id | lesson | Colab |
|---|---|---|
{rows}

## License

MIT (see `LICENSE`) for the code and lesson text. The data files in `data/` keep the terms of their sources,
listed in `data/README.md`.
"""


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


def _for_students(staged: Path, url: str, course: str) -> None:
    """The staged copy as students get it: its own README and Makefile, and every link at `url`."""
    (staged / "README.md").write_text(student_readme(url), encoding="utf-8")
    makefile = staged / "Makefile"
    makefile.write_text(student_makefile(makefile.read_text(encoding="utf-8")), encoding="utf-8")
    conda = staged / "environment.yml"
    if conda.is_file():  # its comment shows how to run the tests, which students do not get
        lines = conda.read_text(encoding="utf-8").splitlines(keepends=True)
        conda.write_text("".join(line for line in lines if "pytest" not in line), encoding="utf-8")
    if url == course:
        return
    pyproject = staged / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(re.sub(r'^Repository = ".*"$', f'Repository = "{url}"', text, flags=re.M), encoding="utf-8")
    for path in sorted((staged / "notebooks" / "release").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        point_at(nb, path.stem, url)
        nbformat.write(nb, path)


def build_handout(dest: Path, archive: bool = False, repo: Path = REPO_ROOT, url: str | None = None) -> Handout:
    """Build the students' hand-out in `dest`, its links pointing at `url` (see the module docstring)."""
    course = repo_url()
    url = check_url(url) if url else course
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
        _for_students(staged, url, course)
        made = datetime.now(UTC).isoformat(timespec="seconds")
        (staged / MARKER).write_text(
            "The students' hand-out of the course, made by `make handout` (python -m course_lib handout) on "
            f"{made}, for {url}.\nIt has no instructor sources and no hidden tests; `make grade` runs the visible "
            "checks only.\n",
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
    warning = _exposed(course, dest) if url == course else None
    result = Handout(dest, files + [MARKER], None, total - len(solutions), total, url, warning)
    if archive:
        result.archive = dest.with_name(dest.name + ".tar.gz")
        _git(dest, "archive", "--format=tar.gz", f"--prefix={dest.name}/", "-o", str(result.archive), "HEAD")
    return result
