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

LEGACY_ENTRY_POINT = "miles_verifiers:generate_rollout"
# Cheap clauses that between them construct, train, evaluate and reject bad set-ups.
CLAUSES = ("OPT-1", "CFG-1", "CFG-2", "TRN-1", "CALL-2", "CALL-3", "EVL-1")


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
        ],
        cwd=REPO_ROOT,
        report_base=tmp_path / "report",
    )

    outcomes = run.clause_outcomes()
    assert run.returncode == 0, run.output[-3000:]
    assert {clause: outcomes[clause] for clause in CLAUSES} == dict.fromkeys(CLAUSES, "passed")
