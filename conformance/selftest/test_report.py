"""The conformance report lists every clause of the table with its outcome."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.clauses import CLAUSES
from miles_verifiers_conformance.report import RecordedTest, build_report, clause_results
from miles_verifiers_conformance.selftest.runner import PLUGIN_CONFTEST, plugin_site, run_pytest
from miles_verifiers_conformance.verdicts import Decision, Verdict

SYNTHETIC_TESTS = textwrap.dedent(
    """
    import pytest

    @pytest.mark.clause("OPT-1")
    def test_passes():
        pass

    @pytest.mark.clause("OPT-2")
    def test_fails():
        assert 1 == 2, "deliberate"

    @pytest.mark.clause("OPT-3")
    def test_skips():
        pytest.skip("no engine here")

    @pytest.mark.clause("OPT-4", "OPT-1")
    def test_shares_a_clause_and_fails():
        raise RuntimeError("boom")
    """
)


@pytest.mark.clause("SUITE-3")
def test_a_clause_fails_on_any_failure_passes_on_a_pass_and_else_is_not_decided() -> None:
    passed, failed = Decision(Verdict.PASSED), Decision(Verdict.FAILED, "boom")
    skipped = Decision(Verdict.NOT_DECIDED, "skipped: later")
    records = {
        "a": RecordedTest({"OPT-1": passed}),
        "b": RecordedTest({"OPT-1": failed, "OPT-2": passed}),
        "c": RecordedTest({"OPT-3": skipped, "OPT-2": passed}),
    }
    by_test = {"a": ("OPT-1",), "b": ("OPT-1", "OPT-2"), "c": ("OPT-3",), "d": ("OPT-4",)}

    verdicts = {c.id: c.verdict for c in clause_results(CLAUSES, by_test, records)}

    assert verdicts["OPT-1"] == Verdict.FAILED
    assert verdicts["OPT-2"] == Verdict.PASSED
    assert verdicts["OPT-3"] == Verdict.NOT_DECIDED
    assert verdicts["OPT-4"] == Verdict.NOT_DECIDED  # collected but never reported
    assert verdicts["OPT-5"] == Verdict.NOT_DECIDED  # no test at all


@pytest.mark.clause("SUITE-3")
def test_report_renders_every_clause_in_markdown_and_json() -> None:
    report = build_report(
        "pkg:Adapter", {"verifiers": "0.2.0"}, "now", clause_results(CLAUSES, {}, {})
    )

    markdown = report.to_markdown()
    data = json.loads(report.to_json())

    assert [c["id"] for c in data["clauses"]] == list(CLAUSES)
    assert all(f"| {cid} |" in markdown for cid in CLAUSES)
    assert sum(tier["not decided"] for tier in data["summary"].values()) == len(CLAUSES)


@pytest.mark.clause("SUITE-3")
def test_a_run_writes_each_deployment_of_a_clause_with_its_outcome(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        PLUGIN_CONFTEST
        + textwrap.dedent(
            """
            import pytest

            @pytest.fixture(params=["sglang-router@0.5.16-fork", "direct@0.5.23"])
            def deployment_world(request):
                if request.param.startswith("direct"):
                    pytest.fail("deliberate")
                return request.param
            """
        )
    )
    (tmp_path / "test_synthetic.py").write_text(
        "import pytest\n\n@pytest.mark.clause('TRP-1')\ndef test_x(deployment_world):\n    pass\n"
    )

    run_pytest(["test_synthetic.py"], cwd=tmp_path, report_base=tmp_path / "out" / "conformance")

    markdown = (tmp_path / "out" / "conformance.md").read_text()
    data = json.loads((tmp_path / "out" / "conformance.json").read_text())
    assert "| TRP-1 | sglang-router | 0.5.16-fork |" in markdown
    assert "| TRP-1 | direct | 0.5.23 |" in markdown
    (trp1,) = [c for c in data["clauses"] if c["id"] == "TRP-1"]
    runs = {t["deployment"]: t["outcome"] for t in trp1["tests"]}
    # The direct run failed in its set-up, before the test could decide TRP-1.
    assert runs == {"sglang-router@0.5.16-fork": "passed", "direct@0.5.23": "not decided"}


@pytest.mark.clause("SUITE-3")
def test_a_run_writes_the_report_with_every_clause_and_outcome(tmp_path: Path) -> None:
    plugin_site(tmp_path, test_synthetic=SYNTHETIC_TESTS)

    run = run_pytest(
        ["test_synthetic.py"], cwd=tmp_path, report_base=tmp_path / "out" / "conformance"
    )

    outcomes = run.clause_outcomes()
    assert list(outcomes) == list(CLAUSES)
    # OPT-1: one test passed it; the other stopped on an error before deciding it.
    assert (outcomes["OPT-1"], outcomes["OPT-2"], outcomes["OPT-3"], outcomes["OPT-4"]) == (
        "passed",
        "failed",
        "not decided",
        "not decided",
    )
    assert {outcomes[c] for c in CLAUSES if not c.startswith("OPT-") or c == "OPT-5"} == {
        "not decided"
    }
    markdown = (tmp_path / "out" / "conformance.md").read_text()
    assert "no engine here" in markdown and "deliberate" in markdown


DEPLOYMENT_CONFTEST = PLUGIN_CONFTEST + textwrap.dedent(
    """
    import pytest

    @pytest.fixture(params=["sglang-router@0.5.16-fork", "direct@0.5.23"])
    def deployment_world(request):
        if request.param.startswith("direct"):
            pytest.fail("deliberate")
        return request.param
    """
)
DEPLOYMENT_TEST = "\n\n@pytest.mark.clause('TRP-1')\ndef test_x(deployment_world):\n    pass\n"


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """The report less what differs between any two runs: when it was made, how long tests took."""
    kept = {k: v for k, v in report.items() if k != "created"}
    kept["clauses"] = [
        {**c, "tests": [{k: v for k, v in t.items() if k != "duration_s"} for t in c["tests"]]}
        for c in report["clauses"]
    ]
    return kept


@pytest.mark.clause("SUITE-3")
def test_a_run_split_over_xdist_workers_writes_the_report_of_a_run_without(
    tmp_path: Path,
) -> None:
    plugin_site(tmp_path, DEPLOYMENT_CONFTEST, test_synthetic=SYNTHETIC_TESTS + DEPLOYMENT_TEST)

    alone = run_pytest(
        ["test_synthetic.py", "-p", "no:xdist"], cwd=tmp_path, report_base=tmp_path / "a"
    )
    split = run_pytest(["test_synthetic.py", "-n", "2"], cwd=tmp_path, report_base=tmp_path / "b")

    assert "bringing up nodes" in split.output, split.output[-3000:]  # xdist ran it
    assert alone.report is not None and split.report is not None, split.output[-3000:]
    assert without_timings(dict(split.report)) == without_timings(dict(alone.report))
    assert any(t["deployment"] for c in split.report["clauses"] for t in c["tests"])
    markdown = [
        [
            line
            for line in (tmp_path / f"{name}.md").read_text().splitlines()
            if "Created:" not in line
        ]
        for name in ("a", "b")
    ]
    assert markdown[0] == markdown[1]


@pytest.mark.clause("SUITE-3")
def test_an_unknown_clause_option_stops_an_xdist_run_naming_it(tmp_path: Path) -> None:
    plugin_site(tmp_path, test_synthetic=SYNTHETIC_TESTS)

    run = run_pytest(
        ["test_synthetic.py", "-n", "2", "--clause", "OPT-99"],
        cwd=tmp_path,
        report_base=tmp_path / "r",
    )

    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.output[-3000:]
    assert "--clause OPT-99: no such clause" in run.output


@pytest.mark.clause("SUITE-3")
def test_an_unknown_clause_id_stops_collection(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(PLUGIN_CONFTEST)
    (tmp_path / "test_typo.py").write_text(
        "import pytest\n\n@pytest.mark.clause('OPT-99')\ndef test_x():\n    pass\n"
    )

    run = run_pytest(["test_typo.py"], cwd=tmp_path, report_base=tmp_path / "r")

    assert run.returncode != 0
    assert "OPT-99" in run.output and "clauses.py" in run.output


@pytest.mark.clause("SUITE-3")
def test_clause_option_runs_only_that_clause(tmp_path: Path) -> None:
    plugin_site(tmp_path, test_synthetic=SYNTHETIC_TESTS)

    run = run_pytest(
        ["test_synthetic.py", "--clause", "OPT-3"], cwd=tmp_path, report_base=tmp_path / "r"
    )

    outcomes = run.clause_outcomes()
    assert outcomes["OPT-3"] == "not decided"
    assert outcomes["OPT-1"] == outcomes["OPT-2"] == "not decided"
