"""Measurements shared by the CPU benchmarks and the GPU script: each runs a workload against
an engine URL and records its figures. Nothing here knows which engine it talks to.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Collection
from dataclasses import dataclass

from benchmarks.loadgen import LoadResult, flush_cache, replay_sync
from benchmarks.recorder import Recorder
from benchmarks.rollouts import CallStats, rollout_driver
from benchmarks.scale import RolloutPoint


@dataclass(frozen=True)
class PointResult:
    first_call_s: float
    calls: tuple[CallStats, ...]


def run_rollout_point(
    engine_url: str,
    taskset: str,
    point: RolloutPoint,
    *,
    rounds: int,
    max_response_tokens: int,
    exclude_pids: Collection[int] = (),
) -> PointResult:
    """Construct the rollout function, make one unmeasured first call, then ``rounds`` calls.

    The engine's prefix cache is emptied before each measured call, as before each replay of
    its workload, so neither side starts with the other's prompts cached.
    """
    started = time.perf_counter()
    with rollout_driver(
        engine_url=engine_url,
        taskset=taskset,
        groups=point.groups,
        samples_per_group=point.samples_per_group,
        concurrency=point.concurrency,
        max_response_tokens=max_response_tokens,
        exclude_pids=exclude_pids,
    ) as driver:
        driver.call()
        first_call = time.perf_counter() - started
        calls = []
        for _ in range(rounds):
            flush_cache(engine_url)
            calls.append(driver.call())
    return PointResult(first_call_s=first_call, calls=tuple(calls))


def record_rollout_point(
    recorder: Recorder, taskset: str, point: RolloutPoint, result: PointResult
) -> None:
    c = point.concurrency
    key = f"rollout.{taskset}.c{c}"
    params = {"series": taskset, "concurrency": c, "rollouts_per_call": point.rollouts_per_call}
    calls = result.calls
    recorder.record(
        f"{key}.rollouts_per_s",
        [s.rollouts_per_s for s in calls],
        group="rollout",
        label=f"{taskset} rollouts/s",
        unit="rollouts/s",
        **params,
    )
    recorder.record(
        f"{key}.sampled_tokens_per_s",
        [s.sampled_tokens_per_s for s in calls],
        group="rollout",
        label=f"{taskset} sampled tokens/s",
        unit="sampled tokens/s",
        **params,
    )
    recorder.record(
        f"{key}.trainer_cpu_ms_per_turn",
        [1000 * s.trainer_cpu_s / max(1, s.model_turns) for s in calls],
        group="rollout",
        label=f"{taskset} trainer-process CPU per model turn",
        unit="ms",
        better="lower",
        taskset=taskset,
        concurrency=c,
    )
    recorder.record(
        f"{key}.model_turns_per_rollout",
        [s.model_turns / max(1, s.rollouts) for s in calls],
        group="rollout",
        label=f"{taskset} model turns per rollout",
        unit="turns",
        better="none",
        taskset=taskset,
        concurrency=c,
    )
    if c == 1:
        recorder.record(
            f"{key}.wall_ms_per_turn",
            [1000 * s.wall_s / max(1, s.model_turns) for s in calls],
            group="rollout",
            label=f"{taskset} wall time per model turn, one at a time",
            unit="ms",
            better="lower",
            taskset=taskset,
            concurrency=c,
        )
    recorder.record(
        f"environment.{taskset}.c{c}.cpu_ms_per_rollout",
        [1000 * s.env_cpu_s / max(1, s.rollouts) for s in calls],
        group="environment",
        label=f"{taskset} environment subprocess CPU per rollout",
        unit="ms",
        better="lower",
        taskset=taskset,
        concurrency=c,
    )
    recorder.record(
        f"{key}.first_call_s",
        [result.first_call_s],
        group="rollout",
        label=f"{taskset} construction + first call",
        unit="s",
        better="lower",
        taskset=taskset,
        concurrency=c,
    )


@dataclass(frozen=True)
class CeilingRound:
    adapter: CallStats
    direct: LoadResult

    @property
    def ratio(self) -> float:
        return self.adapter.sampled_tokens_per_s / self.direct.output_tokens_per_s


def replay_calls(
    engine_url: str, calls: tuple[CallStats, ...], concurrency: int
) -> list[CeilingRound]:
    """Replay each call's token workload straight to the engine at the same concurrency."""
    rounds = []
    for call in calls:
        flush_cache(engine_url)
        rounds.append(
            CeilingRound(call, replay_sync(engine_url, call.requests, concurrency=concurrency))
        )
    return rounds


def record_ceiling(
    recorder: Recorder,
    rounds: list[CeilingRound],
    *,
    key: str,
    group: str,
    capacity_tokens_per_s: float | None = None,
    **params: str | int,
) -> None:
    recorder.record(
        f"{key}.adapter_tokens_per_s",
        [r.adapter.sampled_tokens_per_s for r in rounds],
        group=group,
        label="through the adapter: sampled tokens/s",
        unit="tokens/s",
        **params,
    )
    recorder.record(
        f"{key}.direct_tokens_per_s",
        [r.direct.output_tokens_per_s for r in rounds],
        group=group,
        label="direct load generator (ceiling): output tokens/s",
        unit="tokens/s",
        **params,
    )
    recorder.record(
        f"{key}.adapter_over_ceiling",
        [r.ratio for r in rounds],
        group=group,
        label="adapter / ceiling (goal >= 0.95)",
        unit="ratio",
        **params,
    )
    recorder.record(
        f"{key}.mean_output_tokens",
        [r.adapter.sampled_tokens / max(1, r.adapter.model_turns) for r in rounds],
        group=group,
        label="mean output tokens per request",
        unit="tokens",
        better="none",
        **params,
    )
    if capacity_tokens_per_s:
        recorder.record(
            f"{key}.adapter_over_capacity",
            [r.adapter.sampled_tokens_per_s / capacity_tokens_per_s for r in rounds],
            group=group,
            label="adapter / engine capacity",
            unit="ratio",
            **params,
        )
        recorder.record(
            f"{key}.ceiling_over_capacity",
            [r.direct.output_tokens_per_s / capacity_tokens_per_s for r in rounds],
            group=group,
            label="ceiling / engine capacity",
            unit="ratio",
            **params,
        )


def median(values: list[float]) -> float:
    return statistics.median(values)
