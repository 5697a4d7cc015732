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
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any, TypeVar

import pytest

from benchmarks.engine_proc import plan_engine_process
from benchmarks.loadgen import flush_cache, replay_sync
from benchmarks.recorder import Recorder
from benchmarks.rollouts import CallStats, RolloutDriver, point_driver
from benchmarks.rounds import measured_rounds
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
T = TypeVar("T")


@pytest.fixture(scope="module")
def setups(scale: Scale, recorder: Recorder) -> dict[str, VariantSetup]:
    found = {name: worker_settings(name) for name in variants(scale.worker_counts)}
    for key, reason in unavailable_settings(found).items():
        recorder.settings[key] = reason
        recorder.note(f"{key}: {reason}")
    return found


def _variants_on(setups: dict[str, VariantSetup], taskset: str) -> dict[str, tuple[str, Any]]:
    """Every runnable variant, each on ``taskset`` with its own settings."""
    return {
        name: (taskset, setup.settings)
        for name, setup in setups.items()
        if setup.unavailable is None
    }


def _call(url: str, driver: RolloutDriver) -> CallStats:
    return driver.call()


def _interleaved(
    benchmark,
    engine: AbstractContextManager[tuple[str, int]],
    runs: dict[str, tuple[str, Any]],
    point: RolloutPoint,
    scale: Scale,
    *,
    min_new_tokens: int = 0,
    one_call: Callable[[str, RolloutDriver], T] = _call,
) -> dict[str, list[T]]:
    """A driver per named run (its taskset and settings), each called once unmeasured, then
    ``one_call`` per run and round, the runs interleaved within each round."""
    measured: dict[str, list[T]] = {name: [] for name in runs}

    def measure() -> None:
        with engine as (url, engine_pid), ExitStack() as stack:
            drivers = {
                name: stack.enter_context(
                    point_driver(
                        url,
                        taskset,
                        point,
                        max_response_tokens=scale.max_response_tokens,
                        exclude_pids=(engine_pid,),
                        settings=settings,
                        min_new_tokens=min_new_tokens,
                    )
                )
                for name, (taskset, settings) in runs.items()
            }
            for driver in drivers.values():
                driver.call()  # unmeasured: workers started, tokenizers loaded, connections open
            for _ in range(point.rounds or scale.rounds):
                for name, driver in drivers.items():
                    flush_cache(url)
                    measured[name].append(one_call(url, driver))

    measured_rounds(benchmark, measure)
    return measured


def test_throughput_against_worker_count(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    zero_latency_engine,
    setups: dict[str, VariantSetup],
    worker_taskset: str,
) -> None:
    calls = _interleaved(
        benchmark,
        nullcontext(zero_latency_engine),
        _variants_on(setups, worker_taskset),
        scale.worker_points[worker_taskset],
        scale,
    )
    record_worker_point(recorder, worker_taskset, calls)


def test_saturation_against_worker_count(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    setups: dict[str, VariantSetup],
    worker_plan: SaturationPlan,
) -> None:
    plan = worker_plan

    def with_ceiling(url: str, driver: RolloutDriver) -> tuple[CallStats, float]:
        call = driver.call()
        flush_cache(url)
        direct = replay_sync(url, call.requests, concurrency=plan.concurrency)
        return call, direct.output_tokens_per_s

    rounds = _interleaved(
        benchmark,
        plan_engine_process(plan),
        _variants_on(setups, SATURATION_TASKSET),
        plan.point,
        scale,
        min_new_tokens=plan.min_new_tokens,
        one_call=with_ceiling,
    )
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
    settings = {
        "mv-arith": two.settings,
        "mv-arith04": two.settings.model_copy(update={"episode_worker_python": python04}),
    }
    calls = _interleaved(
        benchmark,
        nullcontext(zero_latency_engine),
        {taskset: (taskset, chosen) for taskset, chosen in settings.items()},
        scale.worker_points["mv-arith"],
        scale,
    )
    record_generation_point(recorder, calls["mv-arith"], calls["mv-arith04"])
