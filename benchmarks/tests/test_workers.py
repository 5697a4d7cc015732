from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchmarks.recorder import Recorder
from benchmarks.report import markdown_table
from benchmarks.results import BenchResult
from benchmarks.workers import (
    IN_PROCESS,
    VariantSetup,
    evaluate_goals,
    project,
    projection_table,
    record_generation_point,
    record_worker_point,
    record_worker_saturation,
    unavailable_settings,
    variants,
    worker_settings,
    workers_of,
)


@dataclass(frozen=True)
class Call:
    wall_s: float
    rollouts: int
    model_turns: int
    sampled_tokens: int
    trainer_cpu_s: float
    env_cpu_s: float


def _result(recorder: Recorder) -> BenchResult:
    recorder.machine = {"cpu": "x", "cores": 2, "git": "abc"}
    return recorder.result()


def test_variants_put_in_process_first_then_one_per_worker_count() -> None:
    assert variants((1, 2, 4)) == [IN_PROCESS, "w1", "w2", "w4"]
    assert [workers_of(v) for v in variants((1, 2))] == [None, 1, 2]


@pytest.mark.parametrize("bad", ["w0", "x2", "w", "workers"])
def test_an_unknown_variant_name_is_refused_with_the_accepted_forms(bad: str) -> None:
    with pytest.raises(ValueError, match="in-process"):
        workers_of(bad)


def test_in_process_needs_no_settings() -> None:
    assert worker_settings(IN_PROCESS) == VariantSetup(IN_PROCESS)


def test_a_worker_variant_is_built_with_the_worker_settings_or_says_why_not() -> None:
    from miles_verifiers import AdapterSettings

    setup = worker_settings("w2")

    if "episode_workers" in AdapterSettings.model_fields:
        assert setup.unavailable is None and setup.settings.episode_workers == 2
    else:
        assert setup.settings is None
        assert (
            setup.unavailable.startswith("unavailable: ") and "episode_workers" in setup.unavailable
        )


def test_unavailable_variants_become_result_settings() -> None:
    setups = {
        IN_PROCESS: VariantSetup(IN_PROCESS),
        "w2": VariantSetup("w2", unavailable="unavailable: no workers"),
    }

    assert unavailable_settings(setups) == {"workers.w2": "unavailable: no workers"}


def test_worker_point_figures_are_per_call_rates_and_per_turn_cpu() -> None:
    recorder = Recorder()
    calls = {
        IN_PROCESS: [Call(2.0, 100, 200, 2000, 2.6, 0.4), Call(4.0, 100, 200, 2000, 2.6, 0.4)],
        "w1": [Call(2.5, 100, 200, 2000, 0.2, 3.0), Call(2.0, 100, 200, 2000, 0.2, 3.0)],
    }

    record_worker_point(recorder, "mv-arith", calls)
    figures = _result(recorder).by_key()

    assert figures["workers.mv-arith.in-process.rollouts_per_s"].samples == [50.0, 25.0]
    assert figures["workers.mv-arith.in-process.model_turns_per_s"].samples == [100.0, 50.0]
    assert figures["workers.mv-arith.in-process.trainer_cpu_ms_per_turn"].samples == [13.0, 13.0]
    assert figures["workers.mv-arith.w1.worker_cpu_ms_per_turn"].samples == [15.0, 15.0]
    # Round by round: 40/50 and 50/25, median of the two.
    ratio = figures["workers.mv-arith.w1.throughput_over_in_process"]
    assert ratio.samples == [0.8, 2.0] and ratio.median == pytest.approx(1.4)
    assert figures["workers.mv-arith.w1.rollouts_per_s"].params == {
        "taskset": "mv-arith",
        "variant": "w1",
        "workers": 1,
    }
    assert "workers.mv-arith.in-process.throughput_over_in_process" not in figures


def test_the_0_4_row_is_its_own_figures_and_its_per_round_ratios_to_0_2() -> None:
    recorder = Recorder()
    calls02 = [Call(2.0, 100, 200, 2000, 0.2, 3.0), Call(4.0, 100, 200, 2000, 0.4, 3.0)]
    calls04 = [Call(4.0, 100, 200, 2000, 0.4, 3.0), Call(4.0, 100, 200, 2000, 0.4, 3.0)]

    record_generation_point(recorder, calls02, calls04)
    figures = _result(recorder).by_key()

    assert figures["workers.mv-arith04.w2.rollouts_per_s"].samples == [25.0, 25.0]
    assert figures["workers.mv-arith04.w2.throughput_over_0_2"].samples == [0.5, 1.0]
    assert figures["workers.mv-arith04.w2.trainer_cpu_over_0_2"].samples == [2.0, 1.0]


def test_worker_saturation_is_the_per_round_ratio_to_the_ceiling() -> None:
    recorder = Recorder()
    rounds = {IN_PROCESS: [(Call(2.0, 10, 10, 1000, 0.1, 0.0), 1000.0)]}

    record_worker_saturation(recorder, "rl-rate-long", "~1 s", 0.005, rounds)
    figures = _result(recorder).by_key()

    assert figures["workers_saturation.rl-rate-long.in-process.adapter_over_ceiling"].samples == [
        0.5
    ]
    assert figures["workers_saturation.rl-rate-long.in-process.seconds_per_request"].samples == [
        0.5
    ]


