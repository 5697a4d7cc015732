from __future__ import annotations

from pathlib import Path

from benchmarks.report import format_number, markdown_table, plot_series, write_plot
from benchmarks.results import BenchResult, make_figure


def _result() -> BenchResult:
    figures = [
        make_figure(
            f"r.{c}",
            [c * 1.0, c * 1.1],
            group="rollout",
            label="rollouts/s",
            unit="rollouts/s",
            params={"series": "mv-arith", "concurrency": c},
        )
        for c in (32, 1)
    ]
    figures.append(
        make_figure("s.ratio", [0.97], group="saturation", label="adapter / ceiling", unit="ratio")
    )
    return BenchResult(
        created="2026-01-01T00:00:00+00:00",
        machine={"cpu": "x", "cores": 2, "git": "abc"},
        versions={"verifiers": "0.2.0"},
        figures=figures,
    )


def test_numbers_keep_three_significant_digits() -> None:
    assert [format_number(v) for v in (12345.6, 123.4, 12.34, 1.234, 0.01234)] == [
        "12,346",
        "123",
        "12.3",
        "1.23",
        "0.0123",
    ]


def test_table_has_a_section_per_group_in_reading_order() -> None:
    text = markdown_table(_result())
    assert text.index("## End-to-end rollouts") < text.index("## Saturation")


def test_table_row_shows_median_min_max_and_rounds() -> None:
    assert "| adapter / ceiling |  | **0.970** | 0.970 | 0.970 | ratio | 1 |" in markdown_table(
        _result()
    )


def test_plot_lines_are_ordered_by_concurrency() -> None:
    series = plot_series(_result())["rollouts/s"]["mv-arith"]
    assert [f.params["concurrency"] for f in series] == [1, 32]


def test_plot_is_written_as_png(tmp_path: Path) -> None:
    assert write_plot(_result(), tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_plot_without_concurrency_figures(tmp_path: Path) -> None:
    result = BenchResult(created="t", machine={}, versions={}, figures=[])
    assert not write_plot(result, tmp_path / "p.png")


def test_table_names_the_commit_measured_and_uncommitted_changes() -> None:
    result = _result()
    result.machine.update(commit="f" * 40, dirty=True)
    assert f"- commit measured: {'f' * 40} (with uncommitted changes)" in markdown_table(result)
