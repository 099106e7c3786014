"""The class command's settings, in one object: what `python -m course_lib class` is asked to do."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from course_lib import manifest
from course_lib.grading.kit.confine import parse_size
from course_lib.workflow.course import CourseError, course_root
from course_lib.workflow.similarity import DEFAULT_THRESHOLD

__all__ = ["ClassSettings"]


@dataclass(frozen=True)
class ClassSettings:
    """What one run of the class command grades, from where, and how (checked when made: `CourseError`)."""

    lessons: tuple[str, ...]  # lesson ids, e.g. ("04_attention",)
    course: Path = field(default_factory=course_root)  # the nbgrader course root (notebooks/)
    inbox: Path | None = None  # a folder of submissions: <student>.ipynb, <student>/*.ipynb, <student>/<lesson>/...
    exchange: bool = False  # collect from nbgrader's exchange first
    workers: int = 2  # grading processes side by side (and feedback processes)
    cell_timeout: int | None = None  # seconds per cell where a kernel runs (None: nbgrader_config.py's)
    regrade: bool = False  # grade again every submission, graded or not, changed or not
    memory: str | None = None  # memory limit of each process running a submission, e.g. "4G" (None: the config's)
    contain_writes: bool = True  # False: kernels may write anywhere you can (only some folders are watched)
    deadline: datetime | None = None  # due date and time, time-zone aware; later submissions are marked late
    copy_threshold: float | None = DEFAULT_THRESHOLD  # flag answers at least this alike the course's code (None: off)
    hang_after: float = 600.0  # seconds one submission may hold its grading process before it is stopped

    def __post_init__(self) -> None:
        object.__setattr__(self, "lessons", tuple(self.lessons))
        object.__setattr__(self, "course", Path(self.course).resolve())
        if self.inbox is not None:
            object.__setattr__(self, "inbox", Path(self.inbox))
        if not self.lessons:
            raise CourseError("no lesson given: name one or more, e.g. 04_attention")
        for lesson in self.lessons:
            try:
                manifest.lesson(lesson)
            except KeyError:
                raise CourseError(f"{lesson!r} is not a lesson of this course") from None
        if self.workers < 1:
            raise CourseError(f"--workers: expected 1 or more, got {self.workers}")
        if self.cell_timeout is not None and self.cell_timeout < 1:
            raise CourseError(f"--timeout: expected a number of seconds, 1 or more, got {self.cell_timeout}")
        if self.memory is not None:
            try:
                parse_size(self.memory)
            except ValueError as exc:
                raise CourseError(f"--{exc}") from None
        if self.deadline is not None and self.deadline.tzinfo is None:
            raise CourseError("the deadline needs a time zone (parse it with submissions.parse_deadline)")
        if self.copy_threshold is not None and not 0 < self.copy_threshold <= 1:
            raise CourseError(f"--copy-threshold: expected a number in (0, 1], got {self.copy_threshold}")
        if self.hang_after <= 0:
            raise CourseError(f"hang_after: expected a number of seconds above 0, got {self.hang_after}")

    def nbgrader_options(self) -> list[str]:
        """The nbgrader options every grading worker gets from these settings (`kernels.GradingLimits`, the per-cell
        limit)."""
        options = []
        if self.memory is not None:
            options.append(f"--GradingLimits.memory={self.memory}")
        if not self.contain_writes:
            options.append("--GradingLimits.contain_writes=False")
        if self.cell_timeout:
            options.append(f"--Execute.timeout={self.cell_timeout}")
        return options
