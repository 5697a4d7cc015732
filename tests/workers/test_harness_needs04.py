"""``check`` (and so construction) refuses, before any episode, a Verifiers 0.4 seat whose harness
cannot prepare its program where the episodes run: the stock ``null`` harness runs Verifiers'
chat program as a ``uv`` script, so the worker venv needs ``uv`` and ``uv`` needs its package
index (adapter/episodes/v04/harness_needs.py). The describe step runs in the workers' interpreter
with the workers' ``PATH``, so these run ``miles-verifiers check`` as a user would, against a
worker venv with ``uv`` (tox -e verifiers04 installs it) and a view of that venv without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers.worker04 import PYTHON, needs_verifiers04, run_in_worker04

pytestmark = needs_verifiers04

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "fixtures" / "configs" / "v04"
NULL_HARNESS = CONFIGS / "mv_arith_null.toml"
MILES_FLAGS = [
    "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
    "--rollout-max-response-len", "64", "--num-rollout", "1",
]  # fmt: skip
# A loopback port nothing listens on: an index that refuses at once.
DEAD_INDEX = "http://127.0.0.1:9/simple"


def venv_without_uv(directory: Path) -> Path:
    """The worker venv, seen through a directory of its own whose ``bin`` holds only its
    ``python``: the same packages, and no ``uv`` first on the workers' PATH."""
    assert PYTHON is not None
    venv = Path(PYTHON).parent.parent
    (directory / "bin").mkdir(parents=True)
    (directory / "lib").symlink_to(venv / "lib")
    (directory / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    (directory / "bin" / "python").symlink_to(PYTHON)
    return directory / "bin" / "python"


def path_without_uv() -> str:
    """This process's PATH less every directory holding a ``uv`` (the trainer env may have
    one, and so may the machine): what the workers see is then their venv's ``bin`` only."""
    return os.pathsep.join(
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if not (Path(entry) / "uv").exists()
    )


def check(config: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("miles-verifiers")
    return subprocess.run(
        [str(command), "check", "--config", str(config), *MILES_FLAGS],
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_null_harness_on_a_worker_venv_without_uv_is_refused_naming_the_seat_and_the_fix(
    tmp_path: Path,
) -> None:
    python = venv_without_uv(tmp_path / "episodes")

    done = check(
        NULL_HARNESS, MILES_VERIFIERS_EPISODE_WORKER_PYTHON=str(python), PATH=path_without_uv()
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "the 'agent' seat's harness 'null' ([agent.harness] id)" in done.stdout
    assert "no `uv` on the episode workers' PATH" in done.stdout
    assert f"Fix: install uv into the worker venv: {python} -m pip install uv" in done.stdout


def test_the_null_harness_without_its_package_index_is_refused_naming_the_index_and_the_fix() -> (
    None
):
    done = check(NULL_HARNESS, UV_INDEX_URL=DEAD_INDEX)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "the 'agent' seat's harness 'null' ([agent.harness] id)" in done.stdout
    assert f"index: {DEAD_INDEX}" in done.stdout
    assert "set UV_INDEX_URL (or UV_DEFAULT_INDEX)" in done.stdout


def test_the_null_harness_with_uv_in_the_worker_venv_and_its_index_passes_check() -> None:
    done = check(NULL_HARNESS)

    assert done.returncode == 0, done.stdout + done.stderr


# Run by the workers' interpreter with a PATH that has no uv: the preflight alone.
_PREFLIGHT = """
import sys, tomllib
from pathlib import Path
from miles_verifiers.episodes.v04.config import read_config04
from miles_verifiers.episodes.v04.harness_needs import check_harness_needs04
path = Path(sys.argv[1])
config, shaped = read_config04(tomllib.loads(path.read_text()), path)
check_harness_needs04(config, path, shaped.prefix, environ={"PATH": "/nonexistent"})
print("passed")
"""


@pytest.mark.parametrize("name", ["mv_arith", "mv_dialogue"])
def test_a_harness_that_runs_in_process_needs_no_uv(name: str) -> None:
    config = CONFIGS / f"{name}.toml"

    done = run_in_worker04(f"import sys; sys.argv[1:] = [{str(config)!r}]\n" + _PREFLIGHT)

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("passed")
