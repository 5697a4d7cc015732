"""SessionLedger: a bounded, least-recently-used memory of seen sessions."""

from __future__ import annotations

import pytest

from miles_verifiers._transport.sessions import SessionLedger


def test_a_recorded_session_is_remembered() -> None:
    ledger = SessionLedger(2)
    ledger.record("a")
    assert "a" in ledger
    assert "b" not in ledger


def test_the_least_recent_session_is_evicted_past_capacity() -> None:
    ledger = SessionLedger(2)
    for session in ("a", "b", "c"):
        ledger.record(session)
    assert "a" not in ledger
    assert len(ledger) == 2


def test_recording_again_refreshes_recency() -> None:
    ledger = SessionLedger(2)
    ledger.record("a")
    ledger.record("b")
    ledger.record("a")
    ledger.record("c")
    assert "a" in ledger
    assert "b" not in ledger


def test_checking_membership_does_not_refresh_recency() -> None:
    ledger = SessionLedger(2)
    ledger.record("a")
    ledger.record("b")
    assert "a" in ledger
    ledger.record("c")
    assert "a" not in ledger


def test_size_never_exceeds_capacity() -> None:
    ledger = SessionLedger(3)
    for n in range(100):
        ledger.record(str(n))
    assert len(ledger) == 3


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        SessionLedger(0)
