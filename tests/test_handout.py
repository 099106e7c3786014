"""The students' hand-out (`make handout`, course_lib/workflow/handout.py): a git repository with what a learner needs,
no instructor source and no line of any lesson's hidden tests or solutions, a README and a Makefile for students, and
every link at the URL it will be published at; a fresh clone of it runs lesson 00 and grades itself, on the visible
checks, and says so; and the instructor's grading takes its notebooks as the course's own."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import nbformat
import pytest

from course_lib.workflow.course import VISIBLE_ONLY, CourseError, grade_id, repo_url
from course_lib.workflow.handout import MARKER, build_handout
from tests.nbtools import LESSONS, ROOT, execute, hidden_lines, read, solved, source_path, with_answer
from tests.test_nbgrader_roundtrip import ONE_WRONG

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("handout")]
REPO = ROOT.parent
LESSON = "00_welcome"
URL = "https://github.com/a-teacher/transformers-course"  # where the instructor will publish it
_SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    folder = tmp_path_factory.mktemp("publish") / "course"
    made = build_handout(folder, archive=True, url=URL + ".git")
    return folder, made


def _files(folder: Path) -> dict[str, str]:
    """Every file of the hand-out that is text, by path."""
    out = {}
    for path in folder.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(folder).parts:
            with contextlib.suppress(UnicodeDecodeError):
                out[str(path.relative_to(folder))] = path.read_text(encoding="utf-8")
    return out


def test_the_handout_holds_what_a_learner_needs_and_no_instructor_files(handout):
    folder, made = handout
    tracked = _git(folder, "ls-files").split()
    assert len(_git(folder, "log", "--oneline").splitlines()) == 1
    for lesson in LESSONS:
        assert f"notebooks/release/{lesson}/{lesson}.ipynb" in tracked
    for needed in ("README.md", "Makefile", "pyproject.toml", "environment.yml", "LICENSE", MARKER):
        assert needed in tracked
    for folder_name in ("course_lib/", "data/", "images/", "jupyter/"):
        assert any(p.startswith(folder_name) for p in tracked), folder_name
    assert "course_lib/grading/welcome.py" in tracked  # the visible checks and self-grading need the graders
    assert not [p for p in tracked if p.startswith(("notebooks/source/", "tests/", ".ci/"))]
    with tarfile.open(made.archive) as archive:
        assert sorted(m.name.removeprefix("course/") for m in archive.getmembers() if m.isfile()) == sorted(tracked)


def test_no_hidden_test_and_no_solution_line_is_in_any_file(handout):
    """Each line of every lesson's hidden tests, and each line of its solutions that the course does not ship
    anyway (in the student version, or in `course_lib`'s references, which the lessons import), is searched for in
    every file. Lines that are a lone name (`SelfAttention,`: an argument on its own line) say nothing and are
    left out."""
    folder, made = handout
    files = _files(folder)
    library = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "course_lib").rglob("*.py"))
    lone_name = re.compile(r"[A-Za-z_][\w.]*,?")
    shipped = total = 0
    for lesson in LESSONS:
        hidden = [line for line in hidden_lines(lesson) if not lone_name.fullmatch(line)]
        assert hidden, lesson
        released = (ROOT / "release" / lesson / f"{lesson}.ipynb").read_text(encoding="utf-8")
        solution = []
        for cell in read(source_path(lesson)).cells:
            for block in _SOLUTION.findall(cell.source):
                solution += [line.strip() for line in block.splitlines() if len(line.strip()) > 12]
        total += len(solution)
        shipped += sum(line in library for line in solution)
        secret = hidden + [line for line in solution if line not in library and line not in released]
        for name, text in files.items():
            leaked = [line for line in secret if line in text or line.replace('"', '\\"') in text]
            assert not leaked, f"{name} holds {lesson}'s {leaked[:3]}"
        assert not [line for line in hidden if line in library]  # hidden cases live in notebooks/source/ only
    print(f"\n{shipped} of {total} solution lines are in course_lib's references (shipped with the lessons)")
    assert made.shipped_solution_lines > 0  # and the command says so (its summary line)


def test_a_fresh_clone_runs_lesson_00_and_grades_itself_on_the_visible_checks(handout, tmp_path, monkeypatch):
    """A learner clones the hand-out, does lesson 00 (one answer wrong), saves it and runs every cell: the last cell
    grades the saved notebook, in the clone, without the instructor source: visible checks only, and it says so."""
    folder, _ = handout
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(folder), str(clone))
    assert not (clone / "notebooks" / "source").exists()
    work = clone / "work" / LESSON
    work.mkdir(parents=True)
    name, code, words = ONE_WRONG[LESSON]
    nb = with_answer(solved(LESSON), name, code)
    nb.cells.append(nbformat.v4.new_code_cell("import course_lib\nprint(course_lib.__file__)"))
    nbformat.write(nb, work / f"{LESSON}.ipynb")  # saved, as the self-grading cell asks
    monkeypatch.setenv("PYTHONPATH", str(clone))  # the clone's course_lib, not this checkout's
    monkeypatch.delenv("COURSE_SELF_GRADE", raising=False)
    execute(nb, timeout=600, folder=work)
    assert nb.cells[-1].outputs[0]["text"].startswith(str(clone / "course_lib"))
    graded = next(c for c in nb.cells if "grade_this_notebook" in c.source)
    report = "".join(str(o.get("data", {}).get("text/markdown", "")) for o in graded.outputs)
    assert "**Lesson 00_welcome: 8 / 10 points**" in report, graded.outputs
    assert VISIBLE_ONLY in report and words in report
    # `make grade NB=...`, as the README shows it, runs this in the clone (past the set-up of .venv)
    command = subprocess.run(
        [sys.executable, "-m", "course_lib", "grade", f"work/{LESSON}/{LESSON}.ipynb"],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert command.returncode == 0, command.stderr
    assert "Lesson 00_welcome: 8 / 10 points" in command.stdout and VISIBLE_ONLY in command.stdout


def test_every_link_points_at_the_url_it_is_published_at(handout):
    """Each lesson's Colab link and set-up cell (which clones the repository on Colab), the README's links and the
    hand-out's pyproject point at URL; nothing in it points at the course's own repository."""
    folder, made = handout
    course = repo_url()
    assert made.url == URL and made.warning is None and "warning" not in str(made)
    files = _files(folder)
    assert not [name for name, text in files.items() if course in text]
    assert f'Repository = "{URL}"' in files["pyproject.toml"]
    colab = "https://colab.research.google.com/github/a-teacher/transformers-course/blob/main/notebooks/release"
    for lesson in LESSONS:
        nb = read(folder / "notebooks" / "release" / lesson / f"{lesson}.ipynb")
        setup = next(c for c in nb.cells if grade_id(c) == "setup")
        assert f'repository = "{URL}"' in setup.source
        badge = nb.cells[0].source
        assert f"{colab}/{lesson}/{lesson}.ipynb" in badge
        assert f"{colab}/{lesson}/{lesson}.ipynb" in files["README.md"]


def test_its_readme_and_makefile_are_for_students(handout, tmp_path):
    folder, _ = handout
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for needed in ("git clone " + URL, "make lab", "make grade NB=", "visible checks only", "lesson 00"):
        assert needed in readme, needed
    for instructor in ("make test", "make class", "make handout", "make release", "make feedback", "nbgrader",
                       "For an instructor", "Do not give students", "notebooks/source", "tests/"):  # fmt: skip
        assert instructor not in readme, instructor
    makefile = (folder / "Makefile").read_text(encoding="utf-8")
    assert "make test" not in makefile and "pytest" not in makefile
    assert "pytest" not in (folder / "environment.yml").read_text(encoding="utf-8")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(folder), str(clone))
    for target in (["lab"], ["grade", "NB=work/00_welcome/00_welcome.ipynb"], ["clean-venv"]):
        result = subprocess.run(["make", "-n", *target], cwd=clone, capture_output=True, text=True)
        assert result.returncode == 0, (target, result.stderr)
    for target in ("test", "class", "handout", "release", "feedback", "nbgrader", "lab-instructor"):
        result = subprocess.run(["make", "-n", target], cwd=clone, capture_output=True, text=True)
        assert result.returncode != 0 and "No rule to make target" in result.stderr, target


def test_without_a_url_the_command_says_what_the_links_expose(tmp_path):
    made = build_handout(tmp_path / "course")
    course = repo_url()
    assert made.url == course and made.warning is not None
    assert course in made.warning and "notebooks/source/" in made.warning and "URL=" in made.warning
    assert str(made).startswith("warning: ")
    with pytest.raises(CourseError, match="GitHub repository"):
        build_handout(tmp_path / "other", url="https://gitlab.com/a/b")
    assert not (tmp_path / "other").exists()


def test_the_instructors_grading_takes_a_handout_notebook_as_the_courses(handout, tmp_path):
    """A student's notebook from the hand-out has its own URL in the locked set-up cell; graded by the instructor's
    course, that is no edit of a locked cell (nothing is flagged), and the answers get their points."""
    from course_lib.workflow.selfgrade import grade_notebook

    folder, _ = handout
    submitted = read(folder / "notebooks" / "release" / LESSON / f"{LESSON}.ipynb")
    answers = {grade_id(c): c.source for c in solved(LESSON).cells if grade_id(c)}
    for cell in submitted.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell.source = answers[grade_id(cell)]
    assert URL in next(c.source for c in submitted.cells if grade_id(c) == "setup")
    path = tmp_path / f"{LESSON}.ipynb"
    nbformat.write(submitted, path)
    report = grade_notebook(path)  # the instructor's course: its source, its hidden tests
    assert report.flags == [] and report.score == report.max_score > 0, str(report)
