"""The conformance report: clause outcomes from test outcomes, rendered as Markdown and JSON.

Pure functions only; ``plugin.py`` feeds them what pytest observed and writes the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum


class Outcome(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_RUN = "not run"


# A clause takes the worst outcome among its tests: one failure fails the clause; a clause
# passes when a test passed and none failed; it is skipped only when all its tests skipped.
_PRECEDENCE = (Outcome.FAILED, Outcome.PASSED, Outcome.SKIPPED, Outcome.NOT_RUN)


@dataclass(frozen=True)
class ItemResult:
    nodeid: str
    outcome: Outcome
    reason: str = ""
    duration_s: float = 0.0
    # "<topology>@<sglang version>" for runs under a production deployment, else "".
    deployment: str = ""


@dataclass(frozen=True)
class ClauseResult:
    id: str
    text: str
    outcome: Outcome
    tests: tuple[ItemResult, ...] = ()

    @property
    def reasons(self) -> list[str]:
        return [
            f"{t.nodeid}: {t.reason}"
            for t in self.tests
            if t.reason and t.outcome != Outcome.PASSED
        ]


@dataclass(frozen=True)
class ConformanceReport:
    adapter: str
    versions: Mapping[str, str]
    created: str
    clauses: tuple[ClauseResult, ...]
    counts: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {
            "adapter": self.adapter,
            "versions": dict(self.versions),
            "created": self.created,
            "summary": dict(self.counts),
            "clauses": [
                {
                    "id": c.id,
                    "text": c.text,
                    "outcome": c.outcome.value,
                    "tests": [{**asdict(t), "outcome": t.outcome.value} for t in c.tests],
                }
                for c in self.clauses
            ],
        }
        return json.dumps(data, indent=2) + "\n"

    def to_markdown(self) -> str:
        lines = [
            "# Conformance report",
            "",
            f"- Adapter: `{self.adapter}`",
            "- Versions: " + ", ".join(f"{k} {v}" for k, v in self.versions.items()),
            f"- Created: {self.created}",
            "- Summary: " + ", ".join(f"{n} {k}" for k, n in self.counts.items()),
            "",
            "| Clause | Outcome | Statement | Tests |",
            "| --- | --- | --- | --- |",
        ]
        for c in self.clauses:
            tally = _tally(t.outcome for t in c.tests)
            tests = ", ".join(f"{n} {k}" for k, n in tally.items()) or "none"
            lines.append(f"| {c.id} | {_badge(c.outcome)} | {_md_cell(c.text)} | {tests} |")
        lines += _deployment_lines(self.clauses)
        details = [c for c in self.clauses if c.reasons]
        if details:
            lines += ["", "## Failures and skips", ""]
            for c in details:
                lines.append(f"### {c.id} ({c.outcome.value})")
                lines.append("")
                lines += [f"- `{_first_line(r)}`" for r in c.reasons]
                lines.append("")
        return "\n".join(lines).rstrip() + "\n"


def _deployment_lines(clauses: Sequence[ClauseResult]) -> list[str]:
    """A table of every clause run under a production deployment, one row per deployment."""
    rows: list[str] = []
    for c in clauses:
        by_deployment: dict[str, list[Outcome]] = {}
        for t in c.tests:
            if t.deployment:
                by_deployment.setdefault(t.deployment, []).append(t.outcome)
        for deployment, outcomes in by_deployment.items():
            topology, _, version = deployment.partition("@")
            rows.append(f"| {c.id} | {topology} | {version} | {_badge(_combine(outcomes))} |")
    if not rows:
        return []
    header = [
        "",
        "## By deployment",
        "",
        "| Clause | Topology | SGLang | Outcome |",
        "| --- | --- | --- | --- |",
    ]
    return header + rows


def clause_results(
    clauses: Mapping[str, str],
    clauses_by_test: Mapping[str, Sequence[str]],
    results: Mapping[str, ItemResult],
) -> tuple[ClauseResult, ...]:
    """One result per clause of the table, in table order.

    ``clauses_by_test`` maps each collected test to the clause ids it carries; ``results``
    holds the tests that reported. A collected test without a result did not run.
    """
    tests_by_clause: dict[str, list[ItemResult]] = {cid: [] for cid in clauses}
    for nodeid, ids in clauses_by_test.items():
        result = results.get(nodeid, ItemResult(nodeid, Outcome.NOT_RUN, "not run"))
        for cid in ids:
            tests_by_clause[cid].append(result)
    return tuple(
        ClauseResult(
            cid,
            text,
            _combine(t.outcome for t in tests_by_clause[cid]),
            tuple(tests_by_clause[cid]),
        )
        for cid, text in clauses.items()
    )


def build_report(
    adapter: str, versions: Mapping[str, str], created: str, clauses: tuple[ClauseResult, ...]
) -> ConformanceReport:
    counts = {o.value: 0 for o in _PRECEDENCE}
    for c in clauses:
        counts[c.outcome.value] += 1
    return ConformanceReport(adapter, dict(versions), created, clauses, counts)


def _combine(outcomes: Iterable[Outcome]) -> Outcome:
    seen = set(outcomes)
    for candidate in _PRECEDENCE:
        if candidate in seen:
            return candidate
    return Outcome.NOT_RUN


def _tally(outcomes: Iterable[Outcome]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for o in outcomes:
        tally[o.value] = tally.get(o.value, 0) + 1
    return tally


def _badge(outcome: Outcome) -> str:
    return {"passed": "✅ passed", "failed": "❌ failed", "skipped": "⏭ skipped"}.get(
        outcome.value, "· not run"
    )


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.replace("`", "'")[:300]
