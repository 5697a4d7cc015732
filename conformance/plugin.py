"""The suite's pytest plugin: options, the ``clause`` marker, the report and the drift summary.

``conformance/conftest.py`` imports ``pytest_addoption`` and ``pytest_configure`` from here;
``pytest_configure`` registers the reporter and the snapshot fixtures. Options:

``--adapter module:attribute``   the rollout function class (or legacy function) under test
``--replacement-error module:Class`` the adapter's bounded-replacement error
``--conformance-report PATH``    where the report goes (``PATH.md`` and ``PATH.json``)
``--clause ID``                  run only the tests of this clause (repeatable)
``--conformance-profile ci|long`` hypothesis budget (env ``CONFORMANCE_PROFILE``)
``--call-deadline SECONDS``      how long one rollout call may take before it is a hang
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conformance import snapshots
from conformance.budget import PROFILE_ENV, PROFILES
from conformance.clauses import CLAUSES
from conformance.drift import drift_lines
from conformance.report import ItemResult, Outcome, build_report, clause_results
from conformance.snapshots import DRIFT_KEY, REFRESH_COMMAND, installed_versions

DEFAULT_ADAPTER = "miles_verifiers:VerifiersRolloutFn"
DEFAULT_REPORT = "reports/conformance"
DEFAULT_REPLACEMENT_ERROR = "miles_verifiers._scheduling:DispatchBudgetError"
DEFAULT_CALL_DEADLINE_S = 120.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "Miles/Verifiers conformance suite")
    group.addoption(
        "--adapter",
        default=DEFAULT_ADAPTER,
        metavar="MODULE:ATTRIBUTE",
        help="rollout function class, or legacy generate_rollout(args, rollout_id, data_source, "
        f"evaluation) function, under test (default: {DEFAULT_ADAPTER})",
    )
    group.addoption(
        "--replacement-error",
        default=DEFAULT_REPLACEMENT_ERROR,
        metavar="MODULE:CLASS",
        help="the adapter's documented error for running out of group replacements "
        f"(default: {DEFAULT_REPLACEMENT_ERROR})",
    )
    group.addoption(
        "--conformance-report",
        default=DEFAULT_REPORT,
        metavar="PATH",
        help="write the clause report to PATH.md and PATH.json, relative to the rootdir "
        f"(default: {DEFAULT_REPORT}); 'none' writes nothing",
    )
    group.addoption(
        "--clause",
        action="append",
        default=[],
        metavar="ID",
        help="run only the tests that check this clause (repeatable)",
    )
    group.addoption(
        "--call-deadline",
        type=float,
        default=DEFAULT_CALL_DEADLINE_S,
        metavar="SECONDS",
        help="a rollout call that has not returned after this long fails its test as a hang "
        f"(default: {DEFAULT_CALL_DEADLINE_S:.0f})",
    )
    group.addoption(
        "--conformance-profile",
        choices=PROFILES,
        default=None,
        help=f"hypothesis budget: ci (fast, default) or long; also ${PROFILE_ENV}",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "clause(*ids): the conformance clauses a test checks (conformance/clauses.py)"
    )
    profile = config.getoption("--conformance-profile")
    if profile:
        # Property tests read the budget when their module is imported, after configure.
        os.environ[PROFILE_ENV] = profile
    if not config.pluginmanager.has_plugin("conformance-snapshots"):
        config.pluginmanager.register(snapshots, "conformance-snapshots")
    if not config.pluginmanager.has_plugin("conformance-reporter"):
        config.pluginmanager.register(ConformanceReporter(config), "conformance-reporter")


def report_base(config: pytest.Config) -> Path | None:
    value = config.getoption("--conformance-report")
    if value.lower() == "none":
        return None
    path = Path(value)
    if path.suffix in (".md", ".json"):
        path = path.with_suffix("")
    return path if path.is_absolute() else config.rootpath / path


class ConformanceReporter:
    """Collects each test's outcome and writes the clause report at the end of the session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.clauses_by_test: dict[str, tuple[str, ...]] = {}
        # The deployment ("<topology>@<sglang version>") a test ran under, when it has one.
        self.deployment_of: dict[str, str] = {}
        self.results: dict[str, ItemResult] = {}
        self.written: list[Path] = []
        self.summary: Mapping[str, int] = {}

    # Last, so that syrupy records every collected test before --clause drops some: it then
    # knows the run was selective and keeps the snapshots of the tests that did not run
    # (when what it saw collected equals what ran, an update deletes every snapshot unused).
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        unknown = sorted(
            {cid for item in items for mark in item.iter_markers("clause") for cid in mark.args}
            - set(CLAUSES)
        )
        if unknown:
            raise pytest.UsageError(
                f"Unknown conformance clause id(s) {', '.join(unknown)}: add them to "
                "conformance/clauses.py or fix the marker."
            )
        wanted = set(self.config.getoption("--clause"))
        if wanted:
            unknown_wanted = sorted(wanted - set(CLAUSES))
            if unknown_wanted:
                raise pytest.UsageError(
                    f"--clause {', '.join(unknown_wanted)}: no such clause in conformance/clauses.py"
                )
            keep = [
                i for i in items if wanted & {c for m in i.iter_markers("clause") for c in m.args}
            ]
            dropped = [i for i in items if i not in keep]
            if dropped:
                self.config.hook.pytest_deselected(items=dropped)
                items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # session.items is the final selection, after -k/-m deselection.
        for item in session.items:
            ids = tuple(cid for mark in item.iter_markers("clause") for cid in mark.args)
            if ids:
                self.clauses_by_test[item.nodeid] = ids
                callspec = getattr(item, "callspec", None)
                deployment = callspec.params.get("deployment_world") if callspec else None
                if isinstance(deployment, str):
                    self.deployment_of[item.nodeid] = deployment

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.clauses_by_test:
            return
        previous = self.results.get(report.nodeid)
        if previous is not None and previous.outcome in (Outcome.FAILED, Outcome.SKIPPED):
            return  # a failed or skipped setup decides the test; later phases cannot undo it
        outcome, reason = _phase_outcome(report)
        if outcome is None:
            return
        duration = (previous.duration_s if previous else 0.0) + report.duration
        self.results[report.nodeid] = ItemResult(
            report.nodeid,
            outcome,
            reason,
            round(duration, 3),
            self.deployment_of.get(report.nodeid, ""),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        base = report_base(self.config)
        if base is None or not self.clauses_by_test:
            return
        versions = {
            **installed_versions(("verifiers", "renderers", "miles-verifiers")),
            "python": platform.python_version(),
        }
        report = build_report(
            self.config.getoption("--adapter"),
            versions,
            datetime.now(UTC).isoformat(timespec="seconds"),
            clause_results(CLAUSES, self.clauses_by_test, self.results),
        )
        base.parent.mkdir(parents=True, exist_ok=True)
        for suffix, text in ((".md", report.to_markdown()), (".json", report.to_json())):
            path = base.with_suffix(suffix)
            path.write_text(text, encoding="utf-8")
            self.written.append(path)
        self.summary = report.counts

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        drift = drift_lines(self.config.stash.get(DRIFT_KEY, []))
        if drift:
            updating = self.config.option.update_snapshots
            terminalreporter.write_sep("-", "snapshot drift summary")
            terminalreporter.write_line(
                "Snapshots rewritten by this run:"
                if updating
                else f"Snapshots that differ from the committed ones (accept with `{REFRESH_COMMAND}`):"
            )
            for line in drift:
                terminalreporter.write_line(f"  {line}")
        if self.written:
            terminalreporter.write_sep("-", "conformance report")
            counts = ", ".join(f"{n} {k}" for k, n in self.summary.items() if n)
            terminalreporter.write_line(f"clauses: {counts}")
            for path in self.written:
                terminalreporter.write_line(f"written: {path}")


def _phase_outcome(report: pytest.TestReport) -> tuple[Outcome | None, str]:
    if report.failed:
        return Outcome.FAILED, _crash_message(report)
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return Outcome.SKIPPED, f"xfail: {report.wasxfail}"
        longrepr = report.longrepr
        reason = (
            longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        )
        return Outcome.SKIPPED, reason.removeprefix("Skipped: ")
    if report.when == "call":
        return Outcome.PASSED, ""
    return None, ""


def _crash_message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return f"{report.when}: {crash.message}"
    return f"{report.when}: {str(report.longrepr).strip().splitlines()[-1] if report.longrepr else 'failed'}"
