"""The processes a test left behind, read from /proc (Linux), for no-orphan checks.

Walking the test process's descendants alone is blind to an orphan: a process whose parent
died is reparented to init (or whichever subreaper is above it) and leaves the walk, though
it still runs. :func:`watch_for_orphans` closes that gap twice over: the test process becomes
a child subreaper, so orphans below it reparent to it and stay in the walk, and it puts a
marker in its environment, which everything it starts inherits (unless started with an
environment of its own), so :func:`leftovers` also finds marked processes wherever they were
reparented.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    state: str
    cmdline: str


def _stat(pid: int) -> tuple[int, str] | None:
    """The parent pid and state of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(fields[1]), fields[0].decode()


def _cmdline(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            return raw.read().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def _read(pid: int) -> ProcessInfo | None:
    stat, cmdline = _stat(pid), _cmdline(pid)
    if stat is None or cmdline is None:
        return None
    return ProcessInfo(pid, stat[0], stat[1], cmdline)


def descendants(root: int | None = None) -> list[ProcessInfo]:
    """Every live (not zombie) process whose parent chain reaches ``root`` (default: us)."""
    root = os.getpid() if root is None else root
    # Parents from every process's stat; command lines only for those found (the tests poll
    # this, and reading every command line was most of its cost).
    children: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            children.setdefault(stat[0], []).append((int(name), stat[1]))
    found: list[ProcessInfo] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, state in children.get(parent, []):
            frontier.append(pid)
            cmdline = _cmdline(pid)
            if state != "Z" and cmdline is not None:
                found.append(ProcessInfo(pid, parent, state, cmdline))
    return found


# Local episode workers are forked by a template process, so they share its command line.
TEMPLATE_MODULE = "miles_verifiers.episodes.template"


def episode_workers(root: int | None = None, below: list[ProcessInfo] | None = None) -> list[int]:
    """The pids of the local episode workers below ``root`` (or in ``below``, its descendants
    as already read): the template's children that still run its code (what a worker starts
    runs a program of its own)."""
    below = descendants(root) if below is None else below
    templates = {p.pid for p in below if TEMPLATE_MODULE in p.cmdline}
    return [p.pid for p in below if p.ppid in templates and TEMPLATE_MODULE in p.cmdline]


MARKER_VARIABLE = "MILES_VERIFIERS_TEST_ORPHAN_MARKER"
_PR_SET_CHILD_SUBREAPER = 36


def watch_for_orphans() -> None:
    """Make this process a child subreaper and mark its environment (idempotent)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    os.environ.setdefault(MARKER_VARIABLE, uuid.uuid4().hex)


def marked() -> list[ProcessInfo]:
    """Every live process but this one whose environment carries this process's marker."""
    marker = os.environ.get(MARKER_VARIABLE)
    if marker is None:
        return []
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        info = _read(int(name))
        if needle in environ.split(b"\0") and info is not None and info.state != "Z":
            found.append(info)
    return found


def leftovers() -> list[ProcessInfo]:
    """Everything still running that this process started, orphans included (once
    :func:`watch_for_orphans` ran)."""
    found = {p.pid: p for p in descendants()}
    found.update((p.pid, p) for p in marked())
    return sorted(found.values(), key=lambda p: p.pid)


def still_running(seen: list[ProcessInfo]) -> list[ProcessInfo]:
    """Those of ``seen`` that still run (same pid and command line, not a zombie), wherever
    they were reparented."""
    found = []
    for before in seen:
        now = _read(before.pid)
        if now is not None and now.state != "Z" and now.cmdline == before.cmdline:
            found.append(before)
    return found


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)  # the conditions polled here read /proc, milliseconds each
    return condition()
