"""Fixtures shared by the tests (pytest finds them here without an import)."""

from __future__ import annotations

import pytest

from course_lib.grading.kit import guard


@pytest.fixture
def no_guard(monkeypatch):
    """Switch the from-scratch guard off, so the reference objects themselves can be graded."""
    monkeypatch.setattr(guard, "forbidden", lambda reference: guard.Forbidden())
