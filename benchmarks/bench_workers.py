"""The adapter against its episode-worker count: in-process, then 1, 2 and 4 local workers.

Every variant's rollout function is built up front and the rounds are interleaved (round i
of each variant, then round i+1), so the per-round ratios pair calls made under the same
machine load. The engine runs in its own process: the trainer-process CPU figure is this
process alone; worker processes and the environment servers below them are reported on
their own line. A variant this build cannot run (no ``episode_workers`` setting) is recorded
as ``unavailable: <reason>`` in the result's settings instead of failing the run.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Any

import pytest

from benchmarks.engine_proc import loopback_engine_process
from benchmarks.loadgen import flush_cache, replay_sync
from benchmarks.recorder import Recorder
from benchmarks.rollouts import CallStats, RolloutDriver, rollout_driver
from benchmarks.scale import RolloutPoint, SaturationPlan, Scale
from benchmarks.workers import (
    GENERATION_VARIANT,
    WORKER_PYTHON04,
    VariantSetup,
    record_generation_point,
    record_worker_point,
    record_worker_saturation,
    unavailable_settings,
    variants,
    worker_settings,
)

SATURATION_TASKSET = "mv-arith"


@pytest.fixture(scope="module")
def setups(scale: Scale, recorder: Recorder) -> dict[str, VariantSetup]:
    found = {name: worker_settings(name) for name in variants(scale.worker_counts)}
    for key, reason in unavailable_settings(found).items():
        recorder.settings[key] = reason
        recorder.note(f"{key}: {reason}")
    return found


def _runnable(setups: dict[str, VariantSetup]) -> list[str]:
    return [name for name, setup in setups.items() if setup.unavailable is None]


def _variants_on(setups: dict[str, VariantSetup], taskset: str) -> dict[str, tuple[str, Any]]:
    """Every runnable variant, each on ``taskset`` with its own settings."""
    return {name: (taskset, setups[name].settings) for name in _runnable(setups)}


def _drivers(
    stack: ExitStack,
    runs: dict[str, tuple[str, Any]],
    url: str,
    point: RolloutPoint,
    *,
    max_response_tokens: int,
    engine_pid: int,
    min_new_tokens: int = 0,
) -> dict[str, RolloutDriver]:
    """A driver per named run (its taskset and settings), each called once unmeasured."""
    drivers = {
        name: stack.enter_context(
            rollout_driver(
                engine_url=url,
                taskset=taskset,
                groups=point.groups,
                samples_per_group=point.samples_per_group,
                concurrency=point.concurrency,
                max_response_tokens=max_response_tokens,
                exclude_pids=(engine_pid,),
                settings=settings,
                min_new_tokens=min_new_tokens,
            )
        )
        for name, (taskset, settings) in runs.items()
    }
    for driver in drivers.values():
        driver.call()  # unmeasured: workers started, tokenizers loaded, connections open
    return drivers


def test_throughput_against_worker_count(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    zero_latency_engine,
    setups: dict[str, VariantSetup],
    worker_taskset: str,
) -> None:
    url, engine_pid = zero_latency_engine
    point = scale.worker_points[worker_taskset]
    calls: dict[str, list[CallStats]] = {name: [] for name in _runnable(setups)}

    def measure() -> None:
        with ExitStack() as stack:
            drivers = _drivers(
                stack,
                _variants_on(setups, worker_taskset),
                url,
                point,
                max_response_tokens=scale.max_response_tokens,
                engine_pid=engine_pid,
            )
            for _ in range(point.rounds or scale.rounds):
                for name, driver in drivers.items():
                    flush_cache(url)
                    calls[name].append(driver.call())

    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    record_worker_point(recorder, worker_taskset, calls)


def test_saturation_against_worker_count(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    setups: dict[str, VariantSetup],
    worker_plan: SaturationPlan,
) -> None:
    plan = worker_plan
    point = RolloutPoint(
        concurrency=plan.concurrency, groups=plan.groups, samples_per_group=plan.samples_per_group
    )
    rounds: dict[str, list[tuple[CallStats, float]]] = {name: [] for name in _runnable(setups)}

    def measure() -> None:
        with (
            loopback_engine_process(
                prefill_s_per_token=plan.prefill_s_per_token,
                decode_s_per_token=plan.decode_s_per_token,
                max_running_requests=plan.batch_capacity,
            ) as (url, engine_pid),
            ExitStack() as stack,
        ):
            drivers = _drivers(
                stack,
                _variants_on(setups, SATURATION_TASKSET),
                url,
                point,
                max_response_tokens=scale.max_response_tokens,
                engine_pid=engine_pid,
                min_new_tokens=plan.min_new_tokens,
            )
            for _ in range(plan.rounds or scale.rounds):
                for name, driver in drivers.items():
                    flush_cache(url)
                    call = driver.call()
                    flush_cache(url)
                    direct = replay_sync(url, call.requests, concurrency=plan.concurrency)
                    rounds[name].append((call, direct.output_tokens_per_s))

    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    record_worker_saturation(recorder, plan.name, plan.description, plan.decode_s_per_token, rounds)


def test_verifiers04_workers_against_verifiers02_workers(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    zero_latency_engine,
    setups: dict[str, VariantSetup],
) -> None:
    """The same mv-arith work in two local workers running verifiers 0.2.0 and two running
    0.4.0 (mv-arith04), rounds interleaved: what moving to 0.4 costs the trainer."""
    python04 = os.environ.get(WORKER_PYTHON04)
    two = setups.get(GENERATION_VARIANT)
    if not python04 or two is None or two.settings is None:
        reason = f"unavailable: set {WORKER_PYTHON04} to a verifiers 0.4.0 worker's python"
        if two is None or two.settings is None:
            reason = f"unavailable: this run has no {GENERATION_VARIANT} variant"
        recorder.settings["workers.mv-arith04"] = reason
        recorder.note(f"workers.mv-arith04: {reason}")
        pytest.skip(reason)
    url, engine_pid = zero_latency_engine
    point = scale.worker_points["mv-arith"]
    settings = {
        "mv-arith": two.settings,
        "mv-arith04": two.settings.model_copy(update={"episode_worker_python": python04}),
    }
    calls: dict[str, list[CallStats]] = {taskset: [] for taskset in settings}

    def measure() -> None:
        with ExitStack() as stack:
            drivers = _drivers(
                stack,
                {taskset: (taskset, chosen) for taskset, chosen in settings.items()},
                url,
                point,
                max_response_tokens=scale.max_response_tokens,
                engine_pid=engine_pid,
            )
            for _ in range(point.rounds or scale.rounds):
                for taskset, driver in drivers.items():
                    flush_cache(url)
                    calls[taskset].append(driver.call())

    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    record_generation_point(recorder, calls["mv-arith"], calls["mv-arith04"])
