"""The limits on processes that run a learner's code (course_lib/grading/kit/confine.py), through the real launcher.

Each test starts `python -m course_lib.grading.kit.confine ... -- python -c CODE` and reads what CODE could do. The
Landlock tests skip, saying why, where the kernel has no Landlock; each also shows the same action succeeding
without the launcher, so it could fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from course_lib.grading.kit import confine

LANDLOCK = pytest.mark.skipif(confine.landlock_abi() < 1, reason="this Linux kernel offers no Landlock")


def _run(code: str, *limits: str, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "course_lib.grading.kit.confine", *limits, "--", sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def _plain(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_sizes_are_read_or_refused_clearly():
    assert confine.parse_size("4G") == 4 * 2**30
    assert confine.parse_size("512m") == 512 * 2**20
    assert confine.parse_size("1.5GiB") == 3 * 2**29
    assert confine.parse_size(1000) == 1000
    for bad in ("lots", "-1G", "0", "4X", True):
        with pytest.raises(ValueError, match="memory: expected a size such as 4G"):
            confine.parse_size(bad)


def test_a_memory_bomb_fails_in_its_own_process_and_cannot_lift_the_limit():
    code = (
        "import resource\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_DATA, (-1, -1))\n    print('lifted')\n"
        "except (ValueError, OSError):\n    print('kept')\n"
        "hoard = []\n"
        "try:\n    while True:\n        hoard.append(b'x' * 2**26)\n"
        "except MemoryError:\n    print('MemoryError after', len(hoard) * 64, 'MiB')\n"
    )
    out = _run(code, "--memory", "512M").stdout.split("\n")
    assert out[0] == "kept"
    assert out[1].startswith("MemoryError after") and int(out[1].split()[2]) <= 512
    assert (
        "lifted"
        in _plain("import resource; resource.setrlimit(resource.RLIMIT_DATA, (2**40, 2**40));print('lifted')").stdout
    )


def test_torch_imports_and_computes_under_the_default_limit():
    code = "import torch\nx = torch.randn(256, 256)\nprint(float((x @ x.T).trace()) > 0)"
    result = _run(code, "--memory", confine.DEFAULT_MEMORY)
    assert result.stdout.strip() == "True", result.stderr


@LANDLOCK
def test_writes_only_beneath_the_allowed_folders(tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir(), outside.mkdir()
    (outside / "gradebook.db").write_text("grades")
    code = (
        "import os\n"
        "def attempt(what, action):\n"
        "    try:\n        action()\n        print(what, 'allowed', sep='|')\n"
        "    except OSError:\n        print(what, 'refused', sep='|')\n"
        f"inside, outside = {str(inside)!r}, {str(outside)!r}\n"
        "attempt('write inside', lambda: open(inside + '/answer.txt', 'w').write('ok'))\n"
        "attempt('write outside', lambda: open(outside + '/gradebook.db', 'w').write(''))\n"
        "attempt('create outside', lambda: open(outside + '/new.txt', 'w'))\n"
        "attempt('delete outside', lambda: os.unlink(outside + '/gradebook.db'))\n"
        "attempt('symlink inside', lambda: os.symlink(outside + '/gradebook.db', inside + '/link'))\n"
        "attempt('hard link inside', lambda: os.link(outside + '/gradebook.db', inside + '/hard'))\n"
        "attempt('devnull', lambda: open(os.devnull, 'w').write('x'))\n"
        "def shell():\n"
        "    if os.system(f'echo x > {outside}/shell.txt'):\n"
        "        raise PermissionError('the shell could not write')\n"
        "attempt('child process', shell)\n"
    )
    result = _run(code, "--contain-writes", "--write", str(inside))
    said = dict(line.split("|") for line in result.stdout.splitlines())
    assert said == {
        "write inside": "allowed",
        "write outside": "refused",
        "create outside": "refused",
        "delete outside": "refused",
        "symlink inside": "refused",
        "hard link inside": "refused",
        "devnull": "allowed",
        "child process": "refused",
    }, result.stdout + result.stderr
    assert (outside / "gradebook.db").read_text() == "grades" and sorted(os.listdir(outside)) == ["gradebook.db"]
    assert (inside / "answer.txt").read_text() == "ok"
    assert "allowed" in _plain(f"open({str(outside / 'gradebook.db')!r}, 'a'); print('allowed')").stdout


@pytest.mark.skipif(confine.landlock_abi() < 4, reason="Landlock before ABI 4 cannot refuse TCP connections")
def test_no_outgoing_tcp_connection():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "    print('connected')\nexcept OSError:\n    print('refused')"
        )
        assert _plain(code).stdout.strip() == "connected"
        assert _run(code, "--contain-writes").stdout.strip() == "refused"


@pytest.mark.skipif(confine.landlock_abi() < 6, reason="Landlock before ABI 6 cannot scope signals")
def test_no_signal_to_processes_outside():
    code = f"import os\ntry:\n    os.kill({os.getpid()}, 0)\n    print('reached')\nexcept PermissionError:\n"
    code += "    print('refused')"
    assert _plain(code).stdout.strip() == "reached"
    assert _run(code, "--contain-writes").stdout.strip() == "refused"


def test_containment_asked_for_but_unavailable_starts_nothing(monkeypatch, capsys):
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)
    with pytest.raises(confine.ConfineError, match="Landlock is not available"):
        confine.restrict_writes([])
    with pytest.raises(SystemExit) as stopped:
        confine.main(["--contain-writes", "--", "true"])
    assert stopped.value.code == 70
    assert "cannot apply the grading limits" in capsys.readouterr().err


def test_a_forked_process_gets_the_limit_on_top_of_what_it_has():
    code = (
        "import os\nfrom course_lib.grading.kit import confine\n"
        "ballast = b'b' * 2**28  # the parent's memory, kept by the child\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    confine.limit_memory(2**28, on_top=True)\n"
        "    small = b's' * 2**27  # fits on top\n"
        "    try:\n        big = b'x' * 2**29\n        os._exit(1)\n"
        "    except MemoryError:\n        os._exit(0)\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    assert _plain(code).stdout.strip() == "0"


def test_the_launcher_does_not_import_torch():
    """Every grading kernel starts through the launcher: importing it must cost no more than the standard library
    (torch alone takes seconds), although it lives in the grading kit."""
    code = "import sys\nimport course_lib.grading.kit.confine\n"
    code += "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    assert _plain(code).stdout.strip() == "[]"
    assert _plain(code.replace("kit.confine", "kit.core")).stdout.strip() == "['numpy', 'torch']"
