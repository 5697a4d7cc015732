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

import functools
import os
import platform
from collections.abc import Generator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance import snapshots
from miles_verifiers_conformance.budget import (
    PROFILE_ENV,
    PROFILES,
    SMOKE_DEPLOYMENT,
    SMOKE_EPISODE_WORKERS,
    profile,
)
from miles_verifiers_conformance.clauses import CLAUSES, Tier
from miles_verifiers_conformance.drift import DriftEntry, drift_lines
from miles_verifiers_conformance.report import (
    RecordedTest,
    build_report,
    clause_results,
    record_from_wire,
    record_to_wire,
)
from miles_verifiers_conformance.snapshots import DRIFT_KEY, REFRESH_COMMAND, installed_versions
from miles_verifiers_conformance.verdicts import ClauseBook, ClauseFailures, Stop, decide

DEFAULT_ADAPTER = "miles_verifiers:VerifiersRolloutFn"
DEFAULT_REPORT = "reports/conformance"
DEFAULT_REPLACEMENT_ERROR = "miles_verifiers.trainer.scheduling:DispatchBudgetError"
DEFAULT_CALL_DEADLINE_S = 120.0

# Under pytest-xdist the tests run in worker processes and the controller writes the report.
# A test's teardown report carries its decisions (and its snapshot drift) to the controller as
# extra report attributes, which pytest serializes with the report; each worker sends the
# selection it collected (clause ids and deployment per test) in its ``workeroutput`` as it
# ends, so tests that never ran are still reported as not run. Without xdist the same reports
# come back to this process, so both runs build the report from the same data.
RECORD_ATTR = "conformance_record"
DRIFT_ATTR = "conformance_drift"
SELECTION_KEY = "conformance_selection"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "Miles/Verifiers conformance suite")
    # Registered by the installed entry point and re-exported by conftests: add options once.
    if any("--adapter" in option.names() for option in group.options):
        return
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
        help="write the clause report to PATH.md and PATH.json, relative to the current directory "
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
        help=f"hypothesis budget: ci (fast, default), long, or smoke (one generated example "
        f"per property); also ${PROFILE_ENV}",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Checked here, before collection, so that under pytest-xdist the controller stops the run
    # with this message instead of each worker failing its collection.
    unknown_wanted = sorted(set(config.getoption("--clause")) - set(CLAUSES))
    if unknown_wanted:
        raise pytest.UsageError(
            f"--clause {', '.join(unknown_wanted)}: no such clause in conformance/clauses.py"
        )
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
    # Relative to where pytest runs, not the rootdir: run from anywhere (`--pyargs`), the
    # rootdir may be the installed package's folder.
    return path if path.is_absolute() else config.invocation_params.dir / path


def _deployment(item: pytest.Item) -> str | None:
    """The deployment ("<topology>@<sglang version>") a test runs under, when it has one."""
    callspec = getattr(item, "callspec", None)
    deployment = callspec.params.get("deployment_world") if callspec else None
    return deployment if isinstance(deployment, str) else None


def _in_smoke_matrix(item: pytest.Item) -> bool:
    """Under smoke: a test outside the deployment matrix, or the matrix's one smoke row."""
    callspec = getattr(item, "callspec", None)
    workers = callspec.params.get("episode_workers") if callspec else None
    return _deployment(item) in (None, SMOKE_DEPLOYMENT) and workers in (
        None,
        SMOKE_EPISODE_WORKERS,
    )


