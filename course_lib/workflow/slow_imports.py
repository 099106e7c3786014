"""Optional imports of third-party packages that cost seconds and that neither grading nor a lesson uses, and the
switch that skips them (`course_lib.workflow.startup` says what they cost and where they are skipped). Nothing here
imports nbgrader: a lesson's set-up cell uses it too, where only the lessons' runtime dependencies are installed."""

from __future__ import annotations

import sys

__all__ = ["SLOW_OPTIONAL_IMPORTS", "skip_slow_imports"]

SLOW_OPTIONAL_IMPORTS = ("rfc3987_syntax",)


def skip_slow_imports() -> None:
    """Make `import rfc3987_syntax` fail fast (ImportError) in this process; its importers treat it as optional."""
    for name in SLOW_OPTIONAL_IMPORTS:
        sys.modules.setdefault(name, None)
