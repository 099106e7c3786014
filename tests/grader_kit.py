"""What every grader test file (tests/test_grading_*.py) needs, written once.

Learner answers are notebook code, run as a notebook cell would run them (tests/answers.py: `exec` in a namespace
whose `__name__` is "__main__", which is what the from-scratch guard sees for a notebook's definitions).

- `GraderKit`: one lesson's graders and its right answers (its references are where the manifest names them).
  `kit.fails(name, answer, *words)` asserts that an answer fails `check_<name>` with a message containing each of
  `words` (as written); the answer is notebook code, an `Edit` of the right answer, or an object.
- `mistake` and `wrong_answer`: rows of a test file's tables (a right answer with one piece changed, or a whole
  wrong answer), each with the words its failure message must contain and a readable test id.
- `LessonGraderTests`: the tests every lesson gets (right answers and the reference, guard off, pass the visible
  and hidden checks; the lesson's own solutions pass its test cells; the reference itself earns nothing; a check
  leaves the global random state alone; each row of the file's tables fails as it should). A test file
  subclasses it once.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
import torch

from course_lib import manifest
from course_lib.grading import Passed
from course_lib.grading.kit.exercise import resolve
from tests.answers import edit, failure_message, hidden_cases, run_cell, run_graded_cells


@dataclass(frozen=True)
class Edit:
    """A right answer with `old` changed into `new`, then each further (old, new) of `also` (a buggy answer)."""

    old: str
    new: str
    also: tuple[tuple[str, str], ...] = ()


class _HiddenCases:
    def __repr__(self) -> str:
        return "HIDDEN"


# As a row's `cases`: the cases the lesson's hidden test cell passes for that exercise.
HIDDEN = _HiddenCases()


def mistake(name: str, old: str, new: str, words: str | tuple[str, ...], *, id: str, also=(), cases=None):
    """A table row: the right answer to `name` with `old` changed into `new` (then each (old, new) of `also`)
    must fail `check_<name>` with a message containing each of `words`."""
    return wrong_answer(name, Edit(old, new, tuple(also)), words, id=id, cases=cases)


def wrong_answer(name: str, answer: Any, words: str | tuple[str, ...], *, id: str, cases=None):
    """A table row: `answer` (notebook code, an `Edit`, or an object) must fail `check_<name>` on `cases` (the
    visible ones when None) with a message containing each of `words`."""
    return pytest.param(name, answer, (words,) if isinstance(words, str) else tuple(words), cases, id=id)


class GraderKit:
    """The graders of one lesson (`grading`, a module of check_<exercise> functions) and its right answers
    ({exercise: notebook code}, written independently of course_lib). The references are the manifest's.

    A check takes one answer, except the exercises in `parts`: {exercise: names of the answers its check takes,
    in order}, e.g. {"split_merge_heads": ("split_heads", "merge_heads")}.
    """

    def __init__(
        self,
        lesson: str,
        grading: ModuleType,
        answers: dict[str, str],
        parts: dict[str, tuple[str, ...]] | None = None,
    ):
        self.lesson, self.grading, self.answers = lesson, grading, answers
        self.parts = parts or {}

    @property
    def exercises(self) -> list[str]:
        return list(self.answers)

    def check(self, name: str):
        return getattr(self.grading, f"check_{name}")

    def hidden(self, name: str) -> list:
        """The cases the lesson's hidden test cell of `name` passes."""
        return hidden_cases(self.lesson)[name]

    def variant(self, name: str, old: str, new: str, also=()) -> str:
        """The right answer to `name` with `old` changed into `new`, then each (old, new) of `also`."""
        code = edit(self.answers[name], old, new)
        for more_old, more_new in also:
            code = edit(code, more_old, more_new)
        return code

    def answer(self, name: str, code: str | None = None):
        """What `code` (the right answer when None) defines for `name`, run as a notebook cell: the object called
        `name`, or the cell's one definition when it has another name (`f`, `P`); a tuple for an exercise in
        `parts`."""
        namespace = run_cell(self.answers[name] if code is None else code)
        if name in self.parts:
            return tuple(namespace[part] for part in self.parts[name])
        if name in namespace:
            return namespace[name]
        defined = [
            value
            for value in namespace.values()
            if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == "__main__"
        ]
        assert len(defined) == 1, f"the cell defines no `{name}` and not exactly one other function or class"
        return defined[0]

    def grade(self, name: str, answer: Any = None, cases: Any = None) -> Passed:
        """Run `check_<name>` on `answer` (the right one when None; notebook code, an `Edit` of the right one, or
        an object: a tuple for an exercise in `parts`) and on `cases` (`HIDDEN`: the lesson's hidden ones)."""
        if answer is None or isinstance(answer, str | Edit):
            if isinstance(answer, Edit):
                answer = self.variant(name, answer.old, answer.new, answer.also)
            answer = self.answer(name, answer)
        answers = answer if name in self.parts else (answer,)
        return self.check(name)(*answers, cases=self.hidden(name) if cases is HIDDEN else cases)

    def fails(self, name: str, answer: Any, *words: str, cases: Any = None) -> str:
        """Assert that `answer` (as for `grade`) fails `check_<name>` with a message containing each of `words`;
        return the message."""
        return failure_message(lambda: self.grade(name, answer, cases), *words)

    def references(self, name: str) -> tuple:
        """The course's references of exercise `name`, one per name it defines, from where the manifest names them."""
        entry = next(e for e in manifest.lesson(self.lesson).exercises if e.name == name)
        return tuple(resolve(path) for path in entry.paths.values())

    def reference_answer(self, name: str):
        """The reference's own object for `name` (a tuple for an exercise in `parts`)."""
        found = self.references(name)
        return found if name in self.parts else found[0]