def test_goals_are_met_not_met_or_unavailable_with_the_recorded_reason() -> None:
    recorder = Recorder(
        settings={"workers.w2": "unavailable: no workers", "workers.w4": "unavailable: no workers"}
    )
    calls = {
        IN_PROCESS: [Call(1.0, 100, 100, 1000, 1.3, 0.0)],
        "w1": [Call(1.0, 100, 100, 1000, 1.2, 0.0)],
    }
    record_worker_point(recorder, "mv-arith", calls)
    record_worker_saturation(
        recorder, "rl-rate-short", "~1 s", 0.1, {"w1": [(Call(1.0, 10, 10, 960, 0.1, 0.0), 1000.0)]}
    )

    rows = {row.figure: row for row in evaluate_goals(_result(recorder))}

    assert rows["workers.mv-arith.w1.throughput_over_in_process"].status == "met"
    assert rows["workers.mv-arith.w2.throughput_over_in_process"].status == (
        "unavailable: no workers"
    )
    assert rows["workers.mv-arith.w4.trainer_cpu_ms_per_turn"].status == "unavailable: no workers"
    assert rows["workers_saturation.rl-rate-short.w1.adapter_over_ceiling"].status == "met"


def test_a_goal_missed_is_marked_not_met() -> None:
    recorder = Recorder()
    calls = {
        IN_PROCESS: [Call(1.0, 100, 100, 1000, 1.3, 0.0)],
        "w2": [Call(1.0, 120, 100, 1000, 0.05, 0.0)],
    }
    record_worker_point(recorder, "mv-arith", calls)

    rows = {row.figure: row for row in evaluate_goals(_result(recorder))}

    assert rows["workers.mv-arith.w2.throughput_over_in_process"].status == "not met"
    assert rows["workers.mv-arith.w2.trainer_cpu_ms_per_turn"].status == "met"


def test_the_markdown_table_carries_the_worker_figures_and_the_goals() -> None:
    recorder = Recorder(settings={"workers.w2": "unavailable: no workers"})
    calls = {
        IN_PROCESS: [Call(1.0, 100, 100, 1000, 1.3, 0.0)],
        "w1": [Call(1.0, 100, 100, 1000, 1.2, 0.0)],
    }
    record_worker_point(recorder, "mv-arith", calls)

    text = markdown_table(_result(recorder))

    assert "## Throughput and per-turn CPU against the episode-worker count" in text
    assert "| mv-arith: one worker no slower than in-process | 1.00 | >= 0.95 | met |" in text
    assert "unavailable: no workers" in text


def test_the_projection_sizes_workers_from_the_turn_rate_and_per_turn_cost() -> None:
    # 8 engines x 64 sequences at 1 s per request: 512 turns/s. 4 ms of worker CPU per turn is
    # 2.05 cores, 0.8 core per worker: 3 workers. 0.5 ms in the trainer is 0.26 of a core.
    p = project(
        engines=8,
        batch_per_engine=64,
        seconds_per_request=1.0,
        trainer_cpu_ms_per_turn=0.5,
        worker_cpu_ms_per_turn=4.0,
    )

    assert p.turns_per_s == 512
    assert p.trainer_cores == pytest.approx(0.256)
    assert p.workers == 3


def test_the_projection_needs_at_least_one_worker_and_valid_inputs() -> None:
    costs = {"batch_per_engine": 1, "trainer_cpu_ms_per_turn": 0.1, "worker_cpu_ms_per_turn": 0.0}
    assert project(engines=1, seconds_per_request=10.0, **costs).workers == 1
    with pytest.raises(ValueError, match="seconds_per_request"):
        project(engines=1, seconds_per_request=0.0, **costs)
    with pytest.raises(ValueError, match="core_budget"):
        project(engines=1, seconds_per_request=1.0, core_budget=1.5, **costs)


def test_the_projection_table_has_a_row_per_engine_count_and_duration() -> None:
    table = projection_table(
        (1, 8),
        (1.0, 4.0),
        batch_per_engine=64,
        trainer_cpu_ms_per_turn=0.5,
        worker_cpu_ms_per_turn=4.0,
    )

    lines = table.splitlines()
    assert len(lines) == 2 + 4
    assert lines[-1] == "| 8 | 4 | 128 | 0.06 | 1 |"


def test_the_projection_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.workers import main

    main(["--trainer-ms", "0.5", "--worker-ms", "4", "--engines", "8", "--seconds", "4"])

    assert capsys.readouterr().out.splitlines()[-1] == "| 8 | 4 | 128 | 0.06 | 1 |"


def test_the_projection_command_names_a_bad_list_flag() -> None:
    from benchmarks.workers import main

    with pytest.raises(SystemExit, match="--engines takes comma-separated numbers"):
        main(["--trainer-ms", "1", "--worker-ms", "1", "--engines", "eight"])