class ConformanceReporter:
    """Collects what each test decided about its clauses and writes the report at the end.

    Each test gets a :class:`ClauseBook` (the ``verdicts`` fixture) for its clause blocks; at
    the end of the test its blocks, how it stopped, and what the engine refused decide one
    verdict per clause (``verdicts.decide``).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.clauses_by_test: dict[str, tuple[str, ...]] = {}
        # The deployment ("<topology>@<sglang version>") a test ran under, when it has one.
        self.deployment_of: dict[str, str] = {}
        self.books: dict[str, ClauseBook] = {}
        self.stops: dict[str, Stop] = {}
        self.blamed: dict[str, dict[str, str]] = {}
        self.durations: dict[str, float] = {}
        self.records: dict[str, RecordedTest] = {}
        self.written: list[Path] = []
        self.summary: Mapping[str, Mapping[str, int]] = {}

    @pytest.fixture
    def verdicts(self, request: pytest.FixtureRequest) -> ClauseBook:
        """The test's clause blocks: ``with verdicts.check("GRP-2"): assert ...``."""
        return self.book_for(request.node)

    def book_for(self, item: pytest.Item) -> ClauseBook:
        book = self.books.get(item.nodeid)
        if book is None:
            book = ClauseBook(marked_clauses(item))
            self.books[item.nodeid] = book
        return book

    # Last, so that syrupy records every collected test before --clause drops some: it then
    # knows the run was selective and keeps the snapshots of the tests that did not run
    # (when what it saw collected equals what ran, an update deletes every snapshot unused).
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        unknown = sorted({cid for item in items for cid in marked_clauses(item)} - set(CLAUSES))
        if unknown:
            raise pytest.UsageError(
                f"Unknown conformance clause id(s) {', '.join(unknown)}: add them to "
                "conformance/clauses.py or fix the marker."
            )
        wanted = set(self.config.getoption("--clause"))
        keep = [
            item
            for item in items
            if (not wanted or wanted & set(marked_clauses(item)))
            and (profile() != "smoke" or _in_smoke_matrix(item))
        ]
        if len(keep) < len(items):
            kept = set(keep)
            self.config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # session.items is the final selection, after -k/-m deselection.
        for item in session.items:
            ids = marked_clauses(item)
            if ids:
                self.clauses_by_test[item.nodeid] = ids
                deployment = _deployment(item)
                if deployment is not None:
                    self.deployment_of[item.nodeid] = deployment
        workeroutput = getattr(self.config, "workeroutput", None)  # set on xdist workers only
        if workeroutput is not None:
            workeroutput[SELECTION_KEY] = {
                nodeid: [list(ids), self.deployment_of.get(nodeid, "")]
                for nodeid, ids in self.clauses_by_test.items()
            }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """On the pytest-xdist controller, as each worker ends: the selection it collected.

        Every worker collects the same tests in the same order, so the report lists them in
        the order of a run without xdist. A worker that crashed sends nothing; its
        replacement collects again.
        """
        selection = getattr(node, "workeroutput", {}).get(SELECTION_KEY, {})
        for nodeid, (ids, deployment) in selection.items():
            self.clauses_by_test.setdefault(nodeid, tuple(ids))
            if deployment:
                self.deployment_of.setdefault(nodeid, deployment)

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        if pyfuncitem.nodeid not in self.clauses_by_test:
            return (yield)
        book = self.book_for(pyfuncitem)
        handle = getattr(pyfuncitem.obj, "hypothesis", None)
        original = getattr(handle, "inner_test", None)
        if handle is not None and original is not None:
            # Each example's failed blocks end that example, so hypothesis reports it.
            @functools.wraps(original)
            def per_example(*args: Any, **kwargs: Any) -> Any:
                book.begin_example()
                result = original(*args, **kwargs)
                book.raise_failures_now()
                return result

            handle.inner_test = per_example
        try:
            result = yield
        finally:
            if handle is not None and original is not None:
                handle.inner_test = original
        book.raise_failures_now()
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        nodeid = item.nodeid
        drift = item.stash.get(DRIFT_KEY, [])
        if report.when == "teardown" and drift:
            setattr(report, DRIFT_ATTR, [[e.case, e.old_text, e.new_text] for e in drift])
        if nodeid not in self.clauses_by_test:
            return report
        stop = _stop_of(report, call)
        previous = self.stops.get(nodeid)
        # The first phase that decides wins; a teardown error still undoes a pass.
        if stop is not None and (previous is None or previous.kind == "passed"):
            self.stops[nodeid] = stop
            if stop.kind == "error" and stop.phase == "call":
                self.blamed[nodeid] = blame_from_engine(item)
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + report.duration
        if report.when == "teardown":
            book = self.books.get(nodeid) or ClauseBook(self.clauses_by_test[nodeid])
            record = RecordedTest(
                decide(
                    book,
                    self.stops.get(nodeid, Stop("call", "passed")),
                    attributed=self.blamed.get(nodeid),
                ),
                round(self.durations[nodeid], 3),
                self.deployment_of.get(nodeid, ""),
            )
            setattr(report, RECORD_ATTR, record_to_wire(record))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Gathers what the teardown reports carry (from xdist workers, or from this process)."""
        drift = getattr(report, DRIFT_ATTR, None)
        if drift:
            self.config.stash.setdefault(DRIFT_KEY, []).extend(DriftEntry(*e) for e in drift)
        record = getattr(report, RECORD_ATTR, None)
        if record is not None:
            self.records[report.nodeid] = record_from_wire(record)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        base = report_base(self.config)
        if hasattr(self.config, "workerinput"):  # an xdist worker: the controller writes it
            return
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
            clause_results(CLAUSES, self.clauses_by_test, self.records),
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
            for tier in Tier:
                counts = self.summary.get(tier.name.lower(), {})
                tally = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "none"
                terminalreporter.write_line(f"{tier.value}: {tally}")
            for path in self.written:
                terminalreporter.write_line(f"written: {path}")


def marked_clauses(item: pytest.Item) -> tuple[str, ...]:
    return tuple(dict.fromkeys(cid for mark in item.iter_markers("clause") for cid in mark.args))


def _stop_of(report: pytest.TestReport, call: pytest.CallInfo[None]) -> Stop | None:
    """How a phase ended when it decides the test (a failure or a skip, or a passed call)."""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return Stop(report.when, "skipped", f"xfail: {report.wasxfail}")
        longrepr = report.longrepr
        reason = (
            longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        )
        return Stop(report.when, "skipped", reason.removeprefix("Skipped: "))
    if report.failed:
        error = call.excinfo.value if call.excinfo is not None else None
        notes = "\n".join(getattr(error, "__notes__", ()) or ())
        if isinstance(error, ClauseFailures) or _only_clause_failures(error):
            return Stop(report.when, "clause_failures", str(error), notes)
        return Stop(report.when, "error", _crash_message(report, error), notes)
    if report.when == "call":
        return Stop("call", "passed")
    return None


def _only_clause_failures(error: BaseException | None) -> bool:
    """An exception group whose every leaf is a clause failure: hypothesis raises one (a
    ``FlakyFailure``) when a failing example passes on replay, and one per distinct bug when
    it reports several. The clauses are decided by their blocks either way."""
    if not isinstance(error, BaseExceptionGroup):
        return False
    _, rest = error.split(ClauseFailures)
    return rest is None


def blame_from_engine(item: pytest.Item) -> dict[str, str]:
    """TRP-1 with its evidence when the engine refused sampling keys it does not accept
    during the test: the test's error then comes from there, whatever clause it checks."""
    from miles_verifiers_testkit.miles.evidence import (
        accepted_sampling_keys,
        describe_refusals,
        refused_answers,
        unknown_keys,
    )

    funcargs = getattr(item, "funcargs", {})
    world = funcargs.get("world") or funcargs.get("deployment_world")
    engine = getattr(world, "engine", None)
    if engine is None or not hasattr(engine, "calls"):
        return {}
    refused = refused_answers(engine.calls(), accepted_sampling_keys(engine))
    keys = unknown_keys(refused)
    if not keys:
        return {}
    offending = [a for a in refused if a.unknown_keys]
    return {
        "TRP-1": f"the adapter sent sampling key(s) {', '.join(keys)} that the engine does "
        f"not accept; {describe_refusals(offending)}"
    }


def _crash_message(report: pytest.TestReport, error: BaseException | None) -> str:
    if error is not None:
        text = str(error).strip()
        return (
            f"{report.when}: {type(error).__name__}: {text}"
            if text
            else f"{report.when}: {type(error).__name__}"
        )
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return f"{report.when}: {crash.message}"
    return f"{report.when}: {str(report.longrepr).strip().splitlines()[-1] if report.longrepr else 'failed'}"
