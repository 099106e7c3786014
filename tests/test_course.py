"""The course folder: student versions up to date, templates applied, nbgrader configuration, layout."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from course_lib import manifest
from course_lib.workflow.course import BADGE_MARKER, SETUP_ID, repo_url, stale_files
from tests.nbtools import LESSONS, ROOT, answer_names, grade_id, hidden_lines, read, release_path, source_path


def test_the_first_lessons_exist():
    assert LESSONS[:2] == ["00_welcome", "01_tokenization"]


@pytest.mark.slow
def test_student_versions_are_up_to_date():
    # Regenerating with nbgrader changes nothing: sources are refreshed and release/ is what nbgrader writes (every
    # lesson's, by one nbgrader process, as `python -m course_lib check` does).
    assert stale_files() == []


@pytest.mark.slow
def test_a_stale_student_version_is_named_among_the_others(tmp_path):
    # The one-process generation reads each lesson's student version back under its own name.
    root = tmp_path / "notebooks"
    shutil.copy(ROOT / "nbgrader_config.py", root.mkdir() or root)
    lessons = LESSONS[:3]
    for lesson in lessons:
        shutil.copytree(ROOT / "source" / lesson, root / "source" / lesson)
        shutil.copytree(ROOT / "release" / lesson, root / "release" / lesson)
    (tmp_path / "images").symlink_to(ROOT.parent / "images")
    released = root / "release" / lessons[1] / f"{lessons[1]}.ipynb"
    released.write_text(released.read_text(encoding="utf-8").replace("Lesson 01", "Lesson 1"), encoding="utf-8")
    assert stale_files(root, lessons) == [f"release/{lessons[1]}/{lessons[1]}.ipynb"]


@pytest.mark.parametrize("lesson", LESSONS)
def test_hidden_tests_are_absent_from_student_versions(lesson):
    lines = hidden_lines(lesson)
    assert lines, f"{lesson} has no hidden tests"
    released = release_path(lesson).read_text(encoding="utf-8")
    for line in lines:
        assert json.dumps(line)[1:-1] not in released and line not in released


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_structure_follows_the_template(lesson):
    nb = read(source_path(lesson))
    ids = [grade_id(c) for c in nb.cells if grade_id(c)]
    assert len(ids) == len(set(ids)), f"duplicate grade ids: {[k for k, n in Counter(ids).items() if n > 1]}"
    # Badge first, set-up cell right after the title; the URL comes from pyproject.toml.
    assert BADGE_MARKER in nb.cells[0].source and nb.cells[1].source.startswith("# Lesson")
    setup = nb.cells[2]
    assert grade_id(setup) == SETUP_ID and setup.metadata["nbgrader"]["locked"]
    assert repo_url() in setup.source and f'start_lesson("{lesson}"' in setup.source
    assert repr(list(manifest.lesson(lesson).data)) in setup.source
    # No outputs committed in instructor sources.
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    # At least three exercises, each with a visible and a hidden test cell carrying points.
    names = answer_names(nb)
    assert len(names) >= 3
    points = {grade_id(c): c.metadata["nbgrader"].get("points", 0) for c in nb.cells if grade_id(c)}
    for name in names:
        assert points.get(f"test_{name}", 0) > 0, f"{name}: no visible test cell with points"
        assert points.get(f"test_{name}_hidden", 0) > 0, f"{name}: no hidden test cell with points"
    # Self-grade cell last; a "Common bugs" section and a recap exist.
    assert grade_id(nb.cells[-1]) == "self_grade" and f'grade_this_notebook("{lesson}")' in nb.cells[-1].source
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Common bugs" in text and "Recap" in text


@pytest.mark.parametrize("lesson", LESSONS)
def test_answers_are_never_rebound_to_the_reference(lesson):
    # `from course_lib.x import <exercise>` after the answer would replace the learner's answer.
    nb = read(source_path(lesson))
    for name in answer_names(nb):
        for cell in nb.cells:
            if cell.cell_type == "code" and grade_id(cell) != name:
                assert f"import {name}\n" not in cell.source + "\n" and f"import {name} " not in cell.source


def test_nbgrader_config_sets_timeout_feedback_and_restore():
    config = runpy.run_path(str(ROOT / "nbgrader_config.py"), init_globals={"get_config": _Config})["c"]
    assert 0 < config["Execute"]["timeout"] <= 120
    names = [p.__name__ for p in config["GenerateFeedback"]["preprocessors"]]
    assert "ClearHiddenTests" in names and "HideHiddenTestTracebacks" in names
    assert "RestoreAndFlag" in [p.__name__ for p in config["Autograde"]["sanitize_preprocessors"]]


class _Config(dict):
    """Stand-in for traitlets' get_config(): nested dictionaries on attribute access."""

    def __call__(self):
        return self

    def __getattr__(self, key):
        return self.setdefault(key, _Config())

    def __setattr__(self, key, value):
        self[key] = value


def test_cli_reports_bad_notebook_clearly(tmp_path):
    bad = tmp_path / "00_welcome.ipynb"
    bad.write_text("{not json", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "course_lib", "grade", str(bad)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 2
    assert "not a readable notebook" in result.stderr and "Traceback" not in result.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "course_lib", "grade", str(tmp_path / "nope.ipynb")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert missing.returncode == 2 and "no notebook at" in missing.stderr


@pytest.mark.parametrize("present", [False, True])
def test_the_colab_set_up_installs_the_packages_a_lesson_needs_when_they_are_missing(monkeypatch, present):
    """Lesson 11 streams FineWeb-Edu with `datasets`: on Colab its set-up cell pip-installs it if it is missing,
    and leaves it alone if it is there. Lessons without extra packages install nothing more."""
    import ast
    import importlib.util
    import os
    import types

    def colab_branch(lesson: str) -> types.CodeType:
        source = next(c.source for c in read(release_path(lesson)).cells if grade_id(c) == SETUP_ID)
        branch = next(node for node in ast.parse(source).body if isinstance(node, ast.If))
        return compile(ast.Module([branch], []), "<set-up>", "exec")

    calls = []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(os.path, "isdir", lambda path: True)  # the course is cloned already
    monkeypatch.setattr(subprocess, "run", lambda command, check: calls.append(command))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if present else None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert manifest.lesson("11_gpt2_training_gpu").colab_packages == ("datasets",)
    exec(colab_branch("11_gpt2_training_gpu"), {"sys": sys})
    assert calls == ([] if present else [[sys.executable, "-m", "pip", "install", "-q", "datasets"]])
    calls.clear()
    exec(colab_branch("02_embeddings"), {"sys": sys})
    assert calls == []
