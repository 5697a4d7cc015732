"""What counts as the adapter's bounded-replacement error in the fault clauses."""

from __future__ import annotations

import pytest

from miles_verifiers_conformance.miles_side import CallDeadlineExceeded
from miles_verifiers_conformance.test_faults import is_replacement_error


class OutOfReplacements(RuntimeError):
    pass


@pytest.mark.clause("SUITE-1")
def test_an_error_chained_from_the_replacement_error_counts() -> None:
    try:
        try:
            raise OutOfReplacements("budget spent")
        except OutOfReplacements as cause:
            raise RuntimeError("rollout failed") from cause
    except RuntimeError as error:
        assert is_replacement_error(error, OutOfReplacements)


@pytest.mark.clause("SUITE-1")
def test_a_deadline_overrun_never_counts_even_for_a_catch_all_class() -> None:
    hang = CallDeadlineExceeded("the rollout call did not return within 120 s")

    assert not is_replacement_error(hang, Exception)
