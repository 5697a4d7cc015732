"""The loopback engine on its own, at zero latency: the ceiling every other CPU figure sits
under. If the adapter's end-to-end request rate is well below these, the engine is not what
limits it."""

from __future__ import annotations

from benchmarks.loadgen import DirectRequest, LoadResult, replay_sync
from benchmarks.procstat import process_cpu_seconds, self_cpu_seconds
from benchmarks.recorder import Recorder
from benchmarks.rounds import measured_rounds
from benchmarks.scale import Scale

OUTPUT_TOKENS = 16


def test_engine_zero_latency_throughput(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine, prompts
) -> None:
    url, pid = zero_latency_engine
    workload = [
        DirectRequest(prompts[i % len(prompts)], OUTPUT_TOKENS)
        for i in range(scale.engine_requests)
    ]

    def one_round() -> tuple[LoadResult, float, float]:
        engine_cpu, client_cpu = process_cpu_seconds(pid), self_cpu_seconds()
        result = replay_sync(url, workload, concurrency=scale.engine_concurrency)
        return result, process_cpu_seconds(pid) - engine_cpu, self_cpu_seconds() - client_cpu

    rounds = measured_rounds(benchmark, one_round, rounds=scale.rounds, warmup_rounds=1)
    measured = rounds[-scale.rounds :]
    record = recorder.group(
        "engine", concurrency=scale.engine_concurrency, output_tokens=OUTPUT_TOKENS
    )
    record.each("engine", [
        ("requests_per_s", [r.requests_per_s for r, _, _ in measured],
         "requests/s (direct load generator)", "requests/s", "higher"),
        ("output_tokens_per_s", [r.output_tokens_per_s for r, _, _ in measured],
         "output tokens/s (direct load generator)", "tokens/s", "higher"),
        ("cpu_ms_per_request", [1000 * cpu / r.requests for r, cpu, _ in measured],
         "engine process CPU per request", "ms", "lower"),
        ("requests_per_core_s", [r.requests / cpu for r, cpu, _ in measured if cpu > 0] or [0.0],
         "engine capacity: requests per CPU-second", "requests/s/core", "higher"),
        ("loadgen_cpu_ms_per_request", [1000 * cpu / r.requests for r, _, cpu in measured],
         "load generator CPU per request (aiohttp client)", "ms", "lower"),
    ])  # fmt: skip
