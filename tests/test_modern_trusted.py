"""Lesson 12's four assembling exercises graded the trusted way (course_lib.workflow.trusted), as nbgrader's
autograde grades them: each answer cell in its own sandbox with the lesson's preamble, the checks outside it.

`ModernAttention` gets the cache it grows and `load_llama_weights` gets a ModernGPT built inside the sandbox
(`core.make`), and a random LlamaForCausalLM's state dict crosses as plain data. The reference answers earn every
point; one named mistake in each of the four loses exactly that exercise's two test cells, and the visible verdict
names the mistake. tests/test_modern_nbgrader.py runs the same notebook through real nbgrader.
"""

from __future__ import annotations

import pytest

from course_lib import manifest
from course_lib.grading.kit import core
from course_lib.grading.kit.sandbox import Limits
from course_lib.workflow import trusted
from tests.nbtools import grade_id, with_answer, with_hidden_tests
from tests.nbtools import solved as _solved

LESSON = "12_beyond_gpt2"
NEW = ("ModernAttention", "ModernBlock", "newton_schulz", "load_llama_weights")
HONEST = Limits(time=120.0)  # no machine, however loaded, needs more for one honest answer

# (exercise, text in the lesson's solution, what replaces it, words the visible verdict must contain)
WRONG = [
    (
        "ModernAttention",
        "        q = apply_rope(F.pad(q, (0, 0, P, 0)), self.rope_base)[:, :, P:]\n"
        "        k = apply_rope(F.pad(k, (0, 0, P, 0)), self.rope_base)[:, :, P:]\n",
        "        q, k = apply_rope(q, self.rope_base), apply_rope(k, self.rope_base)\n",
        "classic bug",
    ),
    (
        "ModernBlock",
        "        x = x + self.attn(self.ln1(x), cache=cache)\n        return x + self.mlp(self.ln2(x))\n",
        "        x = self.ln1(x + self.attn(x, cache=cache))\n        return self.ln2(x + self.mlp(x))\n",
        "post-norm",
    ),
    ("newton_schulz", "X = a * X + (b * A + c * A @ A) @ X", "X = 1.5 * X - 0.5 * A @ X", "cubic Newton-Schulz"),
    (
        "load_llama_weights",
        "        return w.reshape(n_heads, 2, rows // n_heads // 2, C).transpose(1, 2).reshape(rows, C)\n",
        "        return w\n",
        "copied as they are",
    ),
]


def solved(lesson: str):
    """Reference answers, with test cells as nbgrader's autograde sees them (hidden tests put back)."""
    return with_hidden_tests(_solved(lesson), lesson)


def answer(nb, exercise: str) -> str:
    return next(c.source for c in nb.cells if grade_id(c) == exercise)


def four_wrong(full):
    """The solved lesson with one named mistake in each of the four exercises."""
    nb = full
    for exercise, old, new, _ in WRONG:
        code = answer(full, exercise)
        assert code.count(old) == 1, (exercise, old)
        nb = with_answer(nb, exercise, code.replace(old, new))
    return nb


@pytest.fixture(autouse=True)
def _roomy_calls(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", HONEST.time)


@pytest.fixture(scope="module")
def grader():
    return trusted.TrustedGrader()


def test_the_reference_answers_earn_every_point_and_one_mistake_each_loses_exactly_its_exercise(grader):
    full = solved(LESSON)
    right = grader.grade(full, LESSON, only=NEW, limits=HONEST)
    assert set(right.verdicts) == {f"test_{n}{h}" for n in NEW for h in ("", "_hidden")}
    assert all(v.passed for v in right.verdicts.values()), {k: v.message for k, v in right.verdicts.items()}

    wrong = grader.grade(four_wrong(full), LESSON, limits=HONEST)
    assert len(wrong.verdicts) == 2 * len(manifest.lesson(LESSON).exercises) and not wrong.notes
    for name, _, _, words in WRONG:
        visible, hidden = wrong.verdicts[f"test_{name}"], wrong.verdicts[f"test_{name}_hidden"]
        assert not visible.passed and not hidden.passed, name
        assert words in visible.message, (name, visible.message)
    others = {k: v for k, v in wrong.verdicts.items() if not any(k.startswith(f"test_{n}") for n in NEW)}
    assert len(others) == 2 * (len(manifest.lesson(LESSON).exercises) - len(NEW))
    assert all(v.passed for v in others.values()), {k: v.message for k, v in others.items()}
