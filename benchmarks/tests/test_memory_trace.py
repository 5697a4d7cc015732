from __future__ import annotations

import json

import pytest

from benchmarks.memory_probe import parse_trace


def _lines(rss_after_calls: list[float]) -> list[str]:
    # The probe's clock starts at 1.0 s; its wall clock reads 1000.0 + elapsed.
    lines = [
        json.dumps({"stage": "start", "elapsed_s": 1.0, "rss_mib": 50.0, "peak_rss_mib": 50.0}),
        json.dumps(
            {"stage": "constructed", "elapsed_s": 1.5, "rss_mib": 80.0, "peak_rss_mib": 80.0}
        ),
    ]
    lines += [
        json.dumps(
            {
                "stage": "call",
                "call": i,
                "elapsed_s": 2.0 + i,
                "unix_time": 1002.0 + i,
                "rollouts": 100 * (i + 1),
                "rss_mib": rss,
                "peak_rss_mib": rss + 5,
            }
        )
        for i, rss in enumerate(rss_after_calls)
    ]
    return lines


def test_flat_memory_has_no_growth() -> None:
    assert parse_trace(_lines([120.0, 130.0, 130.0, 130.0])).growth_mib_per_1k_rollouts() == 0.0


def test_growth_is_the_slope_per_thousand_rollouts_after_the_first_call() -> None:
    # 1 MiB more per call of 100 rollouts after the first: 10 MiB per 1,000 rollouts.
    trace = parse_trace(_lines([100.0, 150.0, 151.0, 152.0, 153.0]))
    assert trace.growth_mib_per_1k_rollouts() == pytest.approx(10.0)


def test_peak_is_the_highest_high_water_mark_seen() -> None:
    assert parse_trace(_lines([100.0, 140.0, 120.0])).peak_mib == 145.0


def test_incomplete_output_is_refused() -> None:
    with pytest.raises(ValueError, match="incomplete"):
        parse_trace(_lines([])[:1])


def test_cold_start_times_come_from_the_probe_clock() -> None:
    trace = parse_trace(_lines([100.0, 110.0]))
    assert (trace.construct_s, trace.first_call_s) == (0.5, 0.5)


def test_cold_start_is_construction_plus_first_call() -> None:
    assert parse_trace(_lines([100.0, 110.0])).construct_and_first_call_s == 1.0


def test_time_from_spawn_runs_to_the_end_of_the_first_call() -> None:
    # Spawned at 999.25 s; the first call ended at 1002.0 s: interpreter start-up included.
    trace = parse_trace(_lines([100.0, 110.0]), spawned_at=999.25)
    assert trace.spawn_to_first_call_s == 2.75


def test_without_a_spawn_time_there_is_no_time_from_spawn() -> None:
    assert parse_trace(_lines([100.0, 110.0])).spawn_to_first_call_s is None
