"""Killing episode workers, and the trainer, mid-call on a taskset that starts processes of
its own (mv-tools: an MCP tool server per rollout) and on one that starts none (mv-arith):
the call goes on without the lost worker, and nothing a worker started is left running,
orphans included (the checks see a process reparented away from the test, see
``tests/workers/processes.py``).

mv-dialogue (a user simulator per rollout) gets one row, SIGKILL: Verifiers starts its
simulator through the same launcher as a tool server (a background program in a session of
its own under the worker), and the adapter ends what a worker started the same way whatever
it is, so its other rows would take mv-tools' code path again at the file's highest cost. The
spawner test below covers a process that a taskset starts by other means."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from miles_verifiers_testkit.engine import LatencyModel
from tests.rollout.rollout_support import (
    RecordingEngine,
    Rollouts,
    call,
    miles_args,
    train_input,
    write_config,
)
from tests.workers.processes import (
    ProcessInfo,
    descendants,
    episode_workers,
    leftovers,
    still_running,
    wait_until,
    watch_for_orphans,
)

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKSETS = ["mv_arith", "mv_tools"]
# Tasksets whose rollouts start processes (the tests wait until a worker has some).
STARTS_PROCESSES = {"mv_tools", "mv_dialogue"}
# Bound on everything a lost worker or a killed trainer leaves ending (a stop's grace included).
GONE_WITHIN_S = 60.0
# Episodes that start processes are slow on a loaded machine: a generous deadline per call.
CALL_DEADLINE_S = 300.0
SLEEPER = "mv-spawner-sleeper"
WORKER_OF_RID = re.compile(r"_w(\d+)g(\d+)-")
WORKER_NAME = re.compile(r"episode worker (\d+)\.(\d+) ")
# mv-arith, except that loading its tasks in an episode worker starts a process in a session
# of its own, which outlives the worker unless something ends it.
SPAWNER_MODULE = f'''
import os
import subprocess
import sys

import mv_arith
from mv_arith import FixtureHarness


class SpawnerTaskset(mv_arith.ArithTaskset):
    def load(self):
        if "MILES_VERIFIERS_WORKER_PROTOCOL" in os.environ:  # set in episode workers only
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


def samples_per_prompt(taskset: str) -> int:
    """One sample per prompt where each rollout starts a server (seconds of CPU each), so a
    worker runs one rollout at a time; two elsewhere, so one worker alone puts two requests
    in flight."""
    return 1 if taskset in STARTS_PROCESSES else 2


def with_processes(root: int | None) -> list[int]:
    """Of the episode workers below ``root`` (default: this process), once two have started,
    those with processes of their own running. Polled: /proc is read once per call."""
    below = descendants(root)
    workers = sorted(episode_workers(below=below))
    if len(workers) < 2:
        return []
    return [w for w in workers if any(p.ppid == w for p in below)]


def holding_requests(fn: VerifiersRolloutFn, engine: RecordingEngine) -> list[int]:
    """The pids of ``fn``'s workers with requests in flight on the engine: a request's rid
    names its worker's slot and generation (``<call>_w<slot>g<generation>-<n>``), as the
    worker's description does (``episode worker <slot>.<generation> (pid <pid>)``)."""
    busy = {m.groups() for rid in engine.in_flight_rids() if (m := WORKER_OF_RID.search(rid))}
    links = fn._workers.links if fn._workers is not None else []
    return [
        link.pid
        for link in links
        if (m := WORKER_NAME.match(link.description)) and m.groups() in busy
    ]


def kill_one_worker_mid_call(
    fn: VerifiersRolloutFn, rollouts: Rollouts, taskset: str, how: signal.Signals
) -> tuple[int, list[ProcessInfo], dict[str, Any]]:
    """Start a slow training call; once a worker is mid-group send ``how`` to the first such:
    on a taskset that starts processes, a worker with some running; elsewhere, a worker with
    requests in flight (not merely a worker given a group: one still loading its taskset, if
    stopped, is found out only at the setup timeout, past this test's deadline). Returns its
    pid, what it had started and what the call returned or raised."""
    engine = rollouts.engine
    engine.set_latency(LatencyModel(decode_s_per_token=0.05))
    result: dict[str, Any] = {}

    def train() -> None:
        try:
            result["output"] = call(fn, train_input(0), rollouts.loop, CALL_DEADLINE_S)
        except Exception as error:
            result["error"] = error

    def pick_victim() -> bool:
        ready = (
            with_processes(None) if taskset in STARTS_PROCESSES else holding_requests(fn, engine)
        )
        victims[:] = ready[:1]
        return bool(victims)

    victims: list[int] = []
    caller = threading.Thread(target=train)
    caller.start()
    assert wait_until(pick_victim, timeout_s=CALL_DEADLINE_S)
    started = descendants(victims[0])
    os.kill(victims[0], how)
    caller.join(timeout=CALL_DEADLINE_S + 30)
    return victims[0], started, result


