"""Does the adapter keep the engine saturated?

The engine runs a latency model (a decode speed per sequence and a continuous-batch
capacity), so it has a known capacity in output tokens/s. The adapter runs single-turn
rollouts at a concurrency above that capacity; then a direct load generator replays the very
same token workload (every request's prompt ids and output length) straight to the engine at
the same concurrency, as SGLang's serving benchmark would. That replay is the ceiling: the
adapter/ceiling ratio is what the adapter keeps of what the engine can give (goal: 0.95).
"""

from __future__ import annotations

from benchmarks.engine_proc import engine_stats, loopback_engine_process
from benchmarks.measure import CeilingRound, record_ceiling, replay_calls, run_rollout_point
from benchmarks.recorder import Recorder
from benchmarks.scale import RolloutPoint, SaturationPlan, Scale

TASKSET = "mv-arith"


def test_saturation_against_latency_model(
    benchmark, scale: Scale, recorder: Recorder, saturation_plan: SaturationPlan
) -> None:
    plan = saturation_plan
    point = RolloutPoint(
        concurrency=plan.concurrency, groups=plan.groups, samples_per_group=plan.samples_per_group
    )
    rounds: list[CeilingRound] = []
    peaks: list[int] = []

    def measure() -> None:
        with loopback_engine_process(
            prefill_s_per_token=plan.prefill_s_per_token,
            decode_s_per_token=plan.decode_s_per_token,
            max_running_requests=plan.batch_capacity,
        ) as (url, engine_pid):
            result = run_rollout_point(
                url,
                TASKSET,
                point,
                rounds=plan.rounds or scale.rounds,
                max_response_tokens=scale.max_response_tokens,
                exclude_pids=(engine_pid,),
            )
            rounds.extend(replay_calls(url, result.calls, plan.concurrency))
            peaks.append(int(engine_stats(url)["peak_running"]))

    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
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
    recorder.record(
        f"{key}.capacity_tokens_per_s",
        [plan.capacity_tokens_per_s],
        group="saturation",
        label=f"engine capacity: {plan.description}",
        unit="tokens/s",
        better="none",
        batch_capacity=plan.batch_capacity,
        decode_ms_per_token=1000 * plan.decode_s_per_token,
        **params,
    )
    recorder.record(
        f"{key}.capacity_requests_per_s",
        [
            plan.batch_capacity
            / (plan.decode_s_per_token * r.adapter.sampled_tokens / r.adapter.model_turns)
            for r in rounds
        ],
        group="saturation",
        label="engine capacity in requests/s at this workload's reply length",
        unit="requests/s",
        better="none",
        **params,
    )
    recorder.record(
        f"{key}.engine_peak_running",
        [float(p) for p in peaks],
        group="saturation",
        label="engine peak running sequences",
        unit="sequences",
        better="none",
        batch_capacity=plan.batch_capacity,
        **params,
    )
    recorder.record(
        f"summary.saturation.{plan.name}.adapter_over_ceiling",
        [r.ratio for r in rounds],
        group="summary",
        label=f"adapter / ceiling tokens/s, {plan.description} (goal >= 0.95)",
        unit="ratio",
        **params,
    )
