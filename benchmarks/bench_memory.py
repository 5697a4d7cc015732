"""Peak memory of the trainer-side process over about 1,000 single-turn rollouts, and whether
it stays flat from call to call (no per-session state left behind). Measured in a fresh
subprocess from /proc/self/status, against the zero-latency engine."""

from __future__ import annotations

from benchmarks.memory_probe import MemoryTrace, run_probe
from benchmarks.recorder import Recorder
from benchmarks.scale import Scale

TASKSET = "mv-arith"
CONCURRENCY = 64


def test_memory_over_many_rollouts(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine
) -> None:
    url, _ = zero_latency_engine
    traces: list[MemoryTrace] = []

    def measure() -> None:
        traces.append(
            run_probe(
                url,
                taskset=TASKSET,
                rollouts=scale.memory_rollouts,
                calls=scale.memory_calls,
                concurrency=CONCURRENCY,
                max_response_tokens=scale.max_response_tokens,
            )
        )

    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    trace = traces[0]
    params = {
        "taskset": TASKSET,
        "rollouts": trace.total_rollouts,
        "calls": len(trace.after_calls_mib),
        "concurrency": CONCURRENCY,
    }
    recorder.record(
        "memory.peak_rss_mib",
        [trace.peak_mib],
        group="memory",
        label=f"peak RSS (VmHWM) over {trace.total_rollouts:,} rollouts",
        unit="MiB",
        better="lower",
        **params,
    )
    recorder.record(
        "memory.cold_construct_s",
        [trace.construct_s],
        group="memory",
        label="fresh process: building the rollout function (imports included)",
        unit="s",
        better="lower",
        **params,
    )
    recorder.record(
        "memory.cold_first_call_s",
        [trace.first_call_s],
        group="memory",
        label=f"fresh process: first training call ({trace.rollouts_after_calls[0]} rollouts)",
        unit="s",
        better="lower",
        **params,
    )
    recorder.record(
        "memory.rss_after_construction_mib",
        [trace.constructed_mib],
        group="memory",
        label="RSS once the rollout function is built",
        unit="MiB",
        better="lower",
        **params,
    )
    recorder.record(
        "memory.rss_after_calls_mib",
        list(trace.after_calls_mib),
        group="memory",
        label="RSS after each training call (min/median/max over calls)",
        unit="MiB",
        better="lower",
        **params,
    )
    recorder.record(
        "memory.rss_growth_mib_per_1k_rollouts",
        [trace.growth_mib_per_1k_rollouts()],
        group="memory",
        label="RSS growth per 1,000 rollouts after the first call (flat: about 0)",
        unit="MiB",
        better="lower",
        **params,
    )


COLD_CONCURRENCY = 32


def test_cold_process_construction_and_first_call(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine
) -> None:
    """What a trainer pays once per start: each round is a fresh process (imports, tokenizers
    and renderer pools included) that builds the rollout function and makes one training call
    of ``cold_rollouts`` single-turn rollouts. Nothing is warm from an earlier round."""
    url, _ = zero_latency_engine
    traces: list[MemoryTrace] = []

    def one_round() -> None:
        traces.append(
            run_probe(
                url,
                taskset=TASKSET,
                rollouts=scale.cold_rollouts,
                calls=1,
                concurrency=COLD_CONCURRENCY,
                max_response_tokens=scale.max_response_tokens,
            )
        )

    benchmark.pedantic(one_round, rounds=scale.cold_rounds, iterations=1, warmup_rounds=0)
    rollouts = traces[0].total_rollouts
    params = {
        "taskset": TASKSET,
        "rollouts": rollouts,
        "concurrency": COLD_CONCURRENCY,
        "processes": len(traces),
    }
    what = f"fresh process, first call of {rollouts} rollouts"
    spawned = [t.spawn_to_first_call_s for t in traces if t.spawn_to_first_call_s is not None]
    figures = [
        ("construct_plus_first_call_s", [t.construct_and_first_call_s for t in traces], "s",
         "construction (imports included) + first call"),
        ("construct_s", [t.construct_s for t in traces], "s", "construction (imports included)"),
        ("first_call_s", [t.first_call_s for t in traces], "s", "first call"),
        ("spawn_to_first_call_s", spawned, "s",
         "from spawning the process (interpreter start-up included)"),
        ("peak_rss_mib", [t.peak_mib for t in traces], "MiB", "peak RSS (VmHWM)"),
    ]  # fmt: skip
    for name, values, unit, detail in figures:
        if values:  # a probe without a spawn time has no spawn-to-first-call figure
            recorder.record(
                f"cold.{name}",
                values,
                group="cold",
                label=f"{what}: {detail}",
                unit=unit,
                better="lower",
                **params,
            )
