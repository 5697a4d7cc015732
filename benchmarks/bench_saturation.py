"""Does the adapter keep the engine saturated?

The engine runs a latency model (a decode speed per sequence and a continuous-batch
capacity), so it has a known capacity in output tokens/s. The adapter runs single-turn
rollouts at a concurrency above that capacity; then a direct load generator replays the very
same token workload (every request's prompt ids and output length) straight to the engine at
the same concurrency, as SGLang's serving benchmark would. That replay is the ceiling: the
adapter/ceiling ratio is what the adapter keeps of what the engine can give (goal: 0.95).
"""

from __future__ import annotations

from benchmarks.engine_proc import engine_stats, plan_engine_process
from benchmarks.measure import (
    CeilingRound,
    record_ceiling,
    record_summary,
    replay_calls,
    run_scaled_point,
)
from benchmarks.recorder import Recorder
from benchmarks.rounds import measured_rounds
from benchmarks.scale import SaturationPlan, Scale

TASKSET = "mv-arith"


def test_saturation_against_latency_model(
    benchmark, scale: Scale, recorder: Recorder, saturation_plan: SaturationPlan
) -> None:
    plan = saturation_plan

    def measure() -> tuple[list[CeilingRound], int]:
        with plan_engine_process(plan) as engine:
            result = run_scaled_point(engine, TASKSET, plan.point, scale)
            url = engine[0]
            rounds = replay_calls(url, result.calls, plan.concurrency)
            return rounds, int(engine_stats(url)["peak_running"])

    ((rounds, peak),) = measured_rounds(benchmark, measure)
    key = f"saturation.{plan.name}"
    params = {"plan": plan.name, "taskset": TASKSET, "concurrency": plan.concurrency}
    record_ceiling(
        recorder,
        rounds,
        key=key,
        group="saturation",
        capacity_tokens_per_s=plan.capacity_tokens_per_s,
        **params,
    )
    decode_ms = 1000 * plan.decode_s_per_token
    recorder.group(
        "saturation", batch_capacity=plan.batch_capacity, decode_ms_per_token=decode_ms, **params
    )(
        f"{key}.capacity_tokens_per_s",
        [plan.capacity_tokens_per_s],
        f"engine capacity: {plan.description}",
        "tokens/s",
        "none",
    )
    recorder.group("saturation", **params)(
        f"{key}.capacity_requests_per_s",
        [
            plan.batch_capacity
            / (plan.decode_s_per_token * r.adapter.sampled_tokens / r.adapter.model_turns)
            for r in rounds
        ],
        "engine capacity in requests/s at this workload's reply length",
        "requests/s",
        "none",
    )
    recorder.group("saturation", batch_capacity=plan.batch_capacity, **params)(
        f"{key}.engine_peak_running",
        [float(peak)],
        "engine peak running sequences",
        "sequences",
        "none",
    )
    summary = f"adapter / ceiling tokens/s, {plan.description} (goal >= 0.95)"
    record_summary(recorder, key, rounds, summary, **params)
