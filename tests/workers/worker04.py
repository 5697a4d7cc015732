"""Running a script in the episodes' interpreter when it has Verifiers 0.4
(``MILES_VERIFIERS_EPISODE_WORKER_PYTHON``, as ``tox -e verifiers04`` sets it)."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

PYTHON = os.environ.get("MILES_VERIFIERS_EPISODE_WORKER_PYTHON")


def run_in_worker04(script: str) -> subprocess.CompletedProcess[str]:
    assert PYTHON is not None
    return subprocess.run(
        [PYTHON, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300
    )


def _has_verifiers04() -> bool:
    if not PYTHON:
        return False
    done = run_in_worker04("import importlib.metadata as m; print(m.version('verifiers'))")
    return done.returncode == 0 and done.stdout.strip().startswith("0.4.")


needs_verifiers04 = pytest.mark.skipif(
    not _has_verifiers04(), reason="needs a worker interpreter with verifiers 0.4"
)
