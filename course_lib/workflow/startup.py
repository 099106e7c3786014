"""Start-up time cut from the processes grading starts and from a lesson's kernel: nothing here changes what is
graded or shown.

Measured on the course machine (2 cores): importing `rfc3987_syntax` takes about 2.4 s, because it builds 38
parsers on import. Nothing the course does needs it: `jsonschema` (pulled in by nbformat and altair) imports it
only to check the "iri" string format, which no notebook schema and no chart of the course uses, and
`jsonschema` carries on without that one check when the import fails. Every nbgrader process the course starts
and every kernel that runs a submission would otherwise pay those seconds, and so would every lesson a learner
opens (its set-up cell imports altair), so all of them skip the import:

- `skip_slow_imports()` in a process we start (`course.run_nbgrader`, the class workers) and in a lesson's set-up
  cell (`lesson.start_lesson`, before it imports altair);
- `KERNEL_ARGUMENTS` for the kernels nbgrader starts (`Execute.extra_arguments` in `notebooks/nbgrader_config.py`).

And nbgrader, making a new gradebook, asks a second interpreter for its schema's version (`alembic heads`: about
2 s of CPU, a process for each new course, self-graded notebook and class room). `read_schema_version_here()` makes
it read the same version from the same migration scripts in its own process (0.3 s): in `nbgrader_main()` and the
class workers.
"""

from __future__ import annotations

import sys

from course_lib.workflow.slow_imports import SLOW_OPTIONAL_IMPORTS, skip_slow_imports

__all__ = [
    "KERNEL_ARGUMENTS",
    "PEAK_MEMORY",
    "SLOW_OPTIONAL_IMPORTS",
    "read_schema_version_here",
    "schema_version",
    "skip_slow_imports",
]

_SKIP = "; ".join(f"__import__('sys').modules.setdefault({name!r}, None)" for name in SLOW_OPTIONAL_IMPORTS)

# nbgrader's own default (no IPython history file) plus the skipped imports, run before the notebook's first
# cell without binding any name in the notebook's namespace.
KERNEL_ARGUMENTS = ["--HistoryManager.hist_file=:memory:", f"--IPKernelApp.exec_lines={_SKIP}"]


def schema_version() -> str:
    """The head revision of nbgrader's gradebook migrations, what nbgrader's `get_alembic_version` reads from the
    output of `alembic heads`: read here from the same scripts with alembic's own `ScriptDirectory`."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


def read_schema_version_here() -> None:
    """Make nbgrader read a new gradebook's schema version in this process (see module docstring), when it needs
    it. Should `schema_version` fail (a future nbgrader whose migrations have two heads), nbgrader's own way runs."""
    import nbgrader.api

    ask_alembic = nbgrader.api.get_alembic_version

    def version() -> str:
        try:
            return schema_version()
        except Exception:  # noqa: BLE001 -- any surprise here: nbgrader's own subprocess answers
            return ask_alembic()

    nbgrader.api.get_alembic_version = version


PEAK_MEMORY = "course: peak resident memory of this nbgrader process:"


def _say_peak_memory() -> None:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux (bytes on macOS)
    peak //= 1024 if sys.platform != "darwin" else 1024 * 1024
    print(f"{PEAK_MEMORY} {peak} MiB", file=sys.stderr, flush=True)


def nbgrader_main() -> None:
    """`nbgrader ...` (arguments from the command line) without the slow imports: what `run_nbgrader` starts.
    A first argument `--report-peak-memory` (the class command's workers) prints the process's peak RSS at exit."""
    skip_slow_imports()
    read_schema_version_here()
    if sys.argv[1:2] == ["--report-peak-memory"]:
        del sys.argv[1]
        import atexit

        atexit.register(_say_peak_memory)
    from nbgrader.apps.nbgraderapp import main

    main()


if __name__ == "__main__":
    nbgrader_main()
