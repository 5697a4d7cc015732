"""Peak memory of the trainer-side process over about 1,000 single-turn rollouts, and whether
it stays flat from call to call (no per-session state left behind). Measured in a fresh
subprocess from /proc/self/status, against the zero-latency engine."""

from __future__ import annotations

from benchmarks.memory_probe import MemoryTrace, run_probe
from benchmarks.recorder import Recorder
from benchmarks.rounds import measured_rounds
from benchmarks.scale import Scale

TASKSET = "mv-arith"
CONCURRENCY = 64
COLD_CONCURRENCY = 32


def _probes(
    benchmark, scale: Scale, url: str, *, rollouts: int, calls: int, concurrency: int, rounds: int
) -> list[MemoryTrace]:
    """One fresh probe process a round."""
    return measured_rounds(
        benchmark,
        lambda: run_probe(
            url,
            taskset=TASKSET,
            rollouts=rollouts,
            calls=calls,
            concurrency=concurrency,
            max_response_tokens=scale.max_response_tokens,
        ),
        rounds=rounds,
    )


def test_memory_over_many_rollouts(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine
) -> None:
    url, _ = zero_latency_engine
    (trace,) = _probes(
        benchmark,
        scale,
        url,
        rollouts=scale.memory_rollouts,
        calls=scale.memory_calls,
        concurrency=CONCURRENCY,
        rounds=1,
    )
    record = recorder.group(
        "memory",
        taskset=TASKSET,
        rollouts=trace.total_rollouts,
        calls=len(trace.after_calls_mib),
        concurrency=CONCURRENCY,
    )
    first_call = trace.rollouts_after_calls[0]
    record.each("memory", [
        ("peak_rss_mib", [trace.peak_mib],
         f"peak RSS (VmHWM) over {trace.total_rollouts:,} rollouts", "MiB", "lower"),
        ("cold_construct_s", [trace.construct_s],
         "fresh process: building the rollout function (imports included)", "s", "lower"),
        ("cold_first_call_s", [trace.first_call_s],
         f"fresh process: first training call ({first_call} rollouts)", "s", "lower"),
        ("rss_after_construction_mib", [trace.constructed_mib],
         "RSS once the rollout function is built", "MiB", "lower"),
        ("rss_after_calls_mib", list(trace.after_calls_mib),
         "RSS after each training call (min/median/max over calls)", "MiB", "lower"),
        ("rss_growth_mib_per_1k_rollouts", [trace.growth_mib_per_1k_rollouts()],
         "RSS growth per 1,000 rollouts after the first call (flat: about 0)", "MiB", "lower"),
    ])  # fmt: skip


def test_cold_process_construction_and_first_call(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine
) -> None:
    """What a trainer pays once per start: each round is a fresh process (imports, tokenizers
    and renderer pools included) that builds the rollout function and makes one training call
    of ``cold_rollouts`` single-turn rollouts. Nothing is warm from an earlier round."""
    url, _ = zero_latency_engine
    traces = _probes(
        benchmark,
        scale,
        url,
        rollouts=scale.cold_rollouts,
        calls=1,
        concurrency=COLD_CONCURRENCY,
        rounds=scale.cold_rounds,
    )
    rollouts = traces[0].total_rollouts
    record = recorder.group(
        "cold",
        taskset=TASKSET,
        rollouts=rollouts,
        concurrency=COLD_CONCURRENCY,
        processes=len(traces),
    )
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
    what = f"fresh process, first call of {rollouts} rollouts"
    # A probe without a spawn time has no spawn-to-first-call figure.
    record.each(
        "cold",
        [
            (name, values, f"{what}: {detail}", unit, "lower")
            for name, values, unit, detail in figures
            if values
        ],
    )
