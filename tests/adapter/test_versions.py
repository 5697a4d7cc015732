"""The installed-version gate: supported ranges, and a reason for every rejection."""

from __future__ import annotations

import importlib.metadata

import pytest

from miles_verifiers.versions import (
    SUPPORTED_VERSIONS,
    UnsupportedVersionError,
    check_versions,
    installed_versions,
    require_supported_versions,
)

GOOD = {"verifiers": "0.2.0", "renderers": "0.1.10", "mcp": "1.30.0"}


def problems_for(**changes: str | None):
    return check_versions({**GOOD, **changes})


def test_the_pinned_stack_passes():
    assert check_versions(GOOD) == []


def test_this_environment_passes_the_gate():
    versions = require_supported_versions()
    assert versions["verifiers"] == "0.2.0"


@pytest.mark.parametrize("renderers", ["0.1.8", "0.1.9", "0.1.10", "0.1.10.post1"])
def test_renderers_in_range_pass(renderers):
    assert problems_for(renderers=renderers) == []


@pytest.mark.parametrize("renderers", ["0.1.11", "0.1.12", "0.1.13.dev17", "0.1.11.dev1", "0.2.0"])
def test_renderers_from_0_1_11_are_rejected_because_rendererpool_was_removed(renderers):
    [problem] = problems_for(renderers=renderers)
    assert problem.distribution == "renderers"
    assert "RendererPool" in problem.reason and "_maybe_offload" in problem.reason


@pytest.mark.parametrize("renderers", ["0.1.7", "0.1.8.dev43"])
def test_renderers_below_0_1_8_are_rejected(renderers):
    [problem] = problems_for(renderers=renderers)
    assert "older than 0.1.8" in problem.reason


@pytest.mark.parametrize("verifiers", ["0.2.1", "0.2.1rc1", "0.3.1", "0.4.0"])
def test_verifiers_past_0_2_0_is_rejected_with_the_reason(verifiers):
    [problem] = problems_for(verifiers=verifiers)
    assert "openai>=2.9" in problem.reason and "Environment" in problem.reason


@pytest.mark.parametrize("verifiers", ["0.1.9", "0.2.0.dev5"])
def test_verifiers_before_the_v1_api_is_rejected(verifiers):
    [problem] = problems_for(verifiers=verifiers)
    assert "V1 API" in problem.reason


def test_mcp_2_is_rejected_because_fastmcp_is_gone():
    [problem] = problems_for(mcp="2.0.0")
    assert "fastmcp" in problem.reason


def test_missing_distribution_is_a_problem_with_install_command():
    [problem] = problems_for(verifiers=None)
    assert problem.found is None
    assert problem.fix.startswith('pip install "verifiers>=0.2.0,<0.2.1"; or ')


def test_a_verifiers_this_process_cannot_run_names_the_worker_virtualenv_as_the_way_out():
    [problem] = problems_for(verifiers="0.4.0")
    assert "0.4.0" in problem.describe() and "verifiers>=0.2.0,<0.2.1" in problem.fix
    assert "MILES_VERIFIERS_EPISODE_WORKER_PYTHON" in problem.fix


def test_a_renderers_fix_is_only_the_install_command():
    [problem] = problems_for(renderers=None)
    assert problem.fix == 'pip install "renderers>=0.1.8,<0.1.11"'


def test_unparsable_version_is_a_problem():
    [problem] = problems_for(renderers="main-branch")
    assert "PEP 440" in problem.reason


def test_every_problem_is_reported_together():
    problems = problems_for(verifiers="0.3.1", renderers="0.1.12")
    assert [p.distribution for p in problems] == ["verifiers", "renderers"]


def test_error_lists_each_distribution_with_version_reason_and_fix():
    def version_of(name: str) -> str:
        if name == "mcp":
            raise importlib.metadata.PackageNotFoundError(name)
        return {"verifiers": "0.2.0", "renderers": "0.1.12"}[name]

    with pytest.raises(UnsupportedVersionError) as caught:
        require_supported_versions(version_of=version_of)
    assert caught.value.distributions == ["renderers", "mcp"]
    message = str(caught.value)
    assert "renderers (found 0.1.12)" in message and "mcp (not installed)" in message
    assert 'pip install "renderers>=0.1.8,<0.1.11"' in message


def test_installed_versions_reports_missing_distributions_as_none():
    found = installed_versions(["verifiers", "surely-not-installed-dist"])
    assert found == {"verifiers": "0.2.0", "surely-not-installed-dist": None}


def test_rules_cover_verifiers_and_renderers():
    assert {r.distribution for r in SUPPORTED_VERSIONS} >= {"verifiers", "renderers"}
