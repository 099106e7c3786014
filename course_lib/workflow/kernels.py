"""How a submission's kernel runs while it is graded (docs/ARCHITECTURE.md, Trusted grading): confined, its outputs
capped, its damage looked for. By default a lesson's submission runs in no kernel at all (`nbgrader_plugins`,
`KeepGradingWhenKernelDies.run_cells`): what follows is for `run_cells = "always"` and for notebooks that are not
lessons of the course.

- `GradingLimits`: the settings, in one place (`c.GradingLimits.memory` and `c.GradingLimits.contain_writes` in
  `notebooks/nbgrader_config.py`; `python -m course_lib class --memory SIZE`). The trusted grader's sandboxes get
  the same memory limit.
- `ConfinedKernelManager`: jupyter_client's kernel manager, starting the kernel through `confine.py`'s launcher:
  the memory limit, and with Landlock writes only beneath the kernel's working folder (the submission's own
  `autograded/<student>/<lesson>/`) and a private temporary folder (TMPDIR, IPython's folder, the connection
  file), removed when the kernel stops.
- `OutputCap`: what one cell may print reaches the grader's memory message by message; past a limit the rest is
  dropped as it arrives, and a note says how much the cell printed. nbgrader's own LimitOutput counts lines only,
  so a single line of 100 MB went into the graded notebook and the feedback whole.
- `WatchfulKernelManager`: jupyter_client's asyncio kernel manager, whose client does not sit on a reply that has
  already arrived. zmq's asyncio poll, when the socket's signal is missed, returns a waiting message only once its
  own time runs out, and jupyter_client polls once for the caller's whole timeout: in two of four test-suite runs
  on fresh clones a lesson's execution waited out nbclient's whole per-cell limit (3 minutes; 10 when it was 600 s)
  and then passed. Its channels poll in 1-second slices, so such a reply costs a second; each one found at the end
  of a slice is counted and logged (`WatchfulChannel`). nbgrader's kernels (`ConfinedKernelManager`) and the
  notebook tests' kernels use it.
- `CourseWatch`: where writes cannot be contained (no Landlock, or `contain_writes` off), the submitted, source
  and release folders are fingerprinted before the kernel runs and compared after: a change is reported, not
  prevented, and the gradebook and other students' graded notebooks and feedback are not checked.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from queue import Empty
from typing import Any

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from nbformat import from_dict
from traitlets import Bool, DottedObjectName, Type, Unicode
from traitlets.config import LoggingConfigurable

from course_lib.grading.kit import confine

__all__ = [
    "CUT_MARKER",
    "WAKEUP_LOG_ENV",
    "ConfinedKernelManager",
    "CourseWatch",
    "GradingLimits",
    "OutputCap",
    "WatchfulChannel",
    "WatchfulKernelClient",
    "WatchfulKernelManager",
]

CUT_MARKER = "[course grader: output cut]"
# Where each reply found only when a poll slice ran out is also written, one line each (the tests set it and
# count the lines at the end of a run).
WAKEUP_LOG_ENV = "COURSE_MISSED_WAKEUP_LOG"
_log = logging.getLogger(__name__)


class WatchfulChannel(AsyncZMQSocketChannel):
    """An asyncio kernel channel whose `get_msg` waits in slices of `SLICE` seconds up to its timeout.

    zmq's asyncio poll returns when the socket's file descriptor signals or when its time runs out, and in both
    cases it then looks at the socket once more. When the signal is missed, a message that is already there comes
    back only at the end of the poll's time: with one poll as long as the whole timeout (jupyter_client's
    `get_msg`), a finished cell looks like one still running until the timeout. A slice that ends with a message
    the signal did not announce is counted in `missed_wakeups` (a message that arrives in a slice's last
    instant is counted too: rare, and harmless).
    """

    SLICE = 1.0
    missed_wakeups = 0  # in this process, over all channels

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:  # type: ignore[override]
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = self.SLICE if deadline is None else min(self.SLICE, max(deadline - time.monotonic(), 0.0))
            started = time.monotonic()
            ready = await self.socket.poll(int(wait * 1000), zmq.POLLIN)
            if ready:
                if wait > 0 and time.monotonic() - started >= wait:
                    self._missed(wait)
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty

    def _missed(self, wait: float) -> None:
        WatchfulChannel.missed_wakeups += 1
        channel = {zmq.DEALER: "shell", zmq.SUB: "IOPub"}.get(self.socket.get(zmq.TYPE), "kernel")
        line = f"a {channel} message was found only when a {wait:.1f} s poll ran out"
        _log.info(line)
        path = os.environ.get(WAKEUP_LOG_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(f"{os.getpid()} {line}\n")


class WatchfulKernelClient(AsyncKernelClient):
    """jupyter_client's asyncio kernel client with `WatchfulChannel` for the shell and IOPub channels."""

    shell_channel_class = Type(WatchfulChannel)  # type: ignore[assignment]
    iopub_channel_class = Type(WatchfulChannel)  # type: ignore[assignment]


