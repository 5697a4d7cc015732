"""The conformance suite as an installed pytest plugin: it runs from any directory.

Each run is a subprocess in an empty directory outside this repository, with no PYTHONPATH,
so only what is installed (the suite's distribution, its ``pytest11`` entry point and its
package data) can make it work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.entry_point import import_problem
from miles_verifiers_conformance.plugin import DEFAULT_ADAPTER

ROOT = Path(__file__).resolve().parents[1]
SUITE = "miles_verifiers_conformance"
# Cheap, and broken by a double of the selftests: every sample put in group 0.
CLAUSE = "GRP-4"
DOUBLE = f"{SUITE}.selftest.doubles:SharedGroupIndex"


def run_installed_suite(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            SUITE,
            "--clause",
            CLAUSE,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-q",
            "--color=no",
            *args,
        ],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def clause_entry(report_file: Path, output: str) -> dict[str, Any]:
    assert report_file.exists(), f"no report at {report_file}:\n{output[-3000:]}"
    report = json.loads(report_file.read_text(encoding="utf-8"))
    (entry,) = [c for c in report["clauses"] if c["id"] == CLAUSE]
    return entry


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    place = tmp_path / "elsewhere"
    place.mkdir()
    assert not place.resolve().is_relative_to(ROOT)
    return place


@pytest.mark.slow
def test_the_installed_suite_passes_our_adapter_from_another_directory(elsewhere: Path) -> None:
    # A project of the user's above the current directory: pytest's rootdir is there, but a
    # relative --conformance-report is taken from where pytest runs.
    (elsewhere / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    here = elsewhere / "sub"
    here.mkdir()

    run = run_installed_suite(here, "--conformance-report", "out/verdicts")

    entry = clause_entry(here / "out" / "verdicts.json", run.stdout + run.stderr)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert entry["outcome"] == "passed"
    assert (here / "out" / "verdicts.md").exists()


@pytest.mark.slow
def test_the_installed_suite_fails_a_broken_double_and_reports_under_the_current_directory(
    elsewhere: Path,
) -> None:
    run = run_installed_suite(elsewhere, "--adapter", DOUBLE)

    entry = clause_entry(elsewhere / "reports" / "conformance.json", run.stdout + run.stderr)
    assert run.returncode != 0
    assert entry["outcome"] == "failed"
    # Failed with evidence inside the test body, not at set-up (a set-up failure leaves the
    # clause "not decided"): the double was built and called.
    assert any(t["outcome"] == "failed" and t["detail"] for t in entry["tests"]), entry


def test_an_adapter_that_cannot_be_imported_stops_the_run_naming_the_option(
    elsewhere: Path,
) -> None:
    run = run_installed_suite(elsewhere, "--adapter", "no_such_adapter_pkg:RolloutFn")

    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--adapter 'no_such_adapter_pkg:RolloutFn'" in run.stderr
    assert "Pass --adapter MODULE:ATTRIBUTE" in run.stderr
    assert not (elsewhere / "reports").exists()


def test_a_missing_default_adapter_says_to_pass_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    module_name = DEFAULT_ADAPTER.partition(":")[0]
    monkeypatch.setitem(sys.modules, module_name, None)  # makes importing it fail

    problem = import_problem(DEFAULT_ADAPTER, "--adapter")

    assert problem is not None
    assert "--adapter was not given" in problem
    assert "Pass --adapter MODULE:ATTRIBUTE" in problem


def test_an_adapter_path_without_an_attribute_is_refused() -> None:
    problem = import_problem("miles_verifiers", "--adapter")

    assert problem is not None and "MODULE:ATTRIBUTE" in problem


def test_an_importable_adapter_has_no_problem() -> None:
    assert import_problem(DEFAULT_ADAPTER, "--adapter") is None
