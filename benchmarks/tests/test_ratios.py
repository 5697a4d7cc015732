from __future__ import annotations

import pytest

from benchmarks.ratios import median_round_ratio, round_ratios


def test_each_round_is_divided_by_the_same_round_of_the_other_series() -> None:
    assert round_ratios([2.0, 9.0, 4.0], [1.0, 3.0, 4.0]) == [2.0, 3.0, 1.0]


def test_ratio_is_the_median_of_per_round_ratios_not_the_ratio_of_medians() -> None:
    # Per round: 1/1, 2/1, 3/3 -> ratios 1, 2, 1, median 1. Ratio of medians: 2 / 1 = 2.
    assert median_round_ratio([1.0, 2.0, 3.0], [1.0, 1.0, 3.0]) == 1.0


def test_series_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="got 3 and 2"):
        round_ratios([1.0, 2.0, 3.0], [1.0, 2.0])


def test_a_zero_round_in_the_denominator_is_refused() -> None:
    with pytest.raises(ValueError, match="is 0"):
        round_ratios([1.0, 2.0], [1.0, 0.0])


def test_median_of_no_rounds_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one round"):
        median_round_ratio([], [])
