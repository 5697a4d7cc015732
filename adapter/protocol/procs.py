"""An episode worker's processes: its ``PATH``, and what it started, found through /proc.

A local worker leaves three traces that outlast it: its process group, its descendants (it is
their child subreaper) and a token in the environment of everything that inherited it (found
wherever it was reparented). Where /proc cannot be read, nothing is found and nothing signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Bound on a worker ending every open call once its input has closed (each step is bounded).
EXIT_GRACE_S = 30.0
# Then what the worker started and did not end gets this long after SIGTERM before SIGKILL.
DESCENDANT_GRACE_S = 2.0
# All a worker does once SIGTERM came or its input closed, bounded: past it a watchdog ends it.
STOP_BOUND_S = EXIT_GRACE_S + DESCENDANT_GRACE_S + 1.0

# Set in each local worker's environment; inherited by what it starts (see module docstring).
TOKEN_VARIABLE = "MILES_VERIFIERS_EPISODE_WORKER_TOKEN"
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")


def path_with_bin_first(python: str, path: str | None) -> str:
    """``path`` (default: the system's) with the directory of ``python`` first, as given:
    a virtualenv's ``python`` is a symlink out of it, and its harnesses need its ``uv``."""
    first = os.path.dirname(os.path.abspath(python))
    entries = (os.defpath if path is None else path).split(os.pathsep)
    rest = [entry for entry in entries if entry and entry != first]
    return os.pathsep.join([first, *rest])


@dataclass(frozen=True)
class ProcessRef:
    """A process as it was seen: its start time tells a reused pid from it."""

    pid: int
    start: int


@dataclass(frozen=True)
class ProcessStat:
    state: str
    ppid: int
    start: int


def stat_of(pid: int) -> ProcessStat | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # After the parenthesised command name: state, ppid, ... starttime (the 20th).
    fields = raw.rsplit(b")", 1)[-1].split()
    try:
        return ProcessStat(fields[0].decode(), int(fields[1]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def alive(ref: ProcessRef) -> bool:
    """The process still runs (not a zombie) and is the one that was seen."""
    stat = stat_of(ref.pid)
    return stat is not None and stat.state != "Z" and stat.start == ref.start


def descendants(root: int) -> list[ProcessRef]:
    """Every live process below ``root``."""
    children: dict[int, list[ProcessRef]] = {}
    for pid in _pids():
        stat = stat_of(pid)
        if stat is not None and stat.state != "Z":
            children.setdefault(stat.ppid, []).append(ProcessRef(pid, stat.start))
    found: list[ProcessRef] = []
    frontier = [root]
    while frontier:  # bounded: each pid has one parent, so each is visited once
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child.pid)
    return found


def ref_of(pid: int) -> ProcessRef | None:
    """The process running as ``pid`` now (None: gone, or /proc unreadable)."""
    stat = stat_of(pid)
    return ProcessRef(pid, stat.start) if stat is not None else None


def carrying_token(token: str) -> list[ProcessRef]:
    """Every live process (of ours; others' environments are unreadable) whose environment
    has :data:`TOKEN_VARIABLE` set to ``token`` (a zombie's cannot be read)."""
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    found: list[ProcessRef] = []
    for pid in _pids():
        try:
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and (ref := ref_of(pid)) is not None:
            found.append(ref)
    return found


def send(refs: Iterable[ProcessRef], signum: int) -> None:
    for ref in refs:
        if alive(ref):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(ref.pid, signum)


def end(refs: Iterable[ProcessRef], grace_s: float) -> None:
    """SIGTERM, up to ``grace_s`` for them to exit, then SIGKILL what is left (blocking)."""
    refs = [r for r in refs if r.pid != os.getpid()]
    send(refs, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(r) for r in refs):
        time.sleep(0.02)
    send(refs, signal.SIGKILL)


def become_child_subreaper() -> bool:
    """Make orphaned descendants of this process reparent to it rather than to init."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
