"""Lesson 12's four assembling exercises through real nbgrader (generate_assignment → autograde →
generate_feedback) on a temporary copy of the course, as tests/test_nbgrader_roundtrip.py runs every lesson.

That file's lesson-12 class already gives the reference answers full marks (the four new exercises included) and
takes one repeat_kv mistake. Here one student makes one named mistake in each of `ModernAttention` (RoPE's classic
cache bug), `ModernBlock` (post-norm), `newton_schulz` (the cubic step) and `load_llama_weights` (the rotate-half
rows copied as they are): each loses exactly its two test cells, every other exercise keeps its points, and the
feedback names each mistake.
"""

from __future__ import annotations

import shutil

import pytest

from tests.nbtools import ROOT, read, release_path
from tests.test_modern_trusted import NEW, WRONG, four_wrong, solved
from tests.test_nbgrader_roundtrip import _feedback, _log_of, _max_scores, _nbgrader, _scores, _submit

pytestmark = pytest.mark.slow

LESSON = "12_beyond_gpt2"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("class-modern")
    library = course.parent / "lib-modern"
    shutil.copytree(ROOT.parent / "course_lib", library / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (library / "data").symlink_to(ROOT.parent / "data")
    env = {"PYTHONPATH": str(library)}
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source" / LESSON, course / "source" / LESSON)
    result = _nbgrader(["generate_assignment", LESSON, "--force"], course, env)
    assert result.returncode == 0, result.stderr
    assert len(read(release_path(LESSON)).cells) == len(read(course / "release" / LESSON / f"{LESSON}.ipynb").cells)
    _submit(course, "four_wrong", LESSON, four_wrong(solved(LESSON)))
    autograde = _nbgrader(["autograde", LESSON], course, env)
    feedback = _nbgrader(["generate_feedback", LESSON], course, env)
    assert feedback.returncode == 0, feedback.stderr
    return course, autograde


def test_each_named_mistake_loses_exactly_its_exercise_and_is_named_in_the_feedback(graded):
    course, autograde = graded
    scores, maxima = _scores(course, LESSON, "four_wrong"), _max_scores(course, LESSON)
    owned = {f"test_{name}{hidden}" for name in NEW for hidden in ("", "_hidden")}
    assert owned <= set(maxima)
    for cell, max_score in maxima.items():
        assert scores[cell] == (0 if cell in owned else max_score), (cell, _log_of(autograde, "four_wrong"))
    assert not scores["__flagged__"]
    feedback = _feedback(course, LESSON, "four_wrong")
    for name, _, _, words in WRONG:
        assert words in feedback, name
