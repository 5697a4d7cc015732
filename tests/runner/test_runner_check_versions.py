"""``check`` shows what each side runs: the trainer's and the episode workers' Python,
Verifiers, Renderers and protocol versions."""

from __future__ import annotations

import platform
import sys

import pytest

from miles_verifiers.protocol.messages import PROTOCOL_VERSION
from tests.runner.runner_support import run_command
from tests.runner.test_runner_check import VALID, silent_router  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow


def line_of(stdout: str, name: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.strip().startswith(f"{name}")]
    return line.strip()


def test_check_prints_the_trainers_versions_and_that_episodes_run_in_its_process(
    silent_router,  # noqa: F811
):
    code, stdout, stderr = run_command(["check", "--config", "mv-arith", *VALID, *silent_router])

    assert code == 0, stdout + stderr
    trainer = line_of(stdout, "trainer:")
    assert f"python {platform.python_version()}" in trainer
    assert "verifiers 0.2.0" in trainer and "renderers " in trainer
    assert f"protocol {PROTOCOL_VERSION}" in trainer
    assert line_of(stdout, "episodes:") == "episodes: in Miles' process (the trainer's versions)"


def test_check_prints_the_versions_the_workers_interpreter_reports(
    silent_router,  # noqa: F811
    monkeypatch,
):
    monkeypatch.setenv("MILES_VERIFIERS_EPISODE_WORKER_PYTHON", sys.executable)

    code, stdout, stderr = run_command(["check", "--config", "mv-arith", *VALID, *silent_router])

    assert code == 0, stdout + stderr
    workers = line_of(stdout, "workers (")
    assert workers.startswith(f"workers ({sys.executable}): python {platform.python_version()}")
    assert "verifiers 0.2.0" in workers and f"protocol {PROTOCOL_VERSION}" in workers
