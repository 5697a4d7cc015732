"""Where a benchmark ran: the machine and the versions of everything that shapes its figures."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from benchmarks.results import ParamValue

# The packages whose versions change what the figures mean.
TRACKED_PACKAGES: tuple[str, ...] = (
    "miles-verifiers",
    "verifiers",
    "renderers",
    "transformers",
    "tokenizers",
    "httpx",
    "uvicorn",
    "starlette",
    "mcp",
    "pydantic",
    "sglang",
    "torch",
)

REPO_ROOT = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _git(*args: str) -> str | None:
    """Output of a git command in the repository, or None when git cannot answer."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_commit() -> str:
    return _git("describe", "--always", "--dirty") or "unknown"


def git_state() -> dict[str, ParamValue]:
    """The commit measured (full hash) and whether tracked files differed from it.

    A dirty run measured code that no commit holds: its figures cannot be reproduced from the
    hash alone, so the flag travels with every result.
    """
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit or "unknown",
        "dirty": bool(status) if status is not None else True,
    }


def machine_info() -> dict[str, ParamValue]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": _cpu_model(),
        "cores": int(usable or 0),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "git": _git_commit(),
        **git_state(),
    }


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    return {name: _version(name) for name in names}
