"""The course's nbgrader workflow in one place: regenerate student versions, and grade one notebook.

Command line (`python -m course_lib ...`, wrapped by the Makefile):
    release [LESSON ...]   refresh each instructor source's Colab badge and set-up cell, then regenerate the
                           student versions in notebooks/release/ with `nbgrader generate_assignment`
    check                  exit 1 if the committed student versions are not what `release` would write
    grade NOTEBOOK         autograde one notebook with nbgrader (hidden tests included, except in a students'
                           hand-out) and print the score of each exercise with the grader's messages

Grading and releasing run nbgrader in a temporary copy of the course, so a learner's or a developer's
checkout never gets a gradebook, and an instructor's class folders are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat

from course_lib import manifest
from course_lib.workflow.images import MissingImageError, inline_images_in_file

__all__ = [
    "VISIBLE_ONLY",
    "CourseError",
    "course_root",
    "has_instructor_source",
    "lesson_ids",
    "lesson_notebook",
    "point_at",
    "release",
    "render_release",
    "render_releases",
    "repo_url",
    "stale_files",
    "visible_only_source",
    "without_repository_url",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
LEARNER = "learner"
BADGE_MARKER = "<!-- course: colab badge -->"
SETUP_ID = "setup"


SETUP_TEMPLATE = """\
# Set-up: run this cell first. On Colab it installs the course package (keeping Colab's torch) and
# clones the course with its data; on your own machine it only checks what is there.
{drive}import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    if not os.path.isdir("/content/course"):
        repository = "{url}"
        subprocess.run(["git", "clone", "--depth", "1", repository, "/content/course"], check=True)
        pip = [sys.executable, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-e", "/content/course"], check=True)
    sys.path.insert(0, "/content/course")
{colab_packages}
from course_lib.lesson import start_lesson

start_lesson("{lesson}", data={data!r}{drive_argument})"""

# For a lesson that runs the learner's classes of earlier lessons: on Colab those are in Google Drive.
DRIVE_TEXT = (
    "This lesson runs the answers you wrote in {lessons}. On Colab it reads them from {copies} in Google "
    "Drive, in DRIVE_FOLDER: File > Save a copy in Drive puts them there, and Colab asks for your "
    "permission to mount your Drive. Name another folder if yours are elsewhere; None: no Drive, the course's "
    "classes run instead."
)
DRIVE_FOLDER = '"/content/drive/MyDrive/Colab Notebooks"'


class CourseError(RuntimeError):
    """A problem with a notebook or the course folder, explained for a person."""


def course_root() -> Path:
    return REPO_ROOT / "notebooks"


def lesson_ids(root: Path | None = None) -> list[str]:
    """The lessons of the course: its instructor sources, or its student versions where there are none (a
    students' hand-out, `handout.py`)."""
    root = root or course_root()
    folder = root / "source" if (root / "source").is_dir() else root / "release"
    return sorted(p.name for p in folder.iterdir() if (p / f"{p.name}.ipynb").is_file())


def has_instructor_source(lesson: str, root: Path | None = None) -> bool:
    """Whether the instructor source of `lesson` (solutions, hidden tests) is here: not in a students' hand-out."""
    return ((root or course_root()) / "source" / lesson / f"{lesson}.ipynb").is_file()


def lesson_notebook(lesson: str, root: Path | None = None) -> Path:
    """The instructor source of `lesson` where it is here, else its student version."""
    root = root or course_root()
    kind = "source" if has_instructor_source(lesson, root) else "release"
    return root / kind / lesson / f"{lesson}.ipynb"


VISIBLE_ONLY = (
    "visible checks only: this copy of the course has no hidden tests (they stay with your instructor), so your "
    "instructor's grade includes checks that were not run here"
)


def visible_only_source(released):
    """An nbgrader source made from a student version, for grading without the instructor's source: each hidden
    test cell repeats its exercise's visible checks for no points, so the score is the visible checks' score. (Its
    hidden region holds them: the student version nbgrader makes from it is the one released, and a submitted
    hidden test cell, as released, is not taken for an edited one.)"""
    nb = nbformat.reads(nbformat.writes(released), as_version=4)  # a copy
    visible = {grade_id(c): c.source for c in nb.cells if grade_id(c)}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if not meta:
            continue
        for key in ("checksum", "cell_type"):  # written by generate_assignment; a source has neither
            meta.pop(key, None)
        name = meta.get("grade_id", "")
        if meta.get("grade") and name.endswith("_hidden") and name.removesuffix("_hidden") in visible:
            checks = [line for line in visible[name.removesuffix("_hidden")].splitlines() if not line.startswith("#")]
            cell.source = cell.source.rstrip() + "\n### BEGIN HIDDEN TESTS\n" + "\n".join(checks).strip()
            cell.source += "\n### END HIDDEN TESTS"
            meta["points"] = 0
    return nb


def repo_url() -> str:
    """The repository's public URL: written once, in pyproject.toml [project.urls] Repository."""
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"]


COLAB_PACKAGES = """
    import importlib
    import importlib.util

    missing = [name for name in {packages!r} if importlib.util.find_spec(name) is None]
    if missing:  # packages this lesson uses that Colab may lack
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
        importlib.invalidate_caches()
"""


def _colab_packages(lesson: str) -> str:
    """The set-up cell's lines that install the lesson's extra packages on Colab (none for most lessons)."""
    try:
        packages = list(manifest.lesson(lesson).colab_packages)
    except KeyError:
        return ""
    return COLAB_PACKAGES.format(packages=packages) if packages else ""


def _drive(lesson: str) -> tuple[str, str]:
    """The set-up cell's Drive lines and start_lesson's argument for them (none for a lesson that runs no earlier
    lesson's answers)."""
    try:
        earlier = [lesson_id[:2] for lesson_id in manifest.lesson(lesson).your_lessons]
    except KeyError:
        return "", ""
    if not earlier:
        return "", ""
    numbers = " and ".join(", ".join(earlier).rsplit(", ", 1))
    lessons = f"lesson{'s' if len(earlier) > 1 else ''} {numbers}"
    copies = "your copies of those lessons" if len(earlier) > 1 else "your copy of it"
    text = DRIVE_TEXT.format(lessons=lessons, copies=copies)
    comment = textwrap.fill(text, width=104, initial_indent="# ", subsequent_indent="# ")
    return f"{comment}\nDRIVE_FOLDER = {DRIVE_FOLDER}\n", ", drive_folder=DRIVE_FOLDER"


def _lesson_data(lesson: str) -> list[str]:
    """The data files the set-up cell of `lesson` makes sure are present (from the manifest)."""
    try:
        return list(manifest.lesson(lesson).data)
    except KeyError:
        return []


def colab_link(lesson: str, url: str) -> str:
    """Where Colab opens `lesson`'s student version from the GitHub repository at `url`."""
    path = re.sub(r"^https://github\.com/", "", url.rstrip("/")).removesuffix(".git")
    return f"https://colab.research.google.com/github/{path}/blob/main/notebooks/release/{lesson}/{lesson}.ipynb"


def _colab_badge(lesson: str, url: str) -> str:
    link = colab_link(lesson, url)
    # A text link, not Colab's badge image: offline (JupyterLab on a laptop) an image from the web shows as a
    # broken picture with its alt text, while a link reads the same everywhere.
    return f"{BADGE_MARKER}\n[Open this lesson in Colab]({link}) (the set-up cell below installs the course there)"


def grade_id(cell) -> str | None:
    """The nbgrader grade_id of a cell, or None for a cell nbgrader does not track."""
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def setup_source(lesson: str, url: str) -> str:
    """The text of `lesson`'s set-up cell, which on Colab clones the repository at `url`."""
    drive, drive_argument = _drive(lesson)
    source = SETUP_TEMPLATE.format(
        url=url,
        lesson=lesson,
        data=_lesson_data(lesson),
        colab_packages=_colab_packages(lesson),
        drive=drive,
        drive_argument=drive_argument,
    )
    head, _, call = source.rpartition("\n")
    if len(call) > 120 and drive_argument:  # over the lessons' line length (ruff's): the Drive argument below
        call = call.replace(drive_argument, ",\n" + " " * len("start_lesson(") + drive_argument.removeprefix(", "))
    return f"{head}\n{call}"


_REPOSITORY_LINE = re.compile(r'^(\s*repository = )"[^"\n]*"$', re.M)


def without_repository_url(source: str) -> str:
    """A set-up cell's text with the repository it clones left out: a students' hand-out's set-up cell clones the
    hand-out (`make handout URL=...`), the course's clones the course, and otherwise they are the same cell."""
    return _REPOSITORY_LINE.sub(r'\1""', source)


def point_at(nb, lesson: str, url: str) -> None:
    """Make a student version's Colab link and set-up cell point at the repository at `url`, in place (the rest of
    each cell, its metadata included, stays as it is)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and BADGE_MARKER in cell.source:
            cell.source = _colab_badge(lesson, url)
        elif grade_id(cell) == SETUP_ID:
            cell.source = setup_source(lesson, url)


def render_source(nb, lesson: str, url: str):
    """Instructor source with the badge and set-up cell regenerated and all outputs cleared."""
    badge = nbformat.v4.new_markdown_cell(_colab_badge(lesson, url))
    setup = nbformat.v4.new_code_cell(setup_source(lesson, url))
    setup.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": SETUP_ID,
        "locked": True,
        "schema_version": 3,
        "solution": False,
    }
    setup.metadata["editable"] = False
    setup.metadata["deletable"] = False
    cells = [
        c for c in nb.cells if not (c.cell_type == "markdown" and BADGE_MARKER in c.source) and grade_id(c) != SETUP_ID
    ]
    # Badge first; set-up right after the title cell (the first markdown cell).
    title_at = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"), -1)
    cells.insert(title_at + 1, setup)
    cells.insert(0, badge)
    for i, cell in enumerate(cells):
        cell["id"] = f"{lesson[:2]}-{i:03d}"  # stable ids keep regenerated files identical
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.cells = cells
    nb.metadata.setdefault("kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"})
    return nb


def _write_if_changed(nb, path: Path) -> bool:
    text = nbformat.writes(nb) + "\n"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def run_nbgrader(
    args: list[str], cwd: Path, timeout: float | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` in `cwd` with this interpreter (`env`: extra environment variables)."""
    # nbgrader runs helper programs (alembic) and kernels by name: put this interpreter's bin folder first.
    env = dict(os.environ) | (env or {})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # `python -m course_lib.workflow.startup` is `python -m nbgrader` minus seconds of unused imports (startup.py).
    return subprocess.run(
        [sys.executable, "-m", "course_lib.workflow.startup", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def generated_course(lesson: str, root: Path | None = None) -> Iterator[Path]:
    """A throw-away nbgrader course holding one lesson's source, with its student version generated. Without the
    instructor source (a students' hand-out), the source is made from the student version (`visible_only_source`).

    Yields the temporary course root (its `release/<lesson>/` is filled in); the folder is removed afterwards.
    Releasing and self-grading both start here, so the committed course folder is never written by a run.
    """
    with generated_courses([lesson], root) as tmp:
        yield tmp


@contextmanager
def generated_courses(lessons: list[str], root: Path | None = None) -> Iterator[Path]:
    """`generated_course` for several lessons at once: one temporary course holding them all, their student
    versions generated by one nbgrader process (`generate_assignment "*"`), which saves a process start a lesson."""
    root = root or course_root()
    tmp = Path(tempfile.mkdtemp(prefix="course-"))
    try:
        shutil.copy(root / "nbgrader_config.py", tmp / "nbgrader_config.py")
        for lesson in lessons:
            _copy_source(lesson, root, tmp)
        assignment = lessons[0] if len(lessons) == 1 else "*"  # the course holds exactly these lessons
        result = run_nbgrader(["generate_assignment", assignment, "--force"], tmp)
        if result.returncode != 0:
            names = ", ".join(lessons)
            raise CourseError(f"nbgrader generate_assignment failed for {names}:\n{result.stdout}{result.stderr}")
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _copy_source(lesson: str, root: Path, tmp: Path) -> None:
    """The lesson's source in the course `tmp`, its diagrams inlined; in a hand-out, one made from the student
    version."""
    if has_instructor_source(lesson, root):
        shutil.copytree(root / "source" / lesson, tmp / "source" / lesson)
        try:  # diagrams from images/ go into the student version as data: URIs (Colab shows no relative paths)
            inline_images_in_file(tmp / "source" / lesson / f"{lesson}.ipynb", root / "source" / lesson)
        except MissingImageError as exc:
            raise CourseError(str(exc)) from None
    else:  # a students' hand-out: the student version, graded on its visible checks (`visible_only_source`)
        released = root / "release" / lesson / f"{lesson}.ipynb"
        if not released.is_file():
            raise CourseError(f"no lesson {lesson!r} here (neither {root / 'source'} nor {root / 'release'})")
        (tmp / "source" / lesson).mkdir(parents=True)
        nbformat.write(
            visible_only_source(nbformat.read(released, as_version=4)), tmp / "source" / lesson / released.name
        )


def render_release(lesson: str, root: Path | None = None) -> dict[str, str]:
    """The student version(s) nbgrader generates from the current instructor source: {file name: text}."""
    return render_releases([lesson], root)[lesson]


def render_releases(lessons: list[str], root: Path | None = None) -> dict[str, dict[str, str]]:
    """`render_release` of each lesson, generated by one nbgrader process: {lesson: {file name: text}}."""
    with generated_courses(lessons, root) as tmp:
        return {
            lesson: {
                p.name: p.read_text(encoding="utf-8")
                for p in sorted((tmp / "release" / lesson).iterdir())
                if p.is_file()
            }
            for lesson in lessons
        }


def release(
    lessons: list[str] | None = None, root: Path | None = None, progress: Callable[[str], None] | None = None
) -> list[Path]:
    """Refresh instructor sources (badge, set-up cell, no outputs) and regenerate their student versions;
    `progress` is told about each lesson as it is done (`make release` prints it: nbgrader takes seconds a lesson)."""
    root = root or course_root()
    url = repo_url()
    written = []
    lessons = lessons or lesson_ids(root)
    for number, lesson in enumerate(lessons, 1):
        started = time.monotonic()
        path = root / "source" / lesson / f"{lesson}.ipynb"
        if not path.is_file():
            raise CourseError(f"no instructor source at {path}; known lessons: {', '.join(lesson_ids(root))}")
        now = []
        nb = render_source(nbformat.read(path, as_version=4), lesson, url)
        if _write_if_changed(nb, path):
            now.append(path)
        target = root / "release" / lesson
        target.mkdir(parents=True, exist_ok=True)
        for name, text in render_release(lesson, root).items():
            out = target / name
            if not out.exists() or out.read_text(encoding="utf-8") != text:
                out.write_text(text, encoding="utf-8")
                now.append(out)
        if progress is not None:
            done = "wrote " + ", ".join(str(p.relative_to(root)) for p in now) if now else "up to date"
            progress(f"[{number}/{len(lessons)}] {lesson}: {done} ({time.monotonic() - started:.0f} s)")
        written += now
    return written


def stale_files(root: Path | None = None, lessons: list[str] | None = None) -> list[str]:
    """Files `release` would change (sources needing a refresh, student versions out of date), for all lessons or
    the ones named; the student versions of all of them are generated by one nbgrader process."""
    root = root or course_root()
    url = repo_url()
    lessons = lessons or lesson_ids(root)
    stale_sources = {}
    for lesson in lessons:
        path = root / "source" / lesson / f"{lesson}.ipynb"
        if not path.is_file():
            raise CourseError(f"no instructor source at {path} (a students' hand-out has none)")
        fresh = nbformat.writes(render_source(nbformat.read(path, as_version=4), lesson, url)) + "\n"
        stale_sources[lesson] = fresh != path.read_text(encoding="utf-8")
    stale = []
    for lesson, files in render_releases(lessons, root).items():
        if stale_sources[lesson]:
            stale.append(str((root / "source" / lesson / f"{lesson}.ipynb").relative_to(root)))
        for name, text in files.items():
            out = root / "release" / lesson / name
            if not out.exists() or out.read_text(encoding="utf-8") != text:
                stale.append(str(out.relative_to(root)))
    return stale
