"""Pointed at a deliberately broken adapter, the suite fails the matching clauses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from miles_verifiers_conformance.selftest.doubles import WRAPPED_ENV
from miles_verifiers_conformance.selftest.runner import REPO_ROOT, run_pytest
from miles_verifiers_conformance.world import require_taskset, write_config

# double -> the one clause it breaks. Every clause the run touches must pass or be not
# decided for a stated reason; only that one may fail.
BROKEN = {
    "ReversedGroups": "GRP-2",
    "SharedGroupIndex": "GRP-4",
    "LeakySamplingKey": "TRP-1",
    "PatchedEngineAnswers": "FLT-3",
}
# The default run selects the tests of the broken clause (which carry its neighbours too:
# GRP-2's tests also check GRP-1/3/4, CYC-1/2, BR-2 and CALL-3). The full matrix (the
# `conformance-selftest` tox env) runs the whole suite against each double, less the
# fixed-seed snapshots, which pin the exact output and so change with any double by design.
MATRIX_ENV = "CONFORMANCE_SELFTEST_MATRIX"
FULL_SUITE = [
    "--ignore=conformance/selftest",
    "--deselect=conformance/test_rollout_snapshots.py",
]


def full_matrix() -> bool:
    return os.environ.get(MATRIX_ENV, "").strip().lower() == "full"


# TRP-1's tests include one row per production deployment (test_deployments.py), each the
# same payload check behind another router; test_transport.py's cases show the double is
# caught, at a fraction of the cost. The full matrix runs every row.
DEFAULT_DESELECTED = {"TRP-1": ["--deselect=conformance/test_deployments.py"]}


def suite_selection(clause: str) -> list[str]:
    if full_matrix():
        return FULL_SUITE
    return ["--clause", clause, *DEFAULT_DESELECTED.get(clause, [])]


@pytest.mark.clause("SUITE-1")
@pytest.mark.parametrize("double", list(BROKEN))
def test_a_double_that_breaks_one_clause_fails_exactly_that_clause(
    double: str, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    broken = BROKEN[double]

    run = run_pytest(
        [
            "conformance",
            f"--adapter=miles_verifiers_conformance.selftest.doubles:{double}",
            f"--replacement-error={pytestconfig.getoption('--replacement-error')}",
            *suite_selection(broken),
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
        # The doubles break whichever adapter this session tests. A small replacement budget
        # (a knob of the reference adapter; others ignore it) makes a broken run give up fast.
        env={
            WRAPPED_ENV: pytestconfig.getoption("--adapter"),
            "MILES_VERIFIERS_DISPATCH_BUDGET_FACTOR": "2",
        },
        timeout_s=3000 if full_matrix() else 600,
    )

    assert run.report is not None, run.output[-3000:]
    clauses = run.report["clauses"]
    failed = {c["id"]: c["evidence"] for c in clauses if c["outcome"] == "failed"}
    assert set(failed) == {broken}, f"{double} failed {failed}, expected only {broken}"
    unexplained = [c["id"] for c in clauses if c["outcome"] == "not decided" and not c["reasons"]]
    assert not unexplained, f"not decided without a reason: {unexplained}"
    assert run.returncode != 0, run.output[-3000:]


# Mutants of Verifiers 0.4's verdict rules -> the one clause each breaks. The VER clauses run
# only with 0.4 workers, so these runs do too: the workers' interpreter is the selftest env's
# own 0.4 virtualenv ($CONFORMANCE_SELFTEST_WORKER_PYTHON04, built by `tox -e
# conformance-selftest`), else this session's worker interpreter when it runs 0.4. Full matrix
# or not, each runs the VER clauses' file only (the rest of the 0.4 selection would cost many
# minutes a mutant and cannot meet these rewrites).
BROKEN_04 = {
    "TrainsFailedSeats": "VER-2",
    "DropsRecoveredRetries": "VER-1",
}
WORKER_PYTHON04_ENV = "CONFORMANCE_SELFTEST_WORKER_PYTHON04"
WORKER_PYTHON_ENV = "MILES_VERIFIERS_EPISODE_WORKER_PYTHON"


def _runs_verifiers04(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('verifiers'))"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip().startswith("0.4.")


def worker_python04() -> str | None:
    """An interpreter with Verifiers 0.4 for the nested runs' workers, if there is one."""
    for name in (WORKER_PYTHON04_ENV, WORKER_PYTHON_ENV):
        python = os.environ.get(name)
        if python and _runs_verifiers04(python):
            return python
    return None


@pytest.mark.clause("SUITE-1")
@pytest.mark.parametrize("double", list(BROKEN_04))
def test_a_mutant_of_the_04_verdicts_fails_exactly_its_clause(
    double: str, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    python = worker_python04()
    if python is None:
        pytest.skip(
            f"needs a worker interpreter with Verifiers 0.4 (${WORKER_PYTHON04_ENV}, as `tox -e "
            "conformance-selftest` sets it): the VER clauses run only with 0.4 workers"
        )
    broken = BROKEN_04[double]

    run = run_pytest(
        [
            "conformance/test_verdicts04.py",
            f"--adapter=miles_verifiers_conformance.selftest.doubles:{double}",
            f"--replacement-error={pytestconfig.getoption('--replacement-error')}",
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
        env={
            WRAPPED_ENV: pytestconfig.getoption("--adapter"),
            "MILES_VERIFIERS_DISPATCH_BUDGET_FACTOR": "2",
            "MILES_VERIFIERS_EPISODE_WORKERS": "2",
            WORKER_PYTHON_ENV: python,
            "MILES_VERIFIERS_TESTKIT_CONFIGS": str(REPO_ROOT / "fixtures" / "configs" / "v04"),
        },
        timeout_s=1800,
    )

    assert run.report is not None, run.output[-3000:]
    outcomes = {c["id"]: c["outcome"] for c in run.report["clauses"]}
    failed = {cid for cid, outcome in outcomes.items() if outcome == "failed"}
    assert failed == {broken}, f"{double} failed {sorted(failed)}, expected only {broken}"
    others = {cid: o for cid, o in outcomes.items() if cid.startswith("VER-") and cid != broken}
    assert set(others.values()) == {"passed"}, f"the other VER clauses must pass: {others}"
    assert run.returncode != 0, run.output[-3000:]


@pytest.mark.clause("SUITE-1")
def test_a_hang_fails_the_clause_even_with_a_catch_all_replacement_error(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    run = run_pytest(
        [
            "conformance/test_faults.py::"
            "test_an_engine_that_always_fails_ends_with_the_replacement_error",
            "--adapter=miles_verifiers_conformance.selftest.doubles:HangsForever",
            "--replacement-error=builtins:Exception",
            "--call-deadline=1",
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
        env={WRAPPED_ENV: pytestconfig.getoption("--adapter")},
    )

    assert run.clause_outcomes()["FLT-1"] == "failed", run.output[-3000:]


@pytest.mark.clause("SUITE-1")
def test_a_double_that_ignores_seat_pins_fails_cfg_4(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    # CFG-4 is a Verifiers 0.4 clause: it runs where the fixture configs are 0.4's.
    require_taskset(write_config(tmp_path, "mv_dialogue"), "mv-dialogue04")

    run = run_pytest(
        [
            "conformance/test_construction.py::"
            "test_a_seat_pin_miles_cannot_train_faithfully_is_refused_by_its_key",
            "--adapter=miles_verifiers_conformance.selftest.doubles:IgnoresSeatPins",
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
        env={WRAPPED_ENV: pytestconfig.getoption("--adapter")},
    )

    assert run.clause_outcomes()["CFG-4"] == "failed", run.output[-3000:]
