"""One clause report from the reports of several pytest processes (one per test file).

Against Miles' own adapter a call that misses its deadline keeps running in the background
(it resamples without bound), so each test file runs in a process of its own and the run's
report is merged from theirs. Pure functions; ``__main__`` reads and writes the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from miles_verifiers_conformance.report import (
    NOT_RUN,
    ClauseResult,
    RecordedTest,
    clause_results,
)
from miles_verifiers_conformance.verdicts import Decision, Verdict


def _ran(decisions: Mapping[str, Decision]) -> bool:
    return any(d.detail != NOT_RUN for d in decisions.values())


def merge_clause_results(
    parts: Iterable[str], clauses: Mapping[str, str]
) -> tuple[tuple[ClauseResult, ...], dict[str, str]]:
    """Clause results over every part report (JSON texts), and the versions they name.

    A test seen in several parts keeps the decisions of the part that ran it (a part that
    did not run it records it as not run).
    """
    clauses_by_test: dict[str, list[str]] = {}
    records: dict[str, RecordedTest] = {}
    versions: dict[str, str] = {}
    for text in parts:
        data = json.loads(text)
        versions.update(data.get("versions", {}))
        decisions_by_test: dict[str, dict[str, Decision]] = {}
        timing: dict[str, tuple[float, str]] = {}
        for clause in data["clauses"]:
            for test in clause["tests"]:
                nodeid = test["nodeid"]
                ids = clauses_by_test.setdefault(nodeid, [])
                if clause["id"] not in ids:
                    ids.append(clause["id"])
                decisions_by_test.setdefault(nodeid, {})[clause["id"]] = Decision(
                    Verdict(test["outcome"]), test.get("detail", "")
                )
                timing[nodeid] = (float(test.get("duration_s", 0.0)), test.get("deployment", ""))
        for nodeid, decisions in decisions_by_test.items():
            earlier = records.get(nodeid)
            if earlier is None or not _ran(earlier.decisions):
                duration, deployment = timing[nodeid]
                records[nodeid] = RecordedTest(decisions, duration, deployment)
    known = {nodeid: [c for c in ids if c in clauses] for nodeid, ids in clauses_by_test.items()}
    ran = {nodeid: r for nodeid, r in records.items() if _ran(r.decisions)}
    return clause_results(clauses, known, ran), versions
