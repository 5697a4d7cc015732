"""SessionLedger: a bounded, least-recently-used memory of sessions and their prefix-cache use."""

from __future__ import annotations

import pytest

from miles_verifiers.episodes.transport.sessions import PrefixCacheUsage, SessionLedger


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


def test_prefix_cache_usage_sums_a_sessions_answers() -> None:
    ledger = SessionLedger(4)
    ledger.add("s", {"prompt_tokens": 10, "cached_tokens": 0})
    ledger.add("s", {"prompt_tokens": 25, "cached_tokens": 10})

    assert ledger.get("s") == PrefixCacheUsage(cached_tokens=10, prompt_tokens=35)
    assert ledger.get("other") is None


def test_prefix_cache_usage_ignores_missing_or_odd_counts() -> None:
    ledger = SessionLedger(4)
    ledger.add("s", {"prompt_tokens": True, "cached_tokens": -3})
    ledger.add("s", {})

    assert ledger.get("s") == PrefixCacheUsage(cached_tokens=0, prompt_tokens=0)


def test_prefix_cache_usage_forgets_the_least_recent_session_past_capacity() -> None:
    ledger = SessionLedger(1)
    ledger.add("a", {"prompt_tokens": 1})
    ledger.add("b", {"prompt_tokens": 2})

    assert ledger.get("a") is None
    assert ledger.get("b") == PrefixCacheUsage(prompt_tokens=2)


def test_a_recorded_session_has_no_usage_until_answered_and_recording_keeps_it() -> None:
    ledger = SessionLedger(4)
    ledger.record("s")
    assert ledger.get("s") is None
    ledger.add("s", {"prompt_tokens": 3})
    ledger.record("s")

    assert ledger.get("s") == PrefixCacheUsage(prompt_tokens=3)
