"""Hypothesis budgets: fast and deterministic by default, ten times larger under ``long``, one
generated example under ``smoke``."""

from __future__ import annotations

import pytest
from hypothesis import settings as hypothesis_settings

from miles_verifiers_conformance.budget import PROFILE_ENV, PROFILES, budget


@pytest.mark.clause("SUITE-4")
def test_ci_profile_is_small_and_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILE_ENV, raising=False)

    settings = budget(ci=3)

    assert settings.max_examples == 3
    assert settings.derandomize is True


@pytest.mark.clause("SUITE-4")
def test_long_profile_explores_more_and_shrinks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_ENV, "long")

    settings = budget(ci=3)

    assert settings.max_examples == 30
    assert settings.derandomize is False
    assert "shrink" in {phase.name for phase in settings.phases}


@pytest.mark.clause("SUITE-4")
def test_smoke_profile_runs_one_generated_example_deterministically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PROFILE_ENV, "smoke")

    settings = budget(ci=3)

    assert settings.max_examples == 1
    assert settings.derandomize is True


@pytest.mark.clause("SUITE-4")
@pytest.mark.parametrize("name", PROFILES)
def test_each_budget_profile_is_a_registered_hypothesis_profile(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(PROFILE_ENV, name)
    registered = hypothesis_settings.get_profile(f"conformance-{name}")

    settings = budget(ci=3)

    assert settings.derandomize is registered.derandomize
    assert settings.phases == registered.phases
