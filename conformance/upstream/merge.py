"""One clause report from the reports of several pytest processes (one per test file).

Against Miles' own adapter a call that misses its deadline keeps running in the background
(it resamples without bound), so each test file runs in a process of its own and the run's
report is merged from theirs. Pure functions; ``__main__`` reads and writes the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from miles_verifiers_conformance.report import ClauseResult, ItemResult, Outcome, clause_results


def merge_clause_results(
    parts: Iterable[str], clauses: Mapping[str, str]
) -> tuple[tuple[ClauseResult, ...], dict[str, str]]:
    """Clause results over every part report (JSON texts), and the versions they name.

    A test seen in several parts keeps the result of the part that ran it (a part that
    did not run it lists it as "not run").
    """
    clauses_by_test: dict[str, list[str]] = {}
    results: dict[str, ItemResult] = {}
    versions: dict[str, str] = {}
    for text in parts:
        data = json.loads(text)
        versions.update(data.get("versions", {}))
        for clause in data["clauses"]:
            for test in clause["tests"]:
                ids = clauses_by_test.setdefault(test["nodeid"], [])
                if clause["id"] not in ids:
                    ids.append(clause["id"])
                result = ItemResult(
                    test["nodeid"],
                    Outcome(test["outcome"]),
                    test.get("reason", ""),
                    float(test.get("duration_s", 0.0)),
                    test.get("deployment", ""),
                )
                earlier = results.get(test["nodeid"])
                if earlier is None or earlier.outcome == Outcome.NOT_RUN:
                    results[test["nodeid"]] = result
    known = {nodeid: [c for c in ids if c in clauses] for nodeid, ids in clauses_by_test.items()}
    return clause_results(clauses, known, results), versions
