"""Run pytest in a subprocess, the way a user would, for tests of the suite itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    """``python -m pytest ARGS`` in ``cwd`` with the report written to ``report_base``."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        *args,
        "-p",
        "no:cacheprovider",
        "-q",
        "--color=no",
        f"--conformance-report={report_base}",
    ]
    environment = {**os.environ, **(env or {})}
    # The subprocess must import this checkout's `conformance` package whatever its cwd.
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), environment.get("PYTHONPATH", "")) if p
    )
    completed = subprocess.run(
        command,
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    report_file = report_base.with_suffix(".json")
    report = json.loads(report_file.read_text(encoding="utf-8")) if report_file.exists() else None
    return PytestRun(completed.returncode, completed.stdout + completed.stderr, report)
