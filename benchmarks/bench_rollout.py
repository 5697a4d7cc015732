"""End-to-end rollouts through the adapter (``VerifiersRolloutFn``), as Miles calls it, for the
single-turn, multi-turn (user simulator) and tool (MCP) fixture tasksets at several
concurrencies, against the zero-latency engine. Environment subprocess CPU is reported on its
own lines; the engine runs in its own process and is charged to neither."""

from __future__ import annotations

from benchmarks.measure import record_rollout_point, run_scaled_point
from benchmarks.recorder import Recorder
from benchmarks.rounds import measured_rounds
from benchmarks.scale import RolloutPoint, Scale


def test_rollout_throughput(
    benchmark,
    scale: Scale,
    recorder: Recorder,
    zero_latency_engine,
    rollout_case: tuple[str, RolloutPoint],
) -> None:
    taskset, point = rollout_case
    # One pytest-benchmark round covers construction, the first call and every measured call;
    # the per-call figures come from the calls themselves.
    (result,) = measured_rounds(
        benchmark, lambda: run_scaled_point(zero_latency_engine, taskset, point, scale)
    )
    record_rollout_point(recorder, taskset, point, result)
