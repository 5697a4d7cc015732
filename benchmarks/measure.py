"""Measurements shared by the CPU benchmarks and the GPU script: each runs a workload against
an engine URL and records its figures. Nothing here knows which engine it talks to.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

from benchmarks.loadgen import LoadResult, flush_cache, replay_sync
from benchmarks.recorder import Recorder
from benchmarks.results import ParamValue
from benchmarks.rollouts import CallStats, point_driver
from benchmarks.scale import RolloutPoint, Scale


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
    with point_driver(
        engine_url,
        taskset,
        point,
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


def run_scaled_point(
    engine: tuple[str, int], taskset: str, point: RolloutPoint, scale: Scale
) -> PointResult:
    """:func:`run_rollout_point` on the CPU benchmarks' ``(url, pid)`` engine: the scale's rounds
    unless the point names its own, the scale's reply cap, the engine's CPU left out."""
    url, engine_pid = engine
    return run_rollout_point(
        url,
        taskset,
        point,
        rounds=point.rounds or scale.rounds,
        max_response_tokens=scale.max_response_tokens,
        exclude_pids=(engine_pid,),
    )


def _per(
    calls: tuple[CallStats, ...], numerator: str, denominator: str, scale: int = 1
) -> list[float]:
    """``scale * numerator / denominator`` of each call (a denominator of 0 counts as 1)."""
    return [scale * getattr(s, numerator) / max(1, getattr(s, denominator)) for s in calls]


def record_rollout_point(
    recorder: Recorder, taskset: str, point: RolloutPoint, result: PointResult
) -> None:
    c = point.concurrency
    key = f"rollout.{taskset}.c{c}"
    calls = result.calls
    # The throughput figures carry ``series``: the report plots them against concurrency.
    plotted = recorder.group(
        "rollout", series=taskset, concurrency=c, rollouts_per_call=point.rollouts_per_call
    )
    for unit, name in (
        ("rollouts/s", "rollouts_per_s"),
        ("sampled tokens/s", "sampled_tokens_per_s"),
    ):
        plotted(f"{key}.{name}", [getattr(s, name) for s in calls], f"{taskset} {unit}", unit)
    figures = [
        ("trainer_cpu_ms_per_turn", _per(calls, "trainer_cpu_s", "model_turns", 1000),
         f"{taskset} trainer-process CPU per model turn", "ms", "lower"),
        ("model_turns_per_rollout", _per(calls, "model_turns", "rollouts"),
         f"{taskset} model turns per rollout", "turns", "none"),
    ]  # fmt: skip
    if c == 1:
        figures.append(("wall_ms_per_turn", _per(calls, "wall_s", "model_turns", 1000),
                        f"{taskset} wall time per model turn, one at a time", "ms", "lower"))  # fmt: skip
    rollout = recorder.group("rollout", taskset=taskset, concurrency=c)
    rollout.each(key, figures)
    recorder.group("environment", taskset=taskset, concurrency=c)(
        f"environment.{taskset}.c{c}.cpu_ms_per_rollout",
        _per(calls, "env_cpu_s", "rollouts", 1000),
        f"{taskset} environment subprocess CPU per rollout",
        "ms",
        "lower",
    )
    what = f"{taskset} construction + first call"
    rollout(f"{key}.first_call_s", [result.first_call_s], what, "s", "lower")


@dataclass(frozen=True)
class CeilingRound:
    adapter: CallStats
    direct: LoadResult


def _over_ceiling(rounds: list[CeilingRound]) -> list[float]:
    """Adapter / ceiling tokens/s of each round."""
    return [r.adapter.sampled_tokens_per_s / r.direct.output_tokens_per_s for r in rounds]


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
    record = recorder.group(group, **params)
    adapter = [r.adapter.sampled_tokens_per_s for r in rounds]
    direct = [r.direct.output_tokens_per_s for r in rounds]
    record(
        f"{key}.adapter_tokens_per_s", adapter, "through the adapter: sampled tokens/s", "tokens/s"
    )
    record(
        f"{key}.direct_tokens_per_s",
        direct,
        "direct load generator (ceiling): output tokens/s",
        "tokens/s",
    )
    record(
        f"{key}.adapter_over_ceiling",
        _over_ceiling(rounds),
        "adapter / ceiling (goal >= 0.95)",
        "ratio",
    )
    record(
        f"{key}.mean_output_tokens",
        [r.adapter.sampled_tokens / max(1, r.adapter.model_turns) for r in rounds],
        "mean output tokens per request",
        "tokens",
        "none",
    )
    if capacity_tokens_per_s:
        for name, values in (("adapter", adapter), ("ceiling", direct)):
            record(
                f"{key}.{name}_over_capacity",
                [v / capacity_tokens_per_s for v in values],
                f"{name} / engine capacity",
                "ratio",
            )


def record_summary(
    recorder: Recorder, key: str, rounds: list[CeilingRound], label: str, **params: ParamValue
) -> None:
    """The headline figure of a ceiling measurement: adapter / ceiling tokens/s per round."""
    recorder.group("summary", **params)(
        f"summary.{key}.adapter_over_ceiling", _over_ceiling(rounds), label, "ratio"
    )
