"""End-to-end rollouts through the adapter (``VerifiersRolloutFn``), as Miles calls it, for the
single-turn, multi-turn (user simulator) and tool (MCP) fixture tasksets at several
concurrencies, against the zero-latency engine. Environment subprocess CPU is reported on its
own lines; the engine runs in its own process and is charged to neither."""

from __future__ import annotations

from benchmarks.measure import PointResult, record_rollout_point, run_rollout_point
from benchmarks.recorder import Recorder
from benchmarks.scale import RolloutPoint, Scale


def test_rollout_throughput(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    zero_latency_engine,
    rollout_case: tuple[str, RolloutPoint],
) -> None:
    url, engine_pid = zero_latency_engine
    taskset, point = rollout_case
    results: list[PointResult] = []

    def measure() -> None:
        results.append(
            run_rollout_point(
                url,
                taskset,
                point,
                rounds=point.rounds or scale.rounds,
                max_response_tokens=scale.max_response_tokens,
                exclude_pids=(engine_pid,),
            )
        )

    # One pytest-benchmark round covers construction, the first call and every measured call;
    # the per-call figures come from the calls themselves.
    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    record_rollout_point(recorder, taskset, point, results[0])
