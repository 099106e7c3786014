"""A learner's notebook keeps running past an exercise that is not done yet (docs/ARCHITECTURE.md,
Trusted grading).

A visible check raises `GradingError` when an answer is missing or wrong. In a kernel, a raised error ends
"Run All Cells": JupyterLab (and nbclient) stop at the first cell whose execute reply says "error", so the rest
of a lesson, which goes on with the course's reference, stays out of reach until every exercise is solved.

`show_check_failures()` (called by `course_lib.lesson.start_lesson` in a learner's kernel, never while nbgrader
executes a notebook) changes that for test cells only. It registers an IPython AST transformer that rewrites a
cell's top-level statement `check_X(...)` into `_course_check(check_X, ...)`. When `check_X` is one of the
course's checks and it raises `GradingError`, `_course_check` sends the message to the notebook as an *error
output* (red, like a raised error; nbgrader scores a test cell with an error output 0) but lets the cell
finish, so the execute reply is "ok" and the next cell runs.

Nothing here decides a grade. Under nbgrader (NBGRADER_EXECUTION set) the transformer is not installed and the
checks raise as always; and the verdicts nbgrader records come from `course_lib.workflow.trusted`, which runs
the checks outside the learner's kernel and replaces every test cell's outputs.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from course_lib.grading.kit.errors import GradingError

__all__ = ["HOOK", "NOTE", "show_check_failures"]

HOOK = "_course_check"
NOTE = (
    "Run All goes on past this cell: the lesson continues with the course's reference. "
    "Fix your answer and run this cell again; when your notebook is graded, a failing check scores 0."
)


def _is_check_call(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Name)
        and statement.value.func.id.startswith("check_")
    )


class _RouteChecks(ast.NodeTransformer):
    """`check_X(args...)` as a cell's top-level statement becomes `_course_check(check_X, args...)`."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        for i, statement in enumerate(node.body):
            if _is_check_call(statement):
                call = statement.value  # type: ignore[attr-defined]
                routed = ast.Call(ast.Name(HOOK, ast.Load()), [call.func, *call.args], call.keywords)
                node.body[i] = ast.fix_missing_locations(ast.copy_location(ast.Expr(routed), statement))
        return node


def _from_the_course(check: Any) -> bool:
    return callable(check) and str(getattr(check, "__module__", "")).startswith("course_lib.grading.")


def _send_error_output(exc: GradingError, shell: Any) -> None:
    """An error output in the cell, without failing the cell (IPython's own traceback path would)."""
    lines = [*exc._render_traceback_(), f"\x1b[2m{NOTE}\x1b[0m"]
    content = {"ename": "GradingError", "evalue": str(exc), "traceback": lines}
    hook = shell.displayhook
    sys.stdout.flush()
    sys.stderr.flush()
    topic = hook.topic.replace(b"execute_result", b"error") if hook.topic else None
    hook.session.send(hook.pub_socket, "error", content, parent=hook.parent_header, ident=topic)


def _route(check: Any, *args: Any, **kwargs: Any) -> Any:
    if not _from_the_course(check):
        return check(*args, **kwargs)
    try:
        return check(*args, **kwargs)
    except GradingError as exc:
        _send_error_output(exc, _kernel_shell())
        return None


def _kernel_shell() -> Any:
    """The IPython shell of a Jupyter kernel, or None (plain Python, a terminal IPython, a test process)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if getattr(shell, "kernel", None) is not None else None


def show_check_failures() -> bool:
    """In a Jupyter kernel, let a failing visible check show its message and the notebook run on (see the module
    docstring). Returns whether it is on; outside a kernel it does nothing."""
    shell = _kernel_shell()
    if shell is None:
        return False
    shell.user_ns[HOOK] = _route
    if not any(isinstance(t, _RouteChecks) for t in shell.ast_transformers):
        shell.ast_transformers.append(_RouteChecks())
    return True