class LessonGraderTests:
    """The tests every lesson's graders get. A test file subclasses this once:

        class TestGraders(LessonGraderTests):
            kit = KIT  # the lesson's GraderKit
            at_least = 3  # visible checks each right answer passes, at least
            setup = ""  # code the lesson runs before its first answer cell (its imports)
            mistakes = MISTAKES  # rows (`mistake`, `wrong_answer`): common mistakes, each named
            borrowed = BORROWED  # rows: answers that use the reference or a library's version, earning nothing

    Tests that take `name` run once per exercise; the table tests once per row, with its id.
    """

    kit: GraderKit
    at_least = 1
    setup = ""
    mistakes: list = []
    borrowed: list = []

    def pytest_generate_tests(self, metafunc):
        tables = {
            "test_common_mistakes_are_named": self.mistakes,
            "test_borrowed_answers_earn_nothing": self.borrowed,
        }
        if metafunc.function.__name__ in tables:
            metafunc.parametrize("name, answer, words, cases", tables[metafunc.function.__name__])
        elif "name" in metafunc.fixturenames:
            metafunc.parametrize("name", self.kit.exercises)

    def test_right_answers_pass_visible_checks(self, name):
        result = self.kit.grade(name)
        assert isinstance(result, Passed) and not result.hidden and result.checks >= self.at_least, result

    def test_right_answers_pass_the_lessons_hidden_checks(self, name):
        result = self.kit.grade(name, cases=HIDDEN)
        assert isinstance(result, Passed) and result.hidden and result.checks >= len(self.kit.hidden(name)), result

    def test_reference_passes_visible_and_hidden_checks(self, name, no_guard):
        assert set(hidden_cases(self.kit.lesson)) == set(self.kit.exercises)
        reference = self.kit.reference_answer(name)
        visible = self.kit.grade(name, reference)
        assert isinstance(visible, Passed) and not visible.hidden and visible.checks >= self.at_least, visible
        hidden = self.kit.grade(name, reference, HIDDEN)
        assert isinstance(hidden, Passed) and hidden.hidden and hidden.checks >= len(self.kit.hidden(name)), hidden

    def test_the_reference_itself_earns_nothing(self, name):
        first = self.kit.parts.get(name, (name,))[0]  # the guard names the first reference it meets
        # Named where it is defined (a lesson's reference module may re-export it from another module).
        defined = self.kit.references(name)[0]
        label = f"{defined.__module__}.{defined.__qualname__}"
        words = f"is the course's reference `{label}`", f"write `{first}` yourself"
        self.kit.fails(name, self.kit.reference_answer(name), *words, "earns no points")

    def test_a_check_leaves_the_global_random_state_alone(self, name):
        torch.manual_seed(3)
        before = torch.random.get_rng_state()
        self.kit.grade(name)
        assert torch.equal(torch.random.get_rng_state(), before)

    def test_lesson_solutions_pass_their_own_test_cells(self):
        """The instructor source's answer cells, run in order, pass every visible and hidden test cell."""
        graded = run_graded_cells(self.kit.lesson, run_cell(self.setup))
        assert len(graded) == 2 * len(self.kit.exercises)

    def test_common_mistakes_are_named(self, name, answer, words, cases):
        self.kit.fails(name, answer, *words, cases=cases)

    def test_borrowed_answers_earn_nothing(self, name, answer, words, cases):
        self.kit.fails(name, answer, *words, cases=cases)
