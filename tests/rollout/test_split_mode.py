"""With the episodes in a worker process, the trainer side never imports the episode side's
packages (Verifiers, Renderers, their tokenizers, MCP): not to construct, not to call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rollout.rollout_support import write_config

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("split_mode_probe.py")


def test_the_trainer_side_never_imports_verifiers_or_renderers_when_workers_run_episodes(
    engine_port: int, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "mv_arith", taskset={"num_tasks": 3})
    done = subprocess.run(
        [sys.executable, str(PROBE), str(engine_port), str(config)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["groups"] == 2
    assert seen["eval_entries"] == 3 * seen["eval_samples_per_task"]
    assert seen["before"] == []
    assert seen["constructed"] == []
    assert seen["called"] == []
