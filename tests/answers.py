"""Write learner answers the way a notebook defines them, so the from-scratch guard sees notebook code."""

from __future__ import annotations

import textwrap


def define(code: str, name: str, **globals_):
    """Execute `code` as a notebook cell would (module `__main__`) and return the object called `name`."""
    namespace = {"__name__": "__main__", **globals_}
    exec(compile(textwrap.dedent(code), f"<answer {name}>", "exec"), namespace)
    return namespace[name]
