"""With a Verifiers this process cannot run (0.4.0, really installed) and no worker interpreter,
construction and ``miles-verifiers check`` stop with the version message: the installed
version, the supported one, and the way out (a worker virtualenv). No import error escapes.

Run by ``tox -e unsupported-verifiers``, whose environment has verifiers 0.4.0 and the adapter's
plain (trainer-side) install; not collected by the default run.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from miles_verifiers import SetupError, VerifiersRolloutFn
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.versions import UnsupportedVersionError
from miles_verifiers_testkit.miles import miles_args

CONFIG = Path(__file__).parents[1] / "fixtures" / "configs" / "mv_arith.toml"
WORKER_PYTHON = "MILES_VERIFIERS_EPISODE_WORKER_PYTHON"


def expect_version_message(text: str) -> None:
    installed = importlib.metadata.version("verifiers")
    assert f"verifiers (found {installed})" in text
    assert "verifiers>=0.2.0,<0.2.1" in text
    assert WORKER_PYTHON in text


def test_this_environment_really_has_a_verifiers_the_adapter_cannot_run_in_process() -> None:
    assert importlib.metadata.version("verifiers").startswith("0.4.")


def test_construction_stops_with_the_version_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFIERS_CONFIG", str(CONFIG))
    monkeypatch.delenv(WORKER_PYTHON, raising=False)
    args = miles_args(n_samples_per_prompt=2, rollout_batch_size=2)
    with pytest.raises(UnsupportedVersionError) as caught:
        VerifiersRolloutFn(contract().RolloutFnConstructorInput(args=args, data_source=None))
    assert isinstance(caught.value, SetupError)
    expect_version_message(str(caught.value))


def test_check_reports_the_version_message_without_a_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if k != WORKER_PYTHON}
    done = subprocess.run(
        [
            sys.executable, "-m", "miles_verifiers.cli.main", "check", "--config", str(CONFIG),
            "--rollout-batch-size", "2", "--n-samples-per-prompt", "2", "--num-rollout", "1",
            "--rollout-max-response-len", "64", "--hf-checkpoint", "Qwen/Qwen3-0.6B",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    expect_version_message(output)
    assert "Traceback" not in output
