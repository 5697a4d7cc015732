"""One verdict per clause: blocks decide their own clause; every clause ends decided or says why."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from miles_verifiers_conformance.clauses import CLAUSES, TIERS, Tier
from miles_verifiers_conformance.report import build_report, clause_results
from miles_verifiers_conformance.selftest.runner import PLUGIN_CONFTEST, PytestRun, run_pytest
from miles_verifiers_conformance.verdicts import ClauseBook, ClauseFailures, Stop, Verdict, decide
from miles_verifiers_testkit.miles import GenerateCall
from miles_verifiers_testkit.miles.evidence import refused_answers, unknown_keys

SYNTHETIC = textwrap.dedent(
    """
    import pytest
    from hypothesis import HealthCheck, given, settings, strategies as st

    @pytest.mark.clause("GRP-1", "GRP-2")
    def test_soft(verdicts):
        with verdicts.check("GRP-1"):
            assert False, "GRP-1 evidence"
        with verdicts.check("GRP-2"):
            assert True

    @pytest.mark.clause("GRP-3", "GRP-4")
    def test_error_before_blocks(verdicts):
        raise RuntimeError("engine unreachable")

    @pytest.mark.clause("TRN-1", "TRN-2")
    @settings(
        derandomize=True, max_examples=30, database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(x=st.integers(0, 100))
    def test_property(verdicts, x):
        with verdicts.check("TRN-1"):
            assert x < 40, f"x is {x}"
        with verdicts.check("TRN-2"):
            assert True

    @pytest.mark.clause("OPT-1")
    def test_single_clause_error():
        raise RuntimeError("adapter raised")

    @pytest.mark.clause("OPT-3")
    def test_skipped():
        pytest.skip("no engine here")

    RUNS = {"count": 0}

    @pytest.mark.clause("CYC-1", "CYC-2")
    @settings(
        derandomize=True, max_examples=5, database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(x=st.integers(0, 3))
    def test_flaky(verdicts, x):
        RUNS["count"] += 1
        with verdicts.check("CYC-1"):
            assert RUNS["count"] != 1, "fails the first time only"
        with verdicts.check("CYC-2"):
            assert True

    @pytest.mark.clause("CFG-1", "CFG-2")
    def test_stops_after_a_hard_block(verdicts):
        with verdicts.check("CFG-1", hard=True):
            assert False, "CFG-1 evidence"
        with verdicts.check("CFG-2"):
            assert True
    """
)


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> PytestRun:
    tmp = tmp_path_factory.mktemp("verdicts")
    (tmp / "conftest.py").write_text(PLUGIN_CONFTEST)
    (tmp / "test_synthetic.py").write_text(SYNTHETIC)
    return run_pytest(
        ["test_synthetic.py", "-p", "no:randomly"], cwd=tmp, report_base=tmp / "out" / "r"
    )


def clause(run: PytestRun, cid: str) -> dict[str, Any]:
    assert run.report is not None, run.output[-3000:]
    (found,) = [c for c in run.report["clauses"] if c["id"] == cid]
    return found


@pytest.mark.clause("SUITE-3")
def test_a_failing_block_fails_its_clause_only(synthetic_run: PytestRun) -> None:
    assert clause(synthetic_run, "GRP-1")["outcome"] == "failed"
    assert clause(synthetic_run, "GRP-2")["outcome"] == "passed"


@pytest.mark.clause("SUITE-3")
def test_a_failed_clause_carries_its_own_evidence(synthetic_run: PytestRun) -> None:
    evidence = clause(synthetic_run, "GRP-1")["evidence"]

    assert len(evidence) == 1 and "GRP-1 evidence" in evidence[0], evidence


@pytest.mark.clause("SUITE-3")
def test_a_test_with_a_failed_block_fails_listing_the_clause(synthetic_run: PytestRun) -> None:
    assert "test_soft" in synthetic_run.output
    assert "clause(s) failed: GRP-1" in synthetic_run.output, synthetic_run.output[-3000:]


@pytest.mark.clause("SUITE-3")
def test_an_error_before_the_blocks_leaves_its_clauses_not_decided_with_the_error(
    synthetic_run: PytestRun,
) -> None:
    for cid in ("GRP-3", "GRP-4"):
        found = clause(synthetic_run, cid)
        assert found["outcome"] == "not decided"
        assert any("engine unreachable" in r for r in found["reasons"]), found


@pytest.mark.clause("SUITE-3")
def test_a_property_failure_names_its_failing_example(synthetic_run: PytestRun) -> None:
    (evidence,) = clause(synthetic_run, "TRN-1")["evidence"]

    assert "x is" in evidence and "x=" in evidence, evidence
    assert clause(synthetic_run, "TRN-2")["outcome"] == "passed"


@pytest.mark.clause("SUITE-3")
def test_a_failure_hypothesis_calls_flaky_still_decides_each_clause_by_its_block(
    synthetic_run: PytestRun,
) -> None:
    assert "Flaky" in synthetic_run.output, synthetic_run.output[-3000:]
    found = clause(synthetic_run, "CYC-1")
    assert found["outcome"] == "failed"
    assert "fails the first time only" in found["evidence"][0], found
    assert clause(synthetic_run, "CYC-2")["outcome"] == "passed"


@pytest.mark.clause("SUITE-3")
def test_a_single_clause_test_is_decided_by_the_whole_test(synthetic_run: PytestRun) -> None:
    found = clause(synthetic_run, "OPT-1")

    assert found["outcome"] == "failed" and "adapter raised" in found["evidence"][0], found


@pytest.mark.clause("SUITE-3")
def test_a_skipped_test_leaves_its_clause_not_decided_with_the_reason(
    synthetic_run: PytestRun,
) -> None:
    found = clause(synthetic_run, "OPT-3")

    assert found["outcome"] == "not decided"
    assert any("no engine here" in r for r in found["reasons"]), found


@pytest.mark.clause("SUITE-3")
def test_a_clause_whose_block_was_never_reached_is_not_decided(synthetic_run: PytestRun) -> None:
    assert clause(synthetic_run, "CFG-1")["outcome"] == "failed"
    found = clause(synthetic_run, "CFG-2")
    assert found["outcome"] == "not decided"
    assert any("CFG-1 failed" in r for r in found["reasons"]), found


@pytest.mark.clause("SUITE-3")
def test_a_clause_no_test_ran_is_not_decided_saying_so(synthetic_run: PytestRun) -> None:
    found = clause(synthetic_run, "RES-1")

    assert found["outcome"] == "not decided"
    assert any("no test of this run" in r for r in found["reasons"]), found


@pytest.mark.clause("SUITE-3")
def test_a_block_for_a_clause_the_test_does_not_mark_is_refused() -> None:
    book = ClauseBook(("GRP-1",))

    with pytest.raises(ValueError, match="GRP-2"), book.check("GRP-2"):
        pass


@pytest.mark.clause("SUITE-3")
def test_a_hard_block_stops_the_test_with_the_failed_clause() -> None:
    book = ClauseBook(("GRP-1", "GRP-2"))

    with pytest.raises(ClauseFailures) as caught, book.check("GRP-1", hard=True):
        raise AssertionError("mixed")

    assert list(caught.value.failures) == ["GRP-1"]


@pytest.mark.clause("SUITE-3")
def test_an_error_the_engine_log_blames_on_trp1_fails_trp1_not_the_tests_clause() -> None:
    book = ClauseBook(("CALL-2",))
    stop = Stop("call", "error", "call: CallDeadlineExceeded: did not return")

    decisions = decide(book, stop, attributed={"TRP-1": "sampling key bad_key refused"})

    assert decisions["TRP-1"].verdict == Verdict.FAILED
    assert "bad_key" in decisions["TRP-1"].detail
    assert decisions["CALL-2"].verdict == Verdict.NOT_DECIDED
    assert "TRP-1" in decisions["CALL-2"].detail


@pytest.mark.clause("SUITE-3")
def test_a_failed_setup_leaves_every_clause_not_decided() -> None:
    decisions = decide(ClauseBook(("GRP-1", "GRP-2")), Stop("setup", "error", "no engine"))

    assert {d.verdict for d in decisions.values()} == {Verdict.NOT_DECIDED}
    assert all("no engine" in d.detail for d in decisions.values())


def _call(status: int, params: dict[str, Any], response: Any, fault: str | None = None) -> Any:
    return GenerateCall({"input_ids": [1], "sampling_params": params}, status, response, fault)


@pytest.mark.clause("SUITE-3")
def test_a_bare_500_on_an_unknown_key_is_traced_to_that_key() -> None:
    calls = [_call(500, {"max_new_tokens": 4, "made_up": 1}, "Internal Server Error")]

    refused = refused_answers(calls, frozenset({"max_new_tokens"}))

    assert unknown_keys(refused) == ("made_up",)
    assert "HTTP 500" in refused[0].describe() and "made_up" in refused[0].describe()


@pytest.mark.clause("SUITE-3")
def test_an_injected_fault_is_not_counted_as_a_refusal() -> None:
    calls = [_call(503, {"max_new_tokens": 4}, "Internal Server Error", fault="server_error")]

    assert refused_answers(calls, frozenset({"max_new_tokens"})) == []


@pytest.mark.clause("SUITE-3")
def test_every_clause_has_one_tier_and_the_snapshot_promises_are_promises() -> None:
    assert set(TIERS) == set(CLAUSES)
    assert TIERS["OPT-2"] == TIERS["SNP-3"] == TIERS["SNP-4"] == Tier.PROMISE
    assert TIERS["SNP-1"] == TIERS["SNP-2"] == Tier.INDEPENDENT
    assert TIERS["GRP-2"] == Tier.CONTRACT


@pytest.mark.clause("SUITE-3")
def test_the_report_keeps_the_tiers_apart_with_a_summary_line_each() -> None:
    report = build_report("pkg:Adapter", {}, "now", clause_results(CLAUSES, {}, {}))

    markdown = report.to_markdown()
    data = json.loads(report.to_json())

    for tier in Tier:
        assert f"## {tier.value.capitalize()}" in markdown
        assert f"- {tier.value}: 0 passed, 0 failed," in markdown
    assert set(data["summary"]) == {"contract", "promise", "independent"}
    assert {c["tier"] for c in data["clauses"] if c["id"] == "OPT-2"} == {"promise"}
