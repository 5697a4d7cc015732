from __future__ import annotations

from pathlib import Path

from benchmarks.compare import compare_results, main
from benchmarks.results import BenchResult, make_figure, write_result


def _result(**figures: tuple[list[float], str]) -> BenchResult:
    return BenchResult(
        created="2026-01-01T00:00:00+00:00",
        machine={"cpu": "x", "cores": 2, "git": "abc"},
        versions={},
        figures=[
            make_figure(k, s, group="g", label=k, unit="u", better=b)
            for k, (s, b) in figures.items()
        ],
    )


def test_ratio_of_single_rounds_is_new_over_old() -> None:
    changes, _, _ = compare_results(_result(a=([10.0], "higher")), _result(a=([15.0], "higher")))
    assert changes[0].ratio == 1.5


def test_ratio_is_the_median_of_per_round_ratios_not_the_ratio_of_medians() -> None:
    # Rounds pair by position: 1/1, 2/1, 3/3 -> median 1.0; the medians' ratio would be 2.0.
    changes, _, _ = compare_results(
        _result(a=([1.0, 1.0, 3.0], "higher")), _result(a=([1.0, 2.0, 3.0], "higher"))
    )
    assert (changes[0].ratio, changes[0].paired_rounds) == (1.0, 3)


def test_rounds_only_one_run_has_are_left_out_of_the_ratio() -> None:
    changes, _, _ = compare_results(
        _result(a=([10.0, 10.0], "higher")), _result(a=([20.0, 20.0, 1000.0], "higher"))
    )
    assert (changes[0].ratio, changes[0].paired_rounds) == (2.0, 2)


def test_a_zero_old_round_gives_no_ratio() -> None:
    changes, _, _ = compare_results(_result(a=([0.0], "higher")), _result(a=([5.0], "higher")))
    assert (changes[0].ratio, changes[0].verdict) == (None, "n/a")


def test_higher_is_better_figure_that_rose_clear_of_noise_is_better() -> None:
    changes, _, _ = compare_results(
        _result(a=([9.0, 10.0], "higher")), _result(a=([15.0, 16.0], "higher"))
    )
    assert changes[0].verdict == "better"


def test_lower_is_better_figure_that_rose_clear_of_noise_is_worse() -> None:
    changes, _, _ = compare_results(
        _result(a=([9.0, 10.0], "lower")), _result(a=([15.0, 16.0], "lower"))
    )
    assert changes[0].verdict == "worse"


def test_overlapping_ranges_are_reported_as_noise() -> None:
    changes, _, _ = compare_results(
        _result(a=([8.0, 12.0], "higher")), _result(a=([11.0, 13.0], "higher"))
    )
    assert changes[0].verdict == "noise"


def test_figures_in_only_one_run_are_listed_apart() -> None:
    _, removed, added = compare_results(
        _result(old=([1.0], "higher")), _result(new=([1.0], "higher"))
    )
    assert (removed, added) == (["old"], ["new"])


def test_cli_prints_a_markdown_row_per_shared_figure(tmp_path: Path, capsys) -> None:
    write_result(_result(a=([10.0], "higher")), tmp_path / "old.json")
    write_result(_result(a=([20.0], "higher")), tmp_path / "new.json")
    assert main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 0
    assert "| a | `a` | 10.0 | 20.0 | u | 2.000 | 1 | better |" in capsys.readouterr().out


def test_cli_reports_a_missing_file_and_exits_2(tmp_path: Path, capsys) -> None:
    write_result(_result(a=([10.0], "higher")), tmp_path / "old.json")
    assert main([str(tmp_path / "old.json"), str(tmp_path / "missing.json")]) == 2
    assert "missing.json does not exist" in capsys.readouterr().err


def test_change_within_three_percent_is_the_same() -> None:
    changes, _, _ = compare_results(_result(a=([100.0], "higher")), _result(a=([102.0], "higher")))
    assert changes[0].verdict == "same"


def test_cli_names_the_commit_of_each_run_and_flags_uncommitted_changes(
    tmp_path: Path, capsys
) -> None:
    old, new = _result(a=([10.0], "higher")), _result(a=([20.0], "higher"))
    old.machine.update(commit="1" * 40, dirty=False)
    new.machine.update(commit="2" * 40, dirty=True)
    write_result(old, tmp_path / "old.json")
    write_result(new, tmp_path / "new.json")
    main([str(tmp_path / "old.json"), str(tmp_path / "new.json")])
    out = capsys.readouterr().out
    assert f"commit {'1' * 40}," in out
    assert f"commit {'2' * 40} (uncommitted changes)" in out
