"""`Graded`: an exercise as a check names it — the course's reference object, and the manifest entry it belongs to.

A check starts with `name = Graded(ref.causal_mask)` and passes `name` to every piece of the kit it uses:
messages show it as the exercise's name ("causal_mask"), and the from-scratch guard reads what to forbid from its
manifest entry (docs/ARCHITECTURE.md, The from-scratch guard). The entry is found by the reference object itself:
the one exercise in `course_lib.manifest` whose reference path leads to that very object. So a check cannot name
an exercise without its reference, and a bare string in its place is refused (`TypeError`) instead of quietly
switching the guard off.
"""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass, field
from typing import Any

from course_lib import manifest

__all__ = ["Graded", "require_graded", "resolve"]


def resolve(dotted: str, *, load: bool = True) -> Any:
    """`course_lib.attention.causal_mask`: import `a.b` as far as the module goes, then walk attributes. None if it
    does not exist; with `load=False` only modules already imported are looked at (nothing is imported)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if load:
            try:
                obj = importlib.import_module(name)
            except ImportError:
                continue
        else:
            obj = sys.modules.get(name)
            if obj is None:
                continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


@functools.cache
def _entry_of(reference: Any) -> tuple[manifest.Exercise, str, str]:
    """(manifest entry, name, path) of the exercise whose reference is `reference` (by identity).

    Paths in modules already imported are tried first (a check holds its reference, so its module is loaded);
    only then are the modules of paths ending in the reference's own name imported, so a check of lesson 01 never
    imports the modules of lesson 11."""
    entries = [(e, n, p) for lesson in manifest.LESSONS for e in lesson.exercises for n, p in e.paths.items()]
    for entry, name, path in entries:
        if resolve(path, load=False) is reference:
            return entry, name, path
    own_name = getattr(reference, "__name__", None)
    for entry, name, path in entries:
        if path.rpartition(".")[2] == own_name and resolve(path) is reference:
            return entry, name, path
    label = f"{getattr(reference, '__module__', '?')}.{getattr(reference, '__qualname__', reference)!s}"
    raise ValueError(
        f"reference: {label} is the reference of no exercise in course_lib.manifest; add the exercise there "
        "(or point its `references` at this object)"
    )


@dataclass(frozen=True, eq=False)
class Graded:
    """One exercise as a check names it (see the module docstring): `Graded(ref.causal_mask)`."""

    reference: Any  # the course's reference object itself: required
    name: str = field(init=False)  # the name the answer defines, as messages show it
    path: str = field(init=False)  # where the manifest names the reference: "course_lib.attention.causal_mask"
    entry: manifest.Exercise = field(init=False, repr=False)  # its manifest entry (shortcuts, answer cell)

    def __post_init__(self) -> None:
        if isinstance(self.reference, str) or self.reference is None:
            raise TypeError(
                f"reference: expected the course's reference object itself (Graded(ref.causal_mask)), "
                f"got {self.reference!r}"
            )
        entry, name, path = _entry_of(self.reference)
        object.__setattr__(self, "entry", entry)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "path", path)

    def __str__(self) -> str:
        return self.name


def require_graded(exercise: Any, where: str) -> Graded:
    """`exercise` if it is a `Graded`; a `TypeError` otherwise (a bare name carries no reference to guard with)."""
    if not isinstance(exercise, Graded):
        raise TypeError(
            f"{where}: expected the exercise as Graded(ref.<name>), which carries the course's reference that the "
            f"from-scratch guard needs; got {type(exercise).__name__} {exercise!r}"
        )
    return exercise
