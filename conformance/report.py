"""The conformance report: one verdict per clause, rendered as Markdown and JSON.

Pure functions only; ``plugin.py`` feeds them each test's decisions (``verdicts.decide``) and
writes the files. Every clause of the table gets exactly one verdict: passed, failed (with
its evidence) or not decided (with why). The tiers of ``clauses.TIERS`` are kept apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from miles_verifiers_conformance.clauses import TIERS, Tier
from miles_verifiers_conformance.verdicts import Decision, Verdict, combine

NOT_RUN = "not run: the session ended before this test ran (-x, an interrupt or a crash)"
NO_TEST = "no test of this run checks it (deselected, or not collected)"


@dataclass(frozen=True)
class DecidedBy:
    """What one test decided about one clause."""

    nodeid: str
    verdict: Verdict
    detail: str = ""
    duration_s: float = 0.0
    # "<topology>@<sglang version>" for runs under a production deployment, else "".
    deployment: str = ""


@dataclass(frozen=True)
class RecordedTest:
    """One test that ran: its decision per clause, its duration and deployment."""

    decisions: Mapping[str, Decision]
    duration_s: float = 0.0
    deployment: str = ""


def record_to_wire(record: RecordedTest) -> dict[str, object]:
    """``record`` as plain data (str, float, dict): what a pytest-xdist worker can send."""
    return {
        "decisions": {cid: [d.verdict.value, d.detail] for cid, d in record.decisions.items()},
        "duration_s": record.duration_s,
        "deployment": record.deployment,
    }


def record_from_wire(data: Mapping[str, Any]) -> RecordedTest:
    """The inverse of :func:`record_to_wire`."""
    return RecordedTest(
        {cid: Decision(Verdict(v), detail) for cid, (v, detail) in data["decisions"].items()},
        float(data["duration_s"]),
        str(data["deployment"]),
    )


@dataclass(frozen=True)
class ClauseResult:
    id: str
    text: str
    tier: Tier
    verdict: Verdict
    tests: tuple[DecidedBy, ...] = ()
    # Why no test decided it, when none did (e.g. deselected).
    why: str = ""

    @property
    def evidence(self) -> list[str]:
        """The failures behind a failed clause."""
        return [f"{t.nodeid}: {t.detail}" for t in self.tests if t.verdict == Verdict.FAILED]

    @property
    def reasons(self) -> list[str]:
        """Why each test left it undecided (and the clause-level reason)."""
        own = [f"{t.nodeid}: {t.detail}" for t in self.tests if t.verdict == Verdict.NOT_DECIDED]
        return own or ([self.why] if self.why else [])


@dataclass(frozen=True)
class ConformanceReport:
    adapter: str
    versions: Mapping[str, str]
    created: str
    clauses: tuple[ClauseResult, ...]
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {
            "adapter": self.adapter,
            "versions": dict(self.versions),
            "created": self.created,
            "summary": {tier: dict(c) for tier, c in self.counts.items()},
            "clauses": [
                {
                    "id": c.id,
                    "text": c.text,
                    "tier": c.tier.name.lower(),
                    "outcome": c.verdict.value,
                    "evidence": c.evidence,
                    "reasons": c.reasons if c.verdict == Verdict.NOT_DECIDED else [],
                    "tests": [
                        {
                            "nodeid": t.nodeid,
                            "outcome": t.verdict.value,
                            "detail": t.detail,
                            "duration_s": t.duration_s,
                            "deployment": t.deployment,
                        }
                        for t in c.tests
                    ],
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
        ]
        for tier in Tier:
            lines.append(f"- {tier.value}: {_summary(self.counts.get(tier.name.lower(), {}))}")
        for tier in Tier:
            rows = [c for c in self.clauses if c.tier == tier]
            if not rows:
                continue
            lines += [
                "",
                f"## {tier.value.capitalize()}",
                "",
                "| Clause | Verdict | Statement | Tests |",
                "| --- | --- | --- | --- |",
            ]
            for c in rows:
                tally = _tally(t.verdict for t in c.tests)
                tests = ", ".join(f"{n} {k}" for k, n in tally.items()) or "none"
                lines.append(f"| {c.id} | {_badge(c.verdict)} | {_md_cell(c.text)} | {tests} |")
        lines += _deployment_lines(self.clauses)
        failed = [c for c in self.clauses if c.verdict == Verdict.FAILED]
        if failed:
            lines += ["", "## Failed: evidence", ""]
            for c in failed:
                lines += [f"### {c.id}", ""]
                for evidence in c.evidence:
                    lines += ["```text", *_head(evidence), "```", ""]
        undecided = [c for c in self.clauses if c.verdict == Verdict.NOT_DECIDED]
        if undecided:
            lines += ["", "## Not decided: why", ""]
            for c in undecided:
                lines.append(f"- {c.id}: " + "; ".join(_first_line(r) for r in c.reasons))
        return "\n".join(lines).rstrip() + "\n"


def _summary(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts.get(v.value, 0)} {v.value}" for v in Verdict)


def _deployment_lines(clauses: Sequence[ClauseResult]) -> list[str]:
    """A table of every clause run under a production deployment, one row per deployment."""
    rows: list[str] = []
    for c in clauses:
        by_deployment: dict[str, list[Decision]] = {}
        for t in c.tests:
            if t.deployment:
                by_deployment.setdefault(t.deployment, []).append(Decision(t.verdict))
        for deployment, decisions in by_deployment.items():
            topology, _, version = deployment.partition("@")
            rows.append(f"| {c.id} | {topology} | {version} | {_badge(combine(decisions))} |")
    if not rows:
        return []
    header = [
        "",
        "## By deployment",
        "",
        "| Clause | Topology | SGLang | Verdict |",
        "| --- | --- | --- | --- |",
    ]
    return header + rows


def clause_results(
    clauses: Mapping[str, str],
    clauses_by_test: Mapping[str, Sequence[str]],
    records: Mapping[str, RecordedTest],
) -> tuple[ClauseResult, ...]:
    """One result per clause of the table, in table order.

    ``clauses_by_test`` maps each selected test to the clause ids it carries; ``records``
    holds the tests that ran (a decision may name a clause the test does not carry, when its
    failure's evidence points there). A selected test without a record did not run.
    """
    tests_by_clause: dict[str, list[DecidedBy]] = {cid: [] for cid in clauses}
    for nodeid, ids in clauses_by_test.items():
        record = records.get(nodeid)
        if record is None:
            for cid in ids:
                tests_by_clause[cid].append(DecidedBy(nodeid, Verdict.NOT_DECIDED, NOT_RUN))
            continue
        for cid, decision in record.decisions.items():
            if cid in tests_by_clause:
                tests_by_clause[cid].append(
                    DecidedBy(
                        nodeid,
                        decision.verdict,
                        decision.detail,
                        record.duration_s,
                        record.deployment,
                    )
                )
    return tuple(
        ClauseResult(
            cid,
            text,
            TIERS[cid],
            combine([Decision(t.verdict) for t in tests_by_clause[cid]]),
            tuple(tests_by_clause[cid]),
            "" if tests_by_clause[cid] else NO_TEST,
        )
        for cid, text in clauses.items()
    )


def build_report(
    adapter: str, versions: Mapping[str, str], created: str, clauses: tuple[ClauseResult, ...]
) -> ConformanceReport:
    counts = {t.name.lower(): {v.value: 0 for v in Verdict} for t in Tier}
    for c in clauses:
        counts[c.tier.name.lower()][c.verdict.value] += 1
    return ConformanceReport(adapter, dict(versions), created, clauses, counts)


def _tally(verdicts: Iterable[Verdict]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for v in verdicts:
        tally[v.value] = tally.get(v.value, 0) + 1
    return tally


def _badge(verdict: Verdict) -> str:
    return {
        Verdict.PASSED: "✅ passed",
        Verdict.FAILED: "❌ failed",
        Verdict.NOT_DECIDED: "· not decided",
    }[verdict]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Lines of one piece of evidence the Markdown shows (the JSON keeps it whole): enough for the
# message and hypothesis' falsifying example.
EVIDENCE_LINES = 16


def _head(text: str) -> list[str]:
    lines = text.strip().replace("`" * 3, "'" * 3).splitlines()
    more = [f"... ({len(lines) - EVIDENCE_LINES} more lines in the JSON report)"]
    return lines[:EVIDENCE_LINES] + (more if len(lines) > EVIDENCE_LINES else [])


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.replace("`", "'")[:300]
