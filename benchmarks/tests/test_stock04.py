from __future__ import annotations

import pytest

from benchmarks.recorder import Recorder
from benchmarks.report import markdown_table
from benchmarks.results import BenchResult
from benchmarks.stock04 import (
    LOOP,
    LOOP_X2,
    StockRound,
    record_stock04,
    split_cpu,
    stock04_goals,
)
from benchmarks.verifiers04_loop import sglang_payload


def _round(wall_s: float, *, trainer: float = 0.0, process: float = 0.1, sub: float = 3.0):
    return StockRound(
        wall_s=wall_s,
        episodes=4,
        ok=4,
        trainer_cpu_s=trainer,
        process_cpu_s=process,
        subprocess_cpu_s=sub,
    )


def _result(recorder: Recorder) -> BenchResult:
    recorder.machine = {"cpu": "x", "cores": 2, "git": "abc"}
    return recorder.result()


def test_long_lived_processes_count_their_own_cpu_and_what_they_reaped_counts_as_subprocesses():
    start = {10: (5.0, 1.0), 11: (2.0, 0.0)}
    end = {10: (5.5, 4.0), 11: (2.25, 0.5)}
    assert split_cpu(start, end) == pytest.approx((0.75, 3.5))


def test_a_process_born_during_the_round_counts_whole_as_a_subprocess():
    assert split_cpu({10: (1.0, 0.0)}, {10: (1.0, 0.0), 12: (0.75, 0.25)}) == (0.0, 1.0)


def test_a_process_gone_during_the_round_is_not_counted_twice():
    # Pid 12 had 0.5 s at start; its parent 10 reaped it whole (2.0 s) during the round.
    start = {10: (1.0, 0.0), 12: (0.5, 0.0)}
    end = {10: (1.0, 2.0)}
    assert split_cpu(start, end) == pytest.approx((0.0, 1.5))


def test_throughput_and_cpu_are_ratios_of_each_worker_count_to_the_loop_round_by_round():
    recorder = Recorder()
    record_stock04(
        recorder,
        {
            LOOP: [_round(4.0), _round(2.0)],
            "w1": [_round(4.0, trainer=0.04), _round(4.0)],
            "w2": [_round(2.0), _round(1.0)],
        },
    )
    figures = _result(recorder).by_key()
    assert figures["stock04.w1.throughput_over_loop"].samples == [1.0, 0.5]
    assert figures["stock04.w2.throughput_over_loop"].samples == [2.0, 2.0]
    assert figures["stock04.w1.cpu_over_loop"].samples == pytest.approx([3.14 / 3.1, 1.0])
    assert figures["stock04.w1.trainer_share"].samples == pytest.approx([0.04 / 3.14, 0.0])
    assert figures["stock04.verifiers-loop.subprocess_share"].samples == pytest.approx(
        [3.0 / 3.1] * 2
    )


def test_the_goal_is_met_at_095_of_the_loop_and_marked_per_worker_count():
    recorder = Recorder()
    record_stock04(
        recorder,
        {
            LOOP: [_round(1.0)],
            LOOP_X2: [_round(1.0)],
            "w1": [_round(1.0 / 0.96)],
            "w2": [_round(1.0 / 0.9)],
        },
    )
    rows = {row.figure: row.status for row in stock04_goals(_result(recorder))}
    assert rows == {
        "stock04.w1.throughput_over_loop": "met",
        "stock04.w2.throughput_over_loop": "not met",
        "stock04.w2.throughput_over_loop_x2": "not met",
    }


def test_an_unavailable_row_says_why_in_the_goal_table():
    recorder = Recorder(settings={"stock04": "unavailable: no uv beside python"})
    table = markdown_table(_result(recorder))
    assert "unavailable: no uv beside python" in table


def test_a_run_without_the_row_has_no_row_goals():
    assert stock04_goals(_result(Recorder())) == []


def test_the_loop_sends_sglang_generate_with_renamed_sampling_and_log_probs():
    body = {
        "model": "m",
        "token_ids": [1, 2],
        "sampling_params": {"max_tokens": 8, "temperature": 1.0, "logprobs": 1, "seed": 3},
    }
    assert sglang_payload(body, "r0") == {
        "input_ids": [1, 2],
        "sampling_params": {"max_new_tokens": 8, "temperature": 1.0, "sampling_seed": 3},
        "return_logprob": True,
        "rid": "r0",
    }
