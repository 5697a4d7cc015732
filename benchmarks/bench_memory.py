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
