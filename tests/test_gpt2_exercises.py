"""course_lib.gpt2_exercises: lesson 10's `ref` holds the four references themselves, re-exported, not copies."""

from __future__ import annotations

from course_lib import generate, gpt2, gpt2_exercises, manifest, train


def test_the_four_references_are_the_objects_where_they_are_defined():
    assert gpt2_exercises.gpt2_parameter_count is gpt2.gpt2_parameter_count
    assert gpt2_exercises.cosine_lr is train.cosine_lr
    assert gpt2_exercises.top_p_filter is generate.top_p_filter
    assert gpt2_exercises.attend_with_cache is gpt2.attend_with_cache


def test_it_holds_exactly_the_lessons_exercises():
    lesson = manifest.lesson("10_gpt2")
    assert lesson.references == gpt2_exercises.__name__
    assert gpt2_exercises.__all__ == [e.name for e in lesson.exercises]
    public = {name for name in vars(gpt2_exercises) if not name.startswith("_") and name != "annotations"}
    assert public == set(gpt2_exercises.__all__)  # no module objects for an answer to reach through `ref`
