"""The expectation file for Miles' own adapter, and its comparison with a run (no Miles needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from miles_verifiers_conformance.clauses import CLAUSES
from miles_verifiers_conformance.upstream import __main__ as driver
from miles_verifiers_conformance.upstream.expected import (
    NEEDS_WHY,
    Difference,
    Expectation,
    ExpectationError,
    behaviour_lines,
    compare,
    parse_expectations,
    regenerate,
    render_expectations,
    unexplained,
)
from miles_verifiers_conformance.upstream.merge import merge_clause_results

EXPECTED_FILE = Path(__file__).resolve().parents[1] / "upstream" / "expected.toml"


def test_matching_verdicts_give_no_difference() -> None:
    expected = {"GRP-2": Expectation("failed", "completion order"), "CALL-1": Expectation("passed")}

    assert compare(expected, {"CALL-1": "passed", "GRP-2": "failed"}) == []


def test_a_changed_verdict_is_a_difference_naming_both_verdicts() -> None:
    differences = compare({"GRP-2": Expectation("failed", "why")}, {"GRP-2": "passed"})

    assert differences == [Difference("GRP-2", "failed", "passed")]
    assert differences[0].describe() == "GRP-2: expected 'failed', observed 'passed'"


def test_a_verdict_listed_under_also_is_no_difference() -> None:
    expected = {"CALL-5": Expectation("failed", "completion order varies", ("passed",))}

    assert compare(expected, {"CALL-5": "passed"}) == []
    assert compare(expected, {"CALL-5": "not decided"}) == [
        Difference("CALL-5", "failed", "not decided")
    ]


def test_a_passing_expectation_that_allows_others_needs_a_why() -> None:
    assert unexplained({"A-1": Expectation("passed", "", ("failed",))}) == ["A-1"]


def test_also_reads_back_from_the_file_text() -> None:
    text = '[clauses.A-1]\nexpected = "failed"\nwhy = "varies"\nalso = ["passed"]\n'

    assert parse_expectations(text, "x.toml") == {
        "A-1": Expectation("failed", "varies", ("passed",))
    }


def test_a_reported_clause_without_an_expectation_is_a_difference() -> None:
    assert compare({}, {"NEW-1": "passed"}) == [Difference("NEW-1", None, "passed")]


def test_an_expected_clause_the_report_lacks_is_a_difference() -> None:
    assert compare({"OLD-1": Expectation("passed")}, {}) == [Difference("OLD-1", "passed", None)]


def test_a_failure_expected_without_a_why_is_unexplained() -> None:
    expected = {
        "A-1": Expectation("failed", ""),
        "A-2": Expectation("failed", NEEDS_WHY),
        "A-3": Expectation("failed", "the adapter does X"),
        "A-4": Expectation("passed"),
    }

    assert unexplained(expected) == ["A-1", "A-2"]


def test_regeneration_keeps_the_why_texts_already_written() -> None:
    previous = {"A-1": Expectation("failed", "the adapter does X")}

    regenerated = regenerate({"A-1": "not decided"}, previous)

    assert regenerated == {"A-1": Expectation("not decided", "the adapter does X")}


def test_regeneration_flags_a_new_non_passing_verdict_as_needing_a_why() -> None:
    regenerated = regenerate({"A-1": "failed", "A-2": "passed"}, {})

    assert regenerated == {"A-1": Expectation("failed", NEEDS_WHY), "A-2": Expectation("passed")}


def test_rendered_expectations_read_back_as_the_same_entries() -> None:
    expected = {
        "A-1": Expectation("failed", 'sends "lora_path" \\ retries 60× on 4xx'),
        "A-2": Expectation("passed"),
        "A-3": Expectation("failed", "varies between runs", ("passed",)),
    }

    text = render_expectations(expected, "header line one\nline two")

    assert text.startswith("# header line one\n# line two\n")
    assert parse_expectations(text, "x.toml") == expected


def test_an_unknown_verdict_is_an_error_naming_the_file_and_entry() -> None:
    with pytest.raises(
        ExpectationError, match=r"x\.toml \[clauses\.A-1\].*'flaky' is not a verdict"
    ):
        parse_expectations('[clauses.A-1]\nexpected = "flaky"\n', "x.toml")


def test_part_reports_merge_into_one_verdict_per_clause() -> None:
    def part(clause: str, nodeid: str, outcome: str) -> str:
        tests = [
            {
                "nodeid": nodeid,
                "outcome": outcome,
                "detail": "",
                "duration_s": 0.1,
                "deployment": "",
            }
        ]
        return json.dumps(
            {"versions": {"verifiers": "0.2.0"}, "clauses": [{"id": clause, "tests": tests}]}
        )

    clauses, versions = merge_clause_results(
        [
            part("CALL-1", "t1", "passed"),
            part("CALL-1", "t2", "failed"),
            part("CALL-2", "t3", "passed"),
        ],
        {"CALL-1": "one", "CALL-2": "two", "CALL-3": "three"},
    )

    assert {c.id: c.verdict.value for c in clauses} == {
        "CALL-1": "failed",
        "CALL-2": "passed",
        "CALL-3": "not decided",
    }
    assert versions == {"verifiers": "0.2.0"}


def test_the_report_names_the_upstream_behaviour_behind_each_clause_it_does_not_pass() -> None:
    lines = behaviour_lines(
        {"A-1": "failed", "A-2": "passed"}, {"A-1": Expectation("failed", "the adapter does X")}
    )

    assert "- **A-1** (failed): the adapter does X" in lines
    assert not any("A-2" in line for line in lines)


def test_without_miles_src_the_upstream_run_stops_at_once_saying_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MILES_SRC", raising=False)

    assert driver.main([]) != 0
    assert "MILES_SRC is not set" in capsys.readouterr().err


def test_the_committed_expectations_cover_every_clause_and_explain_each_non_pass() -> None:
    expected = parse_expectations(EXPECTED_FILE.read_text(encoding="utf-8"), str(EXPECTED_FILE))

    assert sorted(expected) == sorted(CLAUSES), (
        "conformance/upstream/expected.toml is out of date with the clause table; regenerate "
        "it with `MILES_SRC=... tox -e upstream -- --write-expected`"
    )
    assert unexplained(expected) == [], "explain each non-passing verdict in its why"