class WatchfulKernelManager(AsyncKernelManager):
    """jupyter_client's asyncio kernel manager, handing out `WatchfulKernelClient`s (for nbclient)."""

    client_class = DottedObjectName("course_lib.workflow.kernels.WatchfulKernelClient", config=True)
    client_factory = Type(WatchfulKernelClient, klass=AsyncKernelClient, config=True)


class GradingLimits(LoggingConfigurable):
    """Limits on the processes that run a submission's code (kernel and sandboxes)."""

    memory = Unicode(
        confine.DEFAULT_MEMORY, help="Private memory per process running a submission (4G, 512M, ...); '' for none."
    ).tag(config=True)
    contain_writes = Bool(
        True, help="With Landlock, let a submission's kernel write only in its own folder and a temporary one."
    ).tag(config=True)

    def memory_bytes(self) -> int | None:
        return confine.parse_size(self.memory) if self.memory else None

    def contained(self) -> bool:
        """Whether kernels started now will have their writes contained (asked for, and Landlock is here)."""
        return self.contain_writes and confine.landlock_abi() >= 1

    def describe(self) -> str:
        """One line for the log and the class report: what a submission's kernel is held to."""
        memory = f"memory limit {self.memory} per process" if self.memory else "no memory limit"
        if self.contained():
            return (
                f"{memory}; writes only in its own autograded folder and a temporary one "
                f"(Landlock ABI {confine.landlock_abi()})"
            )
        why = "turned off (GradingLimits.contain_writes)" if not self.contain_writes else "Landlock is not available"
        return (
            f"{memory}; writes NOT contained ({why}): submitted/, source/ and release/ are checked after each "
            "submission, the gradebook and other students' graded notebooks and feedback are not"
        )

    def describe_without_kernel(self) -> str:
        """The line for the log and the class report when no cell runs in a kernel (`KeepGradingWhenKernelDies`):
        only the answer cells run, each in a sandbox of the trusted grader, held to the same memory limit."""
        memory = f"memory limit {self.memory} per process" if self.memory else "no memory limit"
        abi = confine.landlock_abi()
        writes = f"no writes (Landlock ABI {abi})" if abi else "writes not contained (Landlock is not available)"
        return (
            "none: no cell runs in a kernel; the trusted grader runs each answer cell alone in a sandbox "
            f"({memory}; {writes}), and the other cells not at all"
        )


class ConfinedKernelManager(WatchfulKernelManager):
    """A kernel manager whose kernels run under `GradingLimits` (see the module docstring), with watchful clients."""

    _private: Path | None = None

    async def _async_pre_start_kernel(self, **kw: Any):
        limits = GradingLimits(parent=self)
        self._private = Path(tempfile.mkdtemp(prefix="course-kernel-"))
        self.connection_file = str(self._private / "kernel.json")
        command, kw = await super()._async_pre_start_kernel(**kw)
        env = dict(kw.get("env") or os.environ)
        env.update(TMPDIR=str(self._private), IPYTHONDIR=str(self._private / "ipython"))
        kw["env"] = env
        launcher = [sys.executable, "-m", "course_lib.grading.kit.confine"]
        if limits.memory:
            launcher += ["--memory", str(limits.memory_bytes())]
        if limits.contained():
            folder = Path(kw.get("cwd") or os.getcwd()).resolve()
            launcher += ["--contain-writes", "--write", str(folder), "--write", str(self._private)]
        self.log.debug("Starting the kernel with %s", " ".join(launcher))
        return [*launcher, "--", *command], kw

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None


