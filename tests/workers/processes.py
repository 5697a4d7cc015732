"""The processes below this one, read from /proc (Linux), for no-orphan checks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    state: str
    cmdline: str


def _read(pid: int) -> ProcessInfo | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(b")", 1)[1].split()
    return ProcessInfo(pid, int(fields[1]), fields[0].decode(), cmdline)


def descendants(root: int | None = None) -> list[ProcessInfo]:
    """Every live (not zombie) process whose parent chain reaches ``root`` (default: us)."""
    root = os.getpid() if root is None else root
    table = [p for p in (_read(int(d)) for d in os.listdir("/proc") if d.isdigit()) if p]
    children: dict[int, list[ProcessInfo]] = {}
    for info in table:
        children.setdefault(info.ppid, []).append(info)
    found: list[ProcessInfo] = []
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child.pid)
    return [p for p in found if p.state != "Z"]


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
        time.sleep(0.05)
    return condition()
