"""Hypothesis budgets: fast and deterministic by default, ten times larger under ``long``, one
generated example under ``smoke``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from miles_verifiers_conformance.budget import PROFILE_ENV, PROFILES, SMOKE_DEPLOYMENT, budget
from miles_verifiers_conformance.selftest.runner import plugin_site, run_pytest
from miles_verifiers_conformance.selftest.test_report import DEPLOYMENT_CONFTEST, DEPLOYMENT_TEST


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


def smoke_run_deployments(tmp_path: Path, test_source: str) -> tuple[list[str], str]:
    """Run ``test_source`` under the smoke profile: the deployments TRP-1 was decided under,
    and pytest's output."""
    plugin_site(tmp_path, DEPLOYMENT_CONFTEST, test_synthetic="import pytest" + test_source)
    run = run_pytest(
        ["test_synthetic.py", "--conformance-profile", "smoke"],
        cwd=tmp_path,
        report_base=tmp_path / "out" / "conformance",
    )
    (trp1,) = [c for c in run.report["clauses"] if c["id"] == "TRP-1"] if run.report else [None]
    assert trp1 is not None, run.output[-3000:]
    return [t["deployment"] for t in trp1["tests"]], run.output


@pytest.mark.clause("SUITE-4")
def test_the_smoke_profile_runs_the_deployment_matrix_on_the_production_reference_only(
    tmp_path: Path,
) -> None:
    deployments, output = smoke_run_deployments(tmp_path, DEPLOYMENT_TEST)

    assert deployments == [SMOKE_DEPLOYMENT]
    assert "1 deselected" in output


@pytest.mark.clause("SUITE-4")
def test_the_smoke_profile_leaves_out_the_reference_rows_that_move_the_episodes(
    tmp_path: Path,
) -> None:
    moved = DEPLOYMENT_TEST.replace(
        "def test_x(deployment_world)",
        "@pytest.mark.parametrize('episode_workers', ['in-process', '2-local-workers'])\n"
        "def test_x(deployment_world, episode_workers)",
    )

    deployments, output = smoke_run_deployments(tmp_path, moved)

    assert deployments == [SMOKE_DEPLOYMENT]
    assert "3 deselected" in output
