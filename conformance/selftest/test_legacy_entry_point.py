"""``--adapter`` may name a legacy ``generate_rollout`` function instead of a class.

Miles wraps a plain rollout function on its class path: nothing is built at construction,
and each call is ``fn(args, rollout_id, data_source, evaluation=...)``. The suite does the
same, so the project's own legacy entry point passes the clauses of construction, training
and evaluation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.selftest.runner import REPO_ROOT, run_pytest
from miles_verifiers_conformance.test_deployments import ROWS

LEGACY_ENTRY_POINT = "miles_verifiers:generate_rollout"
# Cheap clauses that between them construct, train, evaluate and reject bad set-ups.
CLAUSES = ("OPT-1", "CFG-1", "CFG-2", "TRN-1", "CALL-2", "CALL-3", "EVL-1")
# CALL-2 and CALL-3 also select the deployment matrix (test_deployments.py), which varies
# what stands in front of the engines and where episodes run: code below the entry point,
# the same whichever entry point calls it, and checked row by row in the suite's own run.
# Here one row, Miles' default deployment, shows the legacy function working through one.
KEPT_ROW = ROWS[0].id
DEPLOYMENT_TESTS = (
    "test_a_train_call_round_trips_in_this_deployment",
    "test_one_instance_serves_train_then_eval_in_this_deployment",
)
OTHER_ROWS = [
    f"--deselect=conformance/test_deployments.py::{test}[{row.id}]"
    for test in DEPLOYMENT_TESTS
    for row in ROWS
    if row.id != KEPT_ROW
]


@pytest.mark.clause("SUITE-1")
def test_a_legacy_generate_rollout_function_passes_as_miles_would_call_it(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    selection = [arg for clause in CLAUSES for arg in ("--clause", clause)]

    run = run_pytest(
        [
            "conformance",
            "--ignore=conformance/selftest",
            f"--adapter={LEGACY_ENTRY_POINT}",
            f"--replacement-error={pytestconfig.getoption('--replacement-error')}",
            *selection,
            *OTHER_ROWS,
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
    )

    outcomes = run.clause_outcomes()
    assert run.returncode == 0, run.output[-3000:]
    assert {clause: outcomes[clause] for clause in CLAUSES} == dict.fromkeys(CLAUSES, "passed")
