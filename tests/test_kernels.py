"""How a submission's kernel runs while graded (course_lib/workflow/kernels.py): real kernels, started as nbgrader
starts them (the course's Execute preprocessor), outside nbgrader's bookkeeping.

The whole path, with a class of hostile submissions, is in tests/test_class_command.py.
"""

from __future__ import annotations

import asyncio
from queue import Empty

import nbformat
import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session
from traitlets.config import Config

from course_lib.grading.kit import confine
from course_lib.workflow.kernels import (
    CUT_MARKER,
    WAKEUP_LOG_ENV,
    CourseWatch,
    GradingLimits,
    OutputCap,
    WatchfulChannel,
    WatchfulKernelClient,
    WatchfulKernelManager,
)
from course_lib.workflow.nbgrader_plugins import KeepGradingWhenKernelDies
from course_lib.workflow.startup import KERNEL_ARGUMENTS


def _run(folder, cells: list[str], **settings):
    """Execute `cells` as nbgrader would (kernel working folder `folder`); the executed notebook."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    limits = {key: settings.pop(key) for key in ("memory", "contain_writes") if key in settings}
    execute = KeepGradingWhenKernelDies(
        config=Config({"GradingLimits": limits}), timeout=120, extra_arguments=list(KERNEL_ARGUMENTS), **settings
    )
    nb, _ = execute.preprocess(nb, {"metadata": {"path": str(folder)}})
    return nb


def _text(cell) -> str:
    return "".join(o.get("text", "") or o.get("evalue", "") for o in cell.outputs)


def test_the_kernel_runs_under_the_memory_limit_in_its_folder_with_a_private_temporary_one(tmp_path):
    nb = _run(
        tmp_path,
        [
            "import os, resource, tempfile\nprint(resource.getrlimit(resource.RLIMIT_DATA)[0], os.getcwd())",
            "print(tempfile.gettempdir())",
            "hoard = []\nwhile True:\n    hoard.append(b'x' * 2**26)",
            "del hoard\nimport torch\nprint(torch.ones(3).sum().item())",  # the kernel lives on after a bomb
        ],
        memory="768M",
    )
    assert _text(nb.cells[0]).split() == [str(768 * 2**20), str(tmp_path)]
    private = _text(nb.cells[1]).strip()
    assert "course-kernel-" in private and not (tmp_path / private).exists()  # removed with the kernel
    assert nb.cells[2].outputs[-1]["ename"] == "MemoryError"
    assert _text(nb.cells[3]).strip() == "3.0"


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="this Linux kernel offers no Landlock")
def test_the_kernel_writes_only_in_its_folder_and_its_temporary_one(tmp_path):
    work, elsewhere = tmp_path / "autograded", tmp_path / "gradebook.db"
    work.mkdir()
    elsewhere.write_text("grades")
    cells = [
        "open('answer.txt', 'w').write('mine')\nimport tempfile\ntempfile.NamedTemporaryFile().write(b'scratch')",
        f"open({str(elsewhere)!r}, 'w')",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",  # honest plotting still works
    ]
    nb = _run(work, cells)
    assert not [o for o in nb.cells[0].outputs if o["output_type"] == "error"]
    assert nb.cells[1].outputs[-1]["ename"] == "PermissionError"
    assert any("image/png" in o.get("data", {}) for o in nb.cells[2].outputs)
    assert elsewhere.read_text() == "grades" and (work / "answer.txt").read_text() == "mine"
    uncontained = _run(work, cells[1:2], contain_writes=False).cells[0]  # the same write, not contained
    assert [o["output_type"] for o in uncontained.outputs] == ["execute_result"]
    assert elsewhere.read_text() == ""


def test_a_cell_that_prints_too_much_is_cut_as_it_arrives(tmp_path):
    nb = _run(
        tmp_path,
        ["print('x' * 50_000)\nprint('y' * 50_000)", "print('fits')", "raise ValueError('z' * 50_000)"],
        max_stream_chars=20_000,
        max_output_chars=30_000,
    )
    kept = "".join(o.get("text", "") for o in nb.cells[0].outputs if o["output_type"] == "stream")
    assert kept == "x" * 20_000
    note = nb.cells[0].outputs[-1]["data"]["text/plain"]
    assert note.startswith(CUT_MARKER) and "100,002 characters" in note and "80,002 of them were dropped" in note
    assert _text(nb.cells[1]) == "fits\n"
    error = nb.cells[2].outputs[0]
    assert error["ename"] == "ValueError" and len(error["evalue"]) == 1000


def _stream(text: str) -> dict:
    return {"msg_type": "stream", "content": {"name": "stdout", "text": text}}


def test_output_cap_counts_per_cell_and_notes_once():
    cap, outs = OutputCap(max_stream=10, max_total=25), []
    assert cap.admit(_stream("12345"), 0, outs) == (_stream("12345"), None)
    kept, note = cap.admit(_stream("6789012"), 0, outs)
    assert kept["content"]["text"] == "67890" and note is not None
    outs.append(note)
    assert cap.admit(_stream("more"), 0, outs) == (None, None)  # the note is already there, and is updated
    assert "16 characters; 6 of them" in note["data"]["text/plain"]
    picture = {"msg_type": "display_data", "content": {"data": {"image/png": "p" * 20}, "metadata": {}}}
    assert cap.admit(picture, 0, outs)[0] is None  # 10 + 20 > 25
    assert cap.admit(picture, 1, [])[0] is picture  # another cell has its own budget
    assert cap.report() == ["cell 0: 36 characters of output, 26 dropped"]


def test_course_watch_names_what_changed(tmp_path):
    (tmp_path / "submitted" / "bob").mkdir(parents=True)
    (tmp_path / "submitted" / "bob" / "a.ipynb").write_text("bob's")
    (tmp_path / "release").mkdir()
    (tmp_path / "release" / "r.ipynb").write_text("released")
    watch = CourseWatch(tmp_path)
    assert watch.changes() == []
    (tmp_path / "submitted" / "bob" / "a.ipynb").write_text("overwritten")
    (tmp_path / "release" / "r.ipynb").unlink()
    (tmp_path / "submitted" / "ghost.ipynb").write_text("new")
    assert sorted(watch.changes()) == [
        "`release/r.ipynb` was deleted",
        "`submitted/bob/a.ipynb` was changed",
        "`submitted/ghost.ipynb` was added",
    ]


def test_limits_say_what_they_hold_to(monkeypatch):
    limits = GradingLimits(config=Config({"GradingLimits": {"memory": "2G"}}))
    assert limits.memory_bytes() == 2 * 2**30
    monkeypatch.setattr(confine, "landlock_abi", lambda: 7)
    assert limits.describe().endswith("(Landlock ABI 7)")
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)
    assert "writes NOT contained (Landlock is not available)" in limits.describe()
    assert GradingLimits(config=Config({"GradingLimits": {"memory": ""}})).memory_bytes() is None
    with pytest.raises(ValueError, match="memory: expected a size"):
        GradingLimits(config=Config({"GradingLimits": {"memory": "plenty"}})).memory_bytes()


POLLS: list[int] = []  # the time given to each poll of the sockets below, in ms, in order


class _WokenSocket(zmq.asyncio.Socket):
    """zmq's asyncio socket, noting the time it is given for each poll."""

    def poll(self, timeout=None, flags=zmq.POLLIN):
        POLLS.append(timeout)
        return super().poll(timeout, flags)


