"""The test kit's port of how Miles' manager flattens a train output (a level at a time)."""

from __future__ import annotations

import pytest

from miles_verifiers_testkit.miles import flatten


def test_groups_of_samples_flatten_in_order():
    assert flatten([["a", "b"], ["c"]]) == ["a", "b", "c"]


def test_groups_of_rollout_lists_flatten_in_order():
    assert flatten([[["a"], ["b", "c"]], [["d"], ["e"]]]) == ["a", "b", "c", "d", "e"]


def test_a_flat_group_before_a_nested_one_is_refused_as_miles_would_train_on_a_list():
    with pytest.raises(ValueError, match="item 2 is still a list"):
        flatten([["a", "b"], [["c", "d"], ["e"]]])


def test_a_nested_group_before_a_flat_one_is_refused_as_miles_cannot_flatten_it():
    with pytest.raises(ValueError, match="nesting level 2: item 2 is not a list"):
        flatten([[["a"], ["b", "c"]], ["d", "e"]])
