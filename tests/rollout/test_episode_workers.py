"""Episode workers (``MILES_VERIFIERS_EPISODE_WORKERS`` > 1, local processes): the same
samples as one process, every evaluation task, reuse across calls, lost workers, and no
process left behind."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from miles_verifiers._contract.compat import contract
from miles_verifiers_testkit.engine import LatencyModel
from tests.rollout.rollout_support import (
    MilesLoop,
    RecordingEngine,
    RolloutFnFactory,
    call,
    fingerprint,
    flat,
    miles_args,
    write_config,
)
from tests.workers.processes import descendants, wait_until

pytestmark = pytest.mark.slow

WORKER_MODULE = "miles_verifiers._workers.child"


def train_input(rollout_id: int) -> Any:
    return contract().RolloutFnTrainInput(rollout_id=rollout_id)


def eval_input(rollout_id: int) -> Any:
    return contract().RolloutFnEvalInput(rollout_id=rollout_id)


def workers(count: int = 2, **more: Any) -> AdapterSettings:
    return AdapterSettings(episode_workers=count, **more)


def worker_pids() -> list[int]:
    return [p.pid for p in descendants() if WORKER_MODULE in p.cmdline]


def deterministic_args(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "rollout_batch_size": 2,
        "over_sampling_batch_size": 3,
        "sglang_enable_deterministic_inference": True,
        "eval_interval": 1,
        "n_samples_per_eval_prompt": 2,
    }
    values.update(overrides)
    return miles_args(**values)


@pytest.fixture
def close_after() -> Any:
    made: list[VerifiersRolloutFn] = []
    yield made.append
    for fn in made:
        fn.close()


def test_two_workers_train_the_same_samples_as_one_process(
    engine: RecordingEngine,
    miles_loop: MilesLoop,
    build_rollout_fn: RolloutFnFactory,
    tmp_path: Path,
    close_after: Any,
) -> None:
    config = write_config(tmp_path, "mv_arith", taskset={"num_tasks": 5})
    alone = build_rollout_fn(deterministic_args(), config)
    expected = [
        [fingerprint(s) for s in flat(call(alone, train_input(r), miles_loop).samples)]
        for r in range(2)
    ]

    fn = build_rollout_fn(deterministic_args(), config, workers(2))
    close_after(fn)
    got = [
        [fingerprint(s) for s in flat(call(fn, train_input(r), miles_loop).samples)]
        for r in range(2)
    ]

    assert got == expected
