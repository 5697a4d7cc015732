"""The task-stream checks split by clause: which tasks a rollout got, apart from their order."""

from __future__ import annotations

import pytest

from miles_verifiers_conformance.order import (
    check_no_dropped_task_returned,
    check_rollout_order,
    check_rollout_task_sets,
)

PROMPTS = ["a", "b", "c"]


@pytest.mark.clause("SUITE-1")
def test_groups_reversed_within_a_rollout_keep_its_task_set() -> None:
    check_rollout_task_sets([["b", "a"], ["a", "c"]], PROMPTS, set(), shuffled=False)


@pytest.mark.clause("SUITE-1")
def test_groups_reversed_within_a_rollout_break_the_order() -> None:
    with pytest.raises(AssertionError, match="rollout 0"):
        check_rollout_order([["b", "a"], ["c", "a"]], PROMPTS, set())


@pytest.mark.clause("SUITE-1")
def test_a_skipped_task_breaks_the_task_set() -> None:
    with pytest.raises(AssertionError, match="rollout 0"):
        check_rollout_task_sets([["a", "c"]], PROMPTS, set(), shuffled=False)


@pytest.mark.clause("SUITE-1")
def test_a_shuffled_rollout_may_straddle_two_epochs_in_any_order() -> None:
    check_rollout_task_sets([["c", "b"], ["a", "b"], ["c", "a"]], PROMPTS, set(), shuffled=True)


@pytest.mark.clause("SUITE-1")
def test_a_shuffled_epoch_that_skips_a_task_is_refused() -> None:
    with pytest.raises(AssertionError, match="starts a new epoch"):
        check_rollout_task_sets([["a", "b"], ["a", "b"]], PROMPTS, set(), shuffled=True)


@pytest.mark.clause("SUITE-1")
def test_a_shuffled_epoch_that_repeats_a_task_is_refused() -> None:
    with pytest.raises(AssertionError, match="repeats"):
        check_rollout_task_sets([["a", "a"]], PROMPTS, set(), shuffled=True)


@pytest.mark.clause("SUITE-1")
def test_a_returned_dropped_task_is_named() -> None:
    with pytest.raises(AssertionError, match="'b'"):
        check_no_dropped_task_returned([["a", "b"]], {"b"})
