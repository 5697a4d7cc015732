"""Process memory and CPU from /proc, without psutil.

Memory comes from ``/proc/<pid>/status`` (VmRSS now, VmHWM the peak). CPU of the process tree
comes from ``/proc/<pid>/stat`` for live descendants plus ``RUSAGE_CHILDREN`` for reaped ones,
so environment subprocesses (user simulators, MCP tool servers) can be charged separately from
the trainer-side process.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc")


@dataclass(frozen=True)
class Memory:
    rss_mib: float
    peak_rss_mib: float


def read_memory(pid: int | str = "self") -> Memory:
    """VmRSS and VmHWM of a process, in MiB."""
    fields: dict[str, float] = {}
    for line in (_PROC / str(pid) / "status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(rest.split()[0]) / 1024  # the kernel reports kB
    return Memory(rss_mib=fields.get("VmRSS", 0.0), peak_rss_mib=fields.get("VmHWM", 0.0))


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:  # the process ended between listing and reading
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                parents[int(entry.name)] = int(fields[1])  # field 4: ppid
    return parents


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` in the process tree."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parent_map().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def counted_descendants(exclude: Collection[int]) -> set[int]:
    """This process's live descendants, less ``exclude`` and the processes below them."""
    excluded: set[int] = set(exclude)
    for pid in exclude:
        excluded |= descendants(pid)
    return descendants(os.getpid()) - excluded


def process_cpu_seconds(pid: int) -> float:
    """user+system CPU of a process and of the children it has reaped; 0 if it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # fields 14-17 of stat (utime, stime, cutime, cstime), here offset by the two removed ones.
    return sum(int(v) for v in fields[11:15]) / _CLOCK_TICKS


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _reaped_children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class TreeCpu:
    """CPU seconds spent between ``start`` and ``stop`` by this process and by its descendants.

    Descendants in ``exclude`` (and their own descendants) are left out of ``children``, e.g.
    an engine subprocess whose cost is reported on its own line.
    """

    exclude: Collection[int] = ()
    self_seconds: float = 0.0
    children_seconds: float = 0.0
    _self_start: float = 0.0
    _reaped_start: float = 0.0
    _live_start: dict[int, float] = field(default_factory=dict)

    def _live(self) -> dict[int, float]:
        return {pid: process_cpu_seconds(pid) for pid in counted_descendants(self.exclude)}

    def start(self) -> None:
        self._self_start = self_cpu_seconds()
        self._reaped_start = _reaped_children_cpu_seconds()
        self._live_start = self._live()

    def stop(self) -> None:
        self.self_seconds = self_cpu_seconds() - self._self_start
        live_end = self._live()
        reaped = _reaped_children_cpu_seconds() - self._reaped_start
        grown = sum(cpu - self._live_start.get(pid, 0.0) for pid, cpu in live_end.items())
        # A child alive at start and reaped since is in ``reaped`` whole; take off what it had then.
        gone = sum(cpu for pid, cpu in self._live_start.items() if pid not in live_end)
        self.children_seconds = max(0.0, reaped + grown - gone)


@contextmanager
def measure_tree_cpu(exclude: Collection[int] = ()) -> Iterator[TreeCpu]:
    meter = TreeCpu(exclude=exclude)
    meter.start()
    try:
        yield meter
    finally:
        meter.stop()