def _size(content: dict[str, Any]) -> int:
    """Characters in a message's content that would go into the notebook."""
    return sum(len(v) if isinstance(v, str) else len(str(v)) for v in _texts(content))


def _texts(content: dict[str, Any]):
    if "text" in content:
        yield content["text"]
    yield from (content.get("data") or {}).values()
    if "evalue" in content:
        yield content["evalue"]
        yield from content.get("traceback") or []


class OutputCap:
    """Per cell: at most `max_stream` characters of printed text and `max_total` of all outputs are kept."""

    def __init__(self, max_stream: int, max_total: int):
        self.max_stream, self.max_total = max_stream, max_total
        self.cells: dict[int, dict[str, Any]] = {}  # cell index -> kept/seen counts and the note, once cut

    def admit(self, msg: dict[str, Any], cell_index: int, outs: list) -> tuple[dict[str, Any] | None, Any]:
        """(the message as it may go into the notebook, its text shortened, or None to drop it; a note output to
        append after it, when this message is the first one cut from the outputs `outs` of the cell)."""
        kind = msg.get("msg_type")
        if kind not in ("stream", "display_data", "execute_result", "error"):
            return msg, None
        seen = self.cells.setdefault(cell_index, {"stream": 0, "total": 0, "printed": 0, "dropped": 0, "note": None})
        content = msg["content"]
        size = _size(content)
        seen["printed"] += size
        stream_room = self.max_stream - seen["stream"] if kind == "stream" else size
        room = max(min(stream_room, self.max_total - seen["total"]), 0)
        if size <= room:
            seen["total"] += size
            seen["stream"] += size if kind == "stream" else 0
            if seen["note"] is not None:
                self._write_note(seen)
            return msg, None
        seen["dropped"] += size - (room if kind == "stream" else 0)
        note = None
        if seen["note"] is None or not any(o is seen["note"] for o in outs):  # first cut, or outputs cleared since
            note = seen["note"] = from_dict({"output_type": "display_data", "metadata": {}, "data": {}})
        self._write_note(seen)
        if kind == "error":  # the error stays (nbgrader scores by it), its message shortened
            return dict(msg, content=dict(content, evalue=content.get("evalue", "")[:1000], traceback=[])), note
        if kind != "stream" or room == 0:
            return None, note
        seen["total"] += room
        seen["stream"] += room
        return dict(msg, content=dict(content, text=content["text"][:room])), note

    @staticmethod
    def _write_note(seen: dict[str, Any]) -> None:
        seen["note"]["data"] = {
            "text/plain": (
                f"{CUT_MARKER} this cell's outputs came to {seen['printed']:,} characters; "
                f"{seen['dropped']:,} of them were dropped as they arrived."
            )
        }

    def report(self) -> list[str]:
        """One line per cell that was cut, for the log."""
        return [
            f"cell {index}: {seen['printed']:,} characters of output, {seen['dropped']:,} dropped"
            for index, seen in sorted(self.cells.items())
            if seen["dropped"]
        ]


class CourseWatch:
    """Fingerprints of the files a kernel must never change, where Landlock cannot keep it from them."""

    FOLDERS = ("submitted", "source", "release")

    def __init__(self, root: Path):
        self.root = root
        self.before = self._fingerprints()

    def _fingerprints(self) -> dict[Path, str]:
        found = {}
        for folder in self.FOLDERS:
            for path in sorted((self.root / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
                    with path.open("rb") as f:
                        found[path] = hashlib.file_digest(f, "sha256").hexdigest()
        return found

    def changes(self) -> list[str]:
        """What changed since the watch began (one phrase each), empty when nothing did."""
        after = self._fingerprints()
        shown = {p: f"`{p.relative_to(self.root)}`" for p in self.before.keys() | after.keys()}
        changed = [f"{shown[p]} was changed" for p in self.before if p in after and after[p] != self.before[p]]
        changed += [f"{shown[p]} was deleted" for p in self.before if p not in after]
        changed += [f"{shown[p]} was added" for p in after if p not in self.before]
        return changed
