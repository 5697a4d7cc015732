"""What a killed episode worker started is ended, even a process in a session of its own,
and the no-orphan checks see a process reparented away from the test (see
``tests/workers/processes.py``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from tests.rollout.rollout_support import (
    MilesLoop,
    RecordingEngine,
    RolloutFnFactory,
    call,
    miles_args,
    train_input,
    write_config,
)
from tests.workers.processes import (
    descendants,
    leftovers,
    still_running,
    wait_until,
    watch_for_orphans,
)

pytestmark = pytest.mark.slow

WORKER_MODULE = "miles_verifiers._workers.child"
# Bound on everything a lost worker leaves ending (a stop's grace included).
GONE_WITHIN_S = 60.0
# Episodes are slow on a loaded machine: a generous deadline per call.
CALL_DEADLINE_S = 300.0
SLEEPER = "mv-spawner-sleeper"
# mv-arith, except that loading its tasks in an episode worker starts a process in a session
# of its own, which outlives the worker unless something ends it.
SPAWNER_MODULE = f'''
import subprocess
import sys

import mv_arith
from mv_arith import FixtureHarness


class SpawnerTaskset(mv_arith.ArithTaskset):
    def load(self):
        main = getattr(sys.modules["__main__"], "__spec__", None)
        if main is not None and main.name == "{WORKER_MODULE}":
            subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(600)", "{SLEEPER}"],
                start_new_session=True,
                stdin=subprocess.DEVNULL,
            )
        return super().load()


__all__ = ["SpawnerTaskset", "FixtureHarness"]
'''


@pytest.fixture(autouse=True, scope="module")
def orphans_seen() -> None:
    watch_for_orphans()


@pytest.fixture
def closing() -> Iterator[list[VerifiersRolloutFn]]:
    made: list[VerifiersRolloutFn] = []
    yield made
    for fn in made:
        fn.close()


def worker_pids() -> list[int]:
    return [p.pid for p in descendants() if WORKER_MODULE in p.cmdline]


def test_what_a_killed_worker_started_in_a_session_of_its_own_is_ended(
    engine: RecordingEngine,
    miles_loop: MilesLoop,
    build_rollout_fn: RolloutFnFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    closing: list[VerifiersRolloutFn],
) -> None:
    (tmp_path / "mv_spawner.py").write_text(SPAWNER_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = write_config(tmp_path, "mv_arith", taskset={"id": "mv-spawner", "num_tasks": 4})
    fn = build_rollout_fn(miles_args(), config, AdapterSettings(episode_workers=2))
    closing.append(fn)
    call(fn, train_input(0), miles_loop, CALL_DEADLINE_S)
    victim = sorted(worker_pids())[0]
    sleepers = [p for p in descendants(victim) if SLEEPER in p.cmdline]

    os.kill(victim, signal.SIGKILL)  # no chance to end what it started
    call(
        fn, train_input(1), miles_loop, CALL_DEADLINE_S
    )  # finds it lost and starts another in its place

    assert sleepers
    assert wait_until(lambda: not still_running(sleepers), GONE_WITHIN_S), still_running(sleepers)
    fn.close()
    assert wait_until(lambda: not leftovers(), GONE_WITHIN_S), leftovers()
