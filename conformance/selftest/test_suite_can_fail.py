"""Pointed at a deliberately broken adapter, the suite fails the matching clauses."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.selftest.doubles import WRAPPED_ENV
from conformance.selftest.runner import REPO_ROOT, run_pytest

# double -> the clauses its breakage must fail (each run selects only these clauses).
BROKEN = {
    "ReversedGroups": ("GRP-2",),
    "SharedGroupIndex": ("GRP-4",),
    "LeakySamplingKey": ("TRP-1",),
    "PatchedEngineAnswers": ("FLT-3",),
}


@pytest.mark.clause("SUITE-1")
@pytest.mark.parametrize("double", list(BROKEN))
def test_a_broken_adapter_fails_the_matching_clauses(
    double: str, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    clauses = BROKEN[double]
    selection = [arg for clause in clauses for arg in ("--clause", clause)]

    run = run_pytest(
        [
            "conformance",
            f"--adapter=conformance.selftest.doubles:{double}",
            f"--replacement-error={pytestconfig.getoption('--replacement-error')}",
            *selection,
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
        # The doubles break whichever adapter this session tests. A small replacement budget
        # (a knob of the reference adapter; others ignore it) makes a broken run give up fast.
        env={
            WRAPPED_ENV: pytestconfig.getoption("--adapter"),
            "MILES_VERIFIERS_DISPATCH_BUDGET_FACTOR": "2",
        },
    )

    outcomes = run.clause_outcomes()
    assert run.returncode != 0, run.output[-3000:]
    for clause in clauses:
        assert outcomes[clause] == "failed", (
            f"{double} should fail {clause}, got {outcomes[clause]}:\n{run.output[-3000:]}"
        )
        # Failing to set up (e.g. an adapter that cannot be imported) would prove nothing.
        reasons = [
            t["reason"] for c in run.report["clauses"] if c["id"] == clause for t in c["tests"]
        ]
        assert any(r.startswith("call:") for r in reasons), (
            f"{clause} failed only outside the test body: {reasons}"
        )


@pytest.mark.clause("SUITE-1")
def test_a_hang_fails_the_clause_even_with_a_catch_all_replacement_error(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    run = run_pytest(
        [
            "conformance/test_faults.py::"
            "test_an_engine_that_always_fails_ends_with_the_replacement_error",
            "--adapter=conformance.selftest.doubles:HangsForever",
            "--replacement-error=builtins:Exception",
            "--call-deadline=1",
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
        env={WRAPPED_ENV: pytestconfig.getoption("--adapter")},
    )

    assert run.clause_outcomes()["FLT-1"] == "failed", run.output[-3000:]
