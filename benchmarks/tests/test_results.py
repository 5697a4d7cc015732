from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.results import BenchResult, ResultFileError, load_result, make_figure, write_result


def _result(*figures) -> BenchResult:
    return BenchResult(
        created="2026-01-01T00:00:00+00:00",
        machine={"cpu": "x", "cores": 2},
        versions={},
        figures=list(figures),
    )


def test_figure_summarises_samples_as_min_median_max() -> None:
    figure = make_figure("k", [3.0, 1.0, 2.0, 10.0], group="g", label="l", unit="u")
    assert (figure.min, figure.median, figure.max) == (1.0, 2.5, 10.0)


def test_figure_without_samples_is_refused_with_its_key() -> None:
    with pytest.raises(ValueError, match="'empty' has no samples"):
        make_figure("empty", [], group="g", label="l", unit="u")


def test_result_refuses_two_figures_with_one_key() -> None:
    a = make_figure("same", [1.0], group="g", label="a", unit="u")
    with pytest.raises(ValueError, match="'same' appears twice"):
        _result(a, a)


def test_result_round_trips_through_its_file(tmp_path: Path) -> None:
    original = _result(
        make_figure("k", [1.0, 2.0], group="g", label="l", unit="u", params={"concurrency": 4})
    )
    write_result(original, tmp_path / "r.json")
    assert load_result(tmp_path / "r.json") == original


def test_loading_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="nope.json does not exist"):
        load_result(tmp_path / "nope.json")


def test_loading_a_file_of_another_schema_says_which(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ResultFileError, match="schema_version=99"):
        load_result(path)


def test_loading_non_json_says_it_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("not json")
    with pytest.raises(ResultFileError, match="is not JSON"):
        load_result(path)
