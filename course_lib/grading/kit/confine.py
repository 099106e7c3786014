"""Limits for the processes that run a learner's code while a class is graded (docs/ARCHITECTURE.md,
Trusted grading).

Two kinds of process run a submission's code: the Jupyter kernel nbgrader starts for it, and the trusted grader's
sandboxes (`sandbox.py` beside this module, forked from the nbgrader process). Both get:

- a memory limit: RLIMIT_DATA, the private memory a process may allocate (Python objects, tensors, arrays). An
  allocation past it fails (`MemoryError`, torch's "can't allocate memory") in the cell that made it, instead of
  the machine running out of memory and its out-of-memory killer picking a process (perhaps the grader's);
- no core files; and, when grading runs as root, no CAP_SYS_RESOURCE (root could raise its own limits otherwise);
- where Linux's Landlock is available (an unprivileged kernel feature, Linux >= 5.13): writes only beneath the
  folders given (a sandbox gets none), no symbolic links, no links or moves from folders outside those; no outgoing
  TCP connections (every Jupyter connection file is readable, so a confined kernel could otherwise connect to an
  unconfined one and have it write); from Landlock ABI 6, no signals to processes outside (the grader's).
  Reading stays allowed everywhere.

What this does not bound: memory mapped as shared (an anonymous shared `mmap`) and memory spread over many
processes; a limit per process is not a control group. Disk space written beneath the allowed folders.

`python -m course_lib.grading.kit.confine [--memory SIZE] [--write DIR ...] -- COMMAND ...` applies the limits and
then runs COMMAND in its place (exec): the course's kernel manager (`course_lib.workflow.kernels`) starts grading
kernels so. It imports only the standard library, so a kernel starts without waiting for torch.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import resource
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

__all__ = ["ConfineError", "landlock_abi", "limit_memory", "main", "parse_size", "restrict_writes"]

DEFAULT_MEMORY = "4G"  # per grading process; honest lessons peak far below (docs/MEASUREMENTS.md)

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24
_CAP_SYS_RESOURCE = 24
_CAPABILITY_VERSION_3 = 0x20080522

# Landlock's file-system rights that change something (linux/landlock.h), and the ABI that brought the later ones.
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (1 << n for n in range(6, 13))
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_NET_CONNECT_TCP = 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE  # the rights a rule on a single file (not a folder) may grant
_DEVICE_FILES = ("/dev/null",)  # opened for writing by subprocess, logging, ...: writing there changes nothing


class ConfineError(OSError):
    """A limit that was asked for could not be applied."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise ConfineError(errno, f"{what}: {os.strerror(errno)}")
    return result


@cache
def landlock_abi() -> int:
    """The Landlock ABI version this system offers; 0 where there is none (not Linux, an old or unconfigured one)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (AttributeError, OSError):
        return 0
    return max(version, 0)


def parse_size(value: str | int) -> int:
    """Bytes from `4G`, `512M`, `1.5G` or a number of bytes; a clear ValueError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(value), re.IGNORECASE)
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"memory: expected a size such as 4G, 512M or a number of bytes, got {value!r}")
    scale = 1024 ** " KMGT".index(match.group(2).upper() or " ")
    return int(float(match.group(1)) * scale)


def _status(field: str) -> int:
    """A size from /proc/self/status (Linux), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise ConfineError(0, f"/proc/self/status has no {field}")


def _drop_sys_resource() -> None:
    """Without CAP_SYS_RESOURCE (only root has it) a process cannot raise its hard limits again."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return
    libc = _libc()
    libc.prctl(_PR_CAPBSET_DROP, _CAP_SYS_RESOURCE, 0, 0, 0)  # for the programs it execs
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & ~(1 << _CAP_SYS_RESOURCE))
    _check(libc.capset(ctypes.byref(header), data), "capset")


def limit_memory(limit: int, *, on_top: bool = False) -> str:
    """Cap this process (and what it starts) at `limit` bytes of private memory; returns what was set.

    `on_top=True` is for a forked process, which keeps its parent's memory: the limit is on what it adds.
    """
    data = limit + (_status("VmData") if on_top and sys.platform.startswith("linux") else 0)
    _drop_sys_resource()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        data = min(data, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    return f"memory limit {limit / 2**30:.3g} GiB" + (" on top of the grader's" if on_top else "")


def restrict_writes(writable: Sequence[str | Path] = ()) -> str:
    """Landlock this process and everything it starts: writes only beneath `writable` (see the module docstring).

    Raises ConfineError where Landlock is unavailable or refuses; returns what was applied.
    """
    abi = landlock_abi()
    if abi < 1:
        raise ConfineError(0, "Landlock is not available on this system")
    libc = _libc()
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK
    handled |= _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, _NET_CONNECT_TCP if abi >= 4 else 0)
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # older kernels know a shorter structure
    ruleset = _check(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "ruleset")
    try:
        # Beneath an allowed folder: everything but symbolic links and device nodes (a link made there could
        # lead a later write by the grader elsewhere). REFER lets files move between allowed folders only.
        in_folders = handled & ~(_MAKE_SYM | _MAKE_CHAR | _MAKE_BLOCK)
        rules = [(Path(p), in_folders) for p in writable] + [(Path(p), handled & _FILE_RIGHTS) for p in _DEVICE_FILES]
        for path, rights in rules:
            if not path.exists():
                continue
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(rights, fd)
                _check(libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0), f"{path}")
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    where = ", ".join(str(p) for p in writable) or "nowhere"
    return f"Landlock ABI {abi}: writes only beneath {where}" + (", no outgoing TCP" if abi >= 4 else "")


def main(argv: list[str] | None = None) -> None:
    """The kernel launcher: apply the limits asked for, then exec the command (it never returns)."""
    parser = argparse.ArgumentParser(prog="python -m course_lib.grading.kit.confine", description=__doc__)
    parser.add_argument("--memory", help="private memory per process, e.g. 4G")
    parser.add_argument("--write", action="append", default=[], help="a folder the command may write beneath")
    parser.add_argument("--contain-writes", action="store_true", help="refuse to run unless Landlock applies")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    try:
        if args.memory:
            limit_memory(parse_size(args.memory))
        if args.contain_writes:
            restrict_writes(args.write)
    except (ConfineError, ValueError) as exc:
        print(f"course_lib.grading.kit.confine: cannot apply the grading limits ({exc}); not starting {command[0]}",
              file=sys.stderr)  # fmt: skip
        sys.exit(70)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
