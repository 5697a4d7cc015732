"""How the transport splits its connection budget over several small HTTP pools."""

from __future__ import annotations

import pytest

from miles_verifiers.engine.client import CONNECTIONS_PER_LANE, _lane_sizes


@pytest.mark.parametrize("budget", [1, 4, 31, 32, 33, 70, 512, 1000])
def test_lanes_add_up_to_the_connection_budget(budget: int) -> None:
    assert sum(_lane_sizes(budget)) == budget


@pytest.mark.parametrize("budget", [1, 33, 512, 1000])
def test_no_lane_holds_more_than_the_per_lane_cap(budget: int) -> None:
    assert max(_lane_sizes(budget)) <= CONNECTIONS_PER_LANE


def test_a_small_budget_is_one_pool() -> None:
    assert _lane_sizes(4) == [4]


def test_a_large_budget_is_split_into_full_lanes_and_a_remainder() -> None:
    budget = 2 * CONNECTIONS_PER_LANE + 5
    assert _lane_sizes(budget) == [CONNECTIONS_PER_LANE, CONNECTIONS_PER_LANE, 5]
