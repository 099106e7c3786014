"""What a check raises, returns and is told: `GradingError`, `Passed`, and `Graded`, an exercise's name that
carries the course's reference object with it (so the guard is handed the thing, never a name to look up)."""

from __future__ import annotations

from typing import Any

__all__ = ["Graded", "GradingError", "Passed"]


class Graded(str):
    """The name of an exercise as messages show it, carrying the course's reference of that exercise.

    `Graded(ref.causal_mask)` is the string "causal_mask" with `.reference` set: a check passes it wherever an
    exercise's name goes, and `call_answer` hands `.reference` to the from-scratch guard.
    """

    reference: Any

    def __new__(cls, reference: Any, name: str | None = None) -> Graded:
        text = super().__new__(cls, name or reference.__name__)
        text.reference = reference
        return text


class GradingError(AssertionError):
    """A failed check. The message says what was wrong and, where we can tell, why."""

    def __init__(self, exercise: str, message: str):
        self.exercise = str(exercise)
        self.message = message
        super().__init__(f"[{exercise}] {message}")

    # IPython calls this instead of printing a traceback: the learner sees only the message.
    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31mGradingError\x1b[0m: [{self.exercise}] {self.message}"]


class Passed:
    """What a check returns when everything passed; Jupyter shows it as one green line."""

    def __init__(self, exercise: str, checks: int, hidden: bool = False):
        self.exercise, self.checks, self.hidden = str(exercise), checks, hidden

    def __repr__(self) -> str:
        kind = "hidden" if self.hidden else "visible"
        return f"✓ {self.exercise}: all {self.checks} {kind} checks passed"