@pytest.mark.parametrize(
    ("taskset", "how"),
    [
        *(
            pytest.param(taskset, how, id=f"{name}-{taskset}")
            for taskset in TASKSETS
            for how, name in [
                (signal.SIGTERM, "sigterm"),
                (signal.SIGKILL, "sigkill"),
                (signal.SIGSTOP, "hung"),
            ]
        ),
        pytest.param("mv_dialogue", signal.SIGKILL, id="sigkill-mv_dialogue"),
    ],
)
def test_a_lost_worker_ends_what_it_started_and_its_groups_are_replaced(
    taskset: str, how: signal.Signals, rollouts: Rollouts, closing: list[VerifiersRolloutFn]
) -> None:
    config = rollouts.config(taskset, taskset={"num_tasks": 8})
    # No spare groups: whatever the lost worker held must be replaced for the batch to fill.
    samples = samples_per_prompt(taskset)
    args = miles_args(
        rollout_batch_size=2, over_sampling_batch_size=2, n_samples_per_prompt=samples
    )
    # A hung (stopped) worker is found out at the episode deadline plus its wind-down.
    deadline = {"episode_timeout_s": 20} if how == signal.SIGSTOP else {}
    quick = AdapterSettings(episode_workers=2, cleanup_grace_s=1, abort_timeout_s=1, **deadline)
    fn = rollouts.build(args, config, quick)
    closing.append(fn)

    victim, started, result = kill_one_worker_mid_call(fn, rollouts, taskset, how)

    assert "output" in result, f"the call raised: {result.get('error')!r}"
    output = result["output"]
    assert [len(g) for g in output.samples] == [samples, samples]
    assert all(s.status.value == "completed" for g in output.samples for s in g)
    assert output.metrics["rollout/dynamic_filter/drop_worker_lost"] >= 1
    assert output.metrics["verifiers/groups_replaced"] >= 1
    assert victim not in episode_workers()
    assert taskset not in STARTS_PROCESSES or started
    assert wait_until(lambda: not still_running(started), GONE_WITHIN_S), still_running(started)
    fn.close()
    assert wait_until(lambda: not leftovers(), GONE_WITHIN_S), leftovers()


def test_more_lost_workers_than_the_restart_bound_fail_the_call_naming_the_setting(
    rollouts: Rollouts, closing: list[VerifiersRolloutFn]
) -> None:
    from miles_verifiers.trainer.backends.pool import WorkerRestartLimitError

    config = rollouts.config("mv_arith", taskset={"num_tasks": 8})
    args = miles_args(rollout_batch_size=2, over_sampling_batch_size=2)
    fn = rollouts.build(args, config, AdapterSettings(episode_workers=2, episode_worker_restarts=0))
    closing.append(fn)

    _, _, result = kill_one_worker_mid_call(fn, rollouts, "mv_arith", signal.SIGKILL)
    fn.close()

    error = result.get("error")
    assert isinstance(error, WorkerRestartLimitError), result
    assert "MILES_VERIFIERS_EPISODE_WORKER_RESTARTS" in str(error)
    # The killed worker's requests end as the engine sees its connections close.
    assert wait_until(lambda: rollouts.engine.in_flight == 0, timeout_s=10)
    assert wait_until(lambda: not leftovers(), GONE_WITHIN_S), leftovers()


def test_what_a_killed_worker_started_in_a_session_of_its_own_is_ended(
    rollouts: Rollouts,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    closing: list[VerifiersRolloutFn],
) -> None:
    (tmp_path / "mv_spawner.py").write_text(SPAWNER_MODULE, encoding="utf-8")
    # Workers (and the describe step) import only from their own environment: PYTHONPATH.
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = rollouts.config("mv_arith", taskset={"id": "mv-spawner", "num_tasks": 4})
    fn = rollouts.build(miles_args(), config, AdapterSettings(episode_workers=2))
    closing.append(fn)
    call(fn, train_input(0), rollouts.loop, CALL_DEADLINE_S)
    victim = sorted(episode_workers())[0]
    sleepers = [p for p in descendants(victim) if SLEEPER in p.cmdline]

    os.kill(victim, signal.SIGKILL)  # no chance to end what it started
    # Finds it lost and starts another in its place.
    call(fn, train_input(1), rollouts.loop, CALL_DEADLINE_S)

    assert sleepers
    assert wait_until(lambda: not still_running(sleepers), GONE_WITHIN_S), still_running(sleepers)
    fn.close()
    assert wait_until(lambda: not leftovers(), GONE_WITHIN_S), leftovers()


@pytest.mark.parametrize("taskset", TASKSETS)
def test_a_killed_trainer_leaves_no_worker_and_nothing_they_started(
    taskset: str, engine: RecordingEngine, engine_port: int, tmp_path: Path
) -> None:
    config = write_config(tmp_path, taskset, taskset={"num_tasks": 8})
    engine.set_latency(LatencyModel(decode_s_per_token=0.05))
    trainer = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.rollout.trainer_process"),
            *(str(config), str(engine_port), str(samples_per_prompt(taskset))),
        ],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
    )

    def mid_call() -> bool:
        assert trainer.poll() is None, f"the trainer exited early, with {trainer.returncode}"
        if taskset in STARTS_PROCESSES:
            return bool(with_processes(trainer.pid))
        return len(episode_workers(trainer.pid)) >= 2 and engine.in_flight >= 2

    try:
        assert wait_until(mid_call, timeout_s=CALL_DEADLINE_S)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(timeout=30)
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait(timeout=30)

    assert wait_until(lambda: not leftovers(), GONE_WITHIN_S), leftovers()
