"""A hung call names what the engine refused, and leaves nothing running for the next test."""

from __future__ import annotations

import pytest

from miles_verifiers_conformance.selftest.doubles import LEAKED_KEY, WRAPPED_ENV
from miles_verifiers_conformance.selftest.runner import REPO_ROOT, PytestRun, run_pytest

HANGING_TEST = "conformance/test_training.py::test_calls_from_a_worker_thread_return_typed_outputs"
# Construction only, and it asserts that the engine saw no request since its reset: the
# retries a hung call left running would show up there.
NEXT_TEST = (
    "conformance/test_construction.py::"
    "test_rejection_names_every_offending_flag_before_touching_anything"
)


@pytest.fixture(scope="module")
def hang_then_next(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> PytestRun:
    tmp = tmp_path_factory.mktemp("hang")
    return run_pytest(
        [
            HANGING_TEST,
            NEXT_TEST,
            "-p",
            "no:randomly",  # the order is the point
            "--adapter=miles_verifiers_conformance.selftest.doubles:RetriesARejectedKeyForever",
            # Long enough for the first (refused) request to reach the engine on a loaded
            # machine: the first call loads the tokenizer before it sends anything.
            "--call-deadline=10",
        ],
        cwd=REPO_ROOT,
        report_base=tmp / "report",
        env={WRAPPED_ENV: pytestconfig.getoption("--adapter")},
    )


def clause(run: PytestRun, cid: str) -> dict:
    assert run.report is not None, run.output[-3000:]
    (found,) = [c for c in run.report["clauses"] if c["id"] == cid]
    return found


@pytest.mark.clause("SUITE-1")
def test_a_hang_on_a_rejected_key_fails_trp1_naming_the_key(hang_then_next: PytestRun) -> None:
    trp1 = clause(hang_then_next, "TRP-1")

    assert trp1["outcome"] == "failed", hang_then_next.output[-3000:]
    assert any(LEAKED_KEY in e and "HTTP 500" in e for e in trp1["evidence"]), trp1


@pytest.mark.clause("SUITE-1")
def test_the_hung_tests_own_clause_is_not_decided_and_points_at_trp1(
    hang_then_next: PytestRun,
) -> None:
    call2 = clause(hang_then_next, "CALL-2")

    assert call2["outcome"] == "not decided", hang_then_next.output[-3000:]
    assert any("TRP-1" in r for r in call2["reasons"]), call2


@pytest.mark.clause("SUITE-1")
def test_the_next_test_sees_a_clean_engine_after_a_hang(hang_then_next: PytestRun) -> None:
    outcomes = hang_then_next.clause_outcomes()

    assert (outcomes["OPT-2"], outcomes["OPT-3"]) == ("passed", "passed"), hang_then_next.output[
        -3000:
    ]


@pytest.mark.clause("SUITE-1")
def test_the_hang_message_names_what_the_engine_refused(hang_then_next: PytestRun) -> None:
    call2 = clause(hang_then_next, "CALL-2")

    assert any("meanwhile the engine refused" in r and LEAKED_KEY in r for r in call2["reasons"]), (
        call2
    )
