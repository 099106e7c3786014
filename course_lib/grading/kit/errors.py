"""What a check raises and returns: `GradingError` and `Passed`. Both take the exercise as a check names it (a
`Graded`, see `exercise.py`) or, where no check is involved, its plain name; messages show its name."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from course_lib.grading.kit.exercise import Graded

__all__ = ["GradingError", "Passed"]


class GradingError(AssertionError):
    """A failed check. The message says what was wrong and, where we can tell, why."""

    def __init__(self, exercise: Graded | str, message: str):
        self.exercise = str(exercise)
        self.message = message
        super().__init__(f"[{exercise}] {message}")

    # IPython calls this instead of printing a traceback: the learner sees only the message.
    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31mGradingError\x1b[0m: [{self.exercise}] {self.message}"]


class Passed:
    """What a check returns when everything passed; Jupyter shows it as one green line."""

    def __init__(self, exercise: Graded | str, checks: int, hidden: bool = False):
        self.exercise, self.checks, self.hidden = str(exercise), checks, hidden

    def __repr__(self) -> str:
        kind = "hidden" if self.hidden else "visible"
        return f"✓ {self.exercise}: all {self.checks} {kind} checks passed"
