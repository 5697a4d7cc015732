"""Run pytest as a user would, in a process of its own, for tests of the suite itself."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = Path(__file__).with_name("pytest_server.py")
# Bound on the server's answer to a request (its pid), its imports included on the first.
SERVER_START_S = 300.0
# Anyio is imported before a forked run starts (see pytest_server.py), so pytest warns that it
# cannot rewrite the asserts of anyio's plugin: a difference from a fresh interpreter that no
# test here depends on.
ANYIO_ALREADY_IMPORTED = (
    "ignore:Module already imported so cannot be rewritten; anyio:pytest.PytestAssertRewriteWarning"
)
# A site's conftest.py that loads the suite's plugin (its options and its report).
PLUGIN_CONFTEST = "from miles_verifiers_conformance.plugin import pytest_addoption, pytest_configure  # noqa: F401\n"


def plugin_site(folder: Path, conftest: str = PLUGIN_CONFTEST, **tests: str) -> None:
    """A pytest site in ``folder``: ``conftest`` (the suite's plugin) and each test file named
    by a keyword (``test_demo=...`` writes test_demo.py)."""
    (folder / "conftest.py").write_text(conftest)
    for name, text in tests.items():
        (folder / f"{name}.py").write_text(text)


@dataclass(frozen=True)
class PytestRun:
    returncode: int
    output: str
    report: Mapping[str, Any] | None

    def clause_outcomes(self) -> dict[str, str]:
        assert self.report is not None, (
            f"the run wrote no conformance report:\n{self.output[-4000:]}"
        )
        return {c["id"]: c["outcome"] for c in self.report["clauses"]}


def run_pytest(
    args: Sequence[str],
    *,
    cwd: Path,
    report_base: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600,
) -> PytestRun:
    """``python -m pytest ARGS`` in ``cwd`` with the report written to ``report_base`` (forked
    by this process's :class:`PytestServer`; see :func:`close_server`)."""
    arguments = [
        *args,
        "-p",
        "no:cacheprovider",
        "-q",
        "--color=no",
        f"--conformance-report={report_base}",
        "-W",
        ANYIO_ALREADY_IMPORTED,
    ]
    environment = {**os.environ, **(env or {})}
    # The run must import this checkout's `conformance` package whatever its cwd.
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), environment.get("PYTHONPATH", "")) if p
    )
    global _server
    if _server is None or not _server.running:
        _server = PytestServer(environment)
    returncode, output = _server.run(arguments, cwd, environment, timeout_s)
    report_file = report_base.with_suffix(".json")
    report = json.loads(report_file.read_text(encoding="utf-8")) if report_file.exists() else None
    return PytestRun(returncode, output, report)


# Started at the first run, ended by close_server() (the selftests' conftest does that when
# they are over, so that no process of theirs is left for a later test to find).
_server: PytestServer | None = None


def close_server() -> None:
    global _server
    if _server is not None:
        _server.close()
        _server = None


class PytestServer:
    """The process runs are forked from (``pytest_server.py``), started with ``environment``
    (what its imports read); each run still gets its own environment."""

    def __init__(self, environment: Mapping[str, str]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-P", str(SERVER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(environment),
        )
        self._pending = b""

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def run(
        self, args: Sequence[str], cwd: Path, environment: Mapping[str, str], timeout_s: float
    ) -> tuple[int, str]:
        """The run's exit status and its output (stdout and stderr, as written)."""
        assert self._process.stdin is not None
        with tempfile.NamedTemporaryFile(prefix="pytest-run-", suffix=".out") as output:
            request = {"args": list(args), "cwd": str(cwd), "env": dict(environment)}
            line = json.dumps(request | {"output": output.name}) + "\n"
            self._process.stdin.write(line.encode())
            self._process.stdin.flush()
            # The run's time starts at its fork: the first one waits for the server's imports.
            try:
                pid = self._reply(time.monotonic() + SERVER_START_S, "pid")
            except subprocess.TimeoutExpired:
                self.close()  # its replies would be out of step with the next request
                raise RuntimeError(
                    f"the pytest server ({SERVER_SCRIPT.name}) did not fork a run within "
                    f"{SERVER_START_S:.0f} s"
                ) from None
            try:
                returncode = self._reply(time.monotonic() + timeout_s, "returncode")
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                try:
                    self._reply(time.monotonic() + 30, "returncode")
                except subprocess.TimeoutExpired:
                    self.close()  # as above: out of step
                raise subprocess.TimeoutExpired(
                    ["pytest", *args], timeout_s, Path(output.name).read_text(errors="replace")
                ) from None
            return returncode, Path(output.name).read_text(encoding="utf-8", errors="replace")

    def _reply(self, deadline: float, key: str) -> int:
        """The next reply line's ``key``; its lines are read unbuffered, so that a second
        line that came with the first is not missed by ``select``."""
        stdout = self._process.stdout
        assert stdout is not None
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stdout], [], [], left)[0]:
                raise subprocess.TimeoutExpired([SERVER_SCRIPT.name], 0)
            chunk = os.read(stdout.fileno(), 4096)
            if not chunk:
                code = self._process.wait(timeout=30)
                raise RuntimeError(
                    f"the pytest server ({SERVER_SCRIPT.name}) exited with code {code}"
                )
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return int(json.loads(line)[key])

    def close(self) -> None:
        # It holds nothing but imported modules (no run is under way between tests).
        self._process.kill()
        self._process.wait(timeout=30)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