class _DeafSocket(zmq.asyncio.Socket):
    """A socket whose poll is never woken: it sleeps out its whole time, then looks once (as zmq's asyncio poll does
    when its file descriptor's signal is missed)."""

    def poll(self, timeout=None, flags=zmq.POLLIN):
        POLLS.append(timeout)

        async def late():
            await asyncio.sleep((timeout or 0) / 1000)
            return flags if self.get(zmq.EVENTS) & flags else 0

        return asyncio.ensure_future(late())


def _reads(channel_class, socket_class, timeouts: list[float]) -> list[tuple[str | None, list[int]]]:
    """One kernel message is waiting on an in-process pair; read the pair with `channel_class` once per timeout:
    (message type or None for Empty, the time given to each poll it made, in ms) each. Everything lives in one event
    loop, as in nbclient. What is compared is the polls asked for, never the time they took: a loaded machine
    makes every wait longer, never a poll's request different."""

    async def run():
        context = zmq.asyncio.Context()
        try:
            reader = context.socket(zmq.PAIR, socket_class=socket_class)
            reader.bind("inproc://watchful")
            end = context.socket(zmq.PAIR)
            end.connect("inproc://watchful")
            writer = zmq.Socket.shadow(end.underlying)  # a plain socket: Session.send sends at once
            session = Session(key=b"k")
            channel = channel_class(reader, session)
            session.send(writer, "execute_reply", {"status": "ok"})
            found = []
            for timeout in timeouts:
                POLLS.clear()
                try:
                    kind = (await channel.get_msg(timeout=timeout))["msg_type"]
                except Empty:
                    kind = None
                found.append((kind, list(POLLS)))
            return found
        finally:
            context.destroy(linger=0)

    return asyncio.run(run())


@pytest.mark.parametrize("socket_class", [_WokenSocket, _DeafSocket], ids=["woken", "deaf"])
def test_a_reply_already_there_is_read_within_a_slice_even_when_the_poll_is_not_woken(
    socket_class, tmp_path, monkeypatch
):
    log = tmp_path / "wakeups.log"
    monkeypatch.setenv(WAKEUP_LOG_ENV, str(log))
    if socket_class is _WokenSocket:
        # A woken poll returns at once; a reply counts as missed only when its poll ran its whole slice. A slice far
        # longer than any stall of a loaded machine keeps a woken reply from ever being counted here.
        monkeypatch.setattr(WatchfulChannel, "SLICE", 60.0)
    before = WatchfulChannel.missed_wakeups
    # the reply, then nothing more: Empty once the caller's time is out
    (kind, polls), (nothing, waited) = _reads(WatchfulChannel, socket_class, [30, 0.3])
    assert kind == "execute_reply"
    missed = WatchfulChannel.missed_wakeups - before
    if socket_class is _DeafSocket:
        assert polls == [1000] and missed == 1  # one slice of 1 s, not the 30 s the caller allowed
        assert "found only when a 1.0 s poll ran out" in log.read_text()
    else:
        assert len(polls) == 1 and missed == 0 and not log.exists()  # one poll, woken by the reply
    assert nothing is None and waited and max(waited) <= 300  # polled for the caller's 0.3 s, not for a slice


def test_jupyter_clients_own_channel_waits_its_whole_timeout_when_the_poll_is_not_woken():
    """What the watchful channel is for: the reply is there at once, yet jupyter_client's channel gives its one
    poll the caller's whole timeout, so a deaf poll hands the reply back only when that has run out."""
    ((kind, polls),) = _reads(AsyncZMQSocketChannel, _DeafSocket, [2.5])
    assert kind == "execute_reply" and polls == [2500]


def test_watchful_managers_and_nbgraders_confined_kernels_hand_out_watchful_clients():
    assert WatchfulKernelManager().client_factory is WatchfulKernelClient
    assert KeepGradingWhenKernelDies().kernel_manager_class().client_factory is WatchfulKernelClient
    client = WatchfulKernelClient()
    assert client.shell_channel_class is WatchfulChannel and client.iopub_channel_class is WatchfulChannel
