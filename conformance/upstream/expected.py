"""Expected clause verdicts for Miles' own adapter, and their comparison with a run's report.

Pure functions only; ``__main__`` reads and writes the files. The expectation file is TOML::

    [clauses.GRP-2]
    expected = "failed"
    why = "the upstream behaviour behind the failure, in a sentence or two"
    also = ["passed"]  # optional: other verdicts some runs give, which ``why`` explains

Every clause of the table has an entry. ``why`` is required for every verdict other than
"passed", and wherever ``also`` lists another: a failure nobody can explain is to be
investigated, not recorded.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass

# The verdicts a conformance report can give a clause ("not decided" is the per-clause
# verdict the report is moving to; accepted here already).
VERDICTS = frozenset({"passed", "failed", "not decided"})
NEEDS_WHY = "TODO: explain the upstream behaviour behind this verdict"


class ExpectationError(ValueError):
    """The expectation file cannot be read; the message names the file, entry and fix."""


@dataclass(frozen=True)
class Expectation:
    expected: str
    why: str = ""
    also: tuple[str, ...] = ()
    """Other verdicts some runs give (the upstream behaviour varies between runs)."""

    @property
    def explained(self) -> bool:
        if self.expected == "passed" and not self.also:
            return True
        return bool(self.why.strip()) and self.why != NEEDS_WHY

    def allows(self, verdict: str) -> bool:
        return verdict == self.expected or verdict in self.also


@dataclass(frozen=True)
class Difference:
    clause: str
    expected: str | None  # None: the clause has no entry in the expectation file
    observed: str | None  # None: the report has no such clause

    def describe(self) -> str:
        if self.expected is None:
            return (
                f"{self.clause}: observed {self.observed!r}, but the expectation file has no entry"
            )
        if self.observed is None:
            return f"{self.clause}: expected {self.expected!r}, but the report has no such clause"
        return f"{self.clause}: expected {self.expected!r}, observed {self.observed!r}"


def parse_expectations(text: str, source: str) -> dict[str, Expectation]:
    """The ``[clauses.ID]`` entries of an expectation file (``source`` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ExpectationError(f"{source} is not valid TOML: {error}") from None
    clauses = data.get("clauses")
    if not isinstance(clauses, dict):
        raise ExpectationError(
            f"{source}: no [clauses.<ID>] tables; regenerate it with --write-expected"
        )
    out: dict[str, Expectation] = {}
    for clause, entry in clauses.items():
        where = f"{source} [clauses.{clause}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("expected"), str):
            raise ExpectationError(f"{where}: give expected = one of {sorted(VERDICTS)}")
        if entry["expected"] not in VERDICTS:
            raise ExpectationError(
                f"{where}: expected = {entry['expected']!r} is not a verdict; use one of {sorted(VERDICTS)}"
            )
        why = entry.get("why", "")
        if not isinstance(why, str):
            raise ExpectationError(f"{where}: why must be a string")
        also = entry.get("also", [])
        if not isinstance(also, list) or not set(also) <= VERDICTS:
            raise ExpectationError(
                f"{where}: also = {also!r}; give a list of verdicts, each one of {sorted(VERDICTS)}"
            )
        out[clause] = Expectation(entry["expected"], why, tuple(also))
    return out


def compare(expected: Mapping[str, Expectation], observed: Mapping[str, str]) -> list[Difference]:
    """Every clause whose observed verdict is not the expected one, in report order."""
    differences = [
        Difference(cid, expected[cid].expected if cid in expected else None, verdict)
        for cid, verdict in observed.items()
        if cid not in expected or not expected[cid].allows(verdict)
    ]
    differences += [
        Difference(cid, e.expected, None) for cid, e in expected.items() if cid not in observed
    ]
    return differences


def unexplained(expected: Mapping[str, Expectation]) -> list[str]:
    """Clauses expected to be other than passed whose ``why`` is missing or still the placeholder."""
    return [cid for cid, e in expected.items() if not e.explained]


def regenerate(
    observed: Mapping[str, str], previous: Mapping[str, Expectation]
) -> dict[str, Expectation]:
    """The expectation for each observed verdict, keeping every ``why`` already written.

    A verdict other than "passed" without an earlier explanation gets the placeholder, which
    the comparison reports until someone replaces it.
    """
    out: dict[str, Expectation] = {}
    for cid, verdict in observed.items():
        before = previous.get(cid)
        why = before.why if before is not None else ""
        if verdict != "passed" and not why.strip():
            why = NEEDS_WHY
        if before is not None and before.allows(verdict):
            out[cid] = before  # a verdict the file already allows keeps its entry whole
        else:
            out[cid] = Expectation(verdict, why)
    return out


def render_expectations(expected: Mapping[str, Expectation], header: str) -> str:
    """The TOML text of an expectation file (strings written as JSON strings, valid TOML)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for cid, e in expected.items():
        lines += ["", f"[clauses.{cid}]", f"expected = {json.dumps(e.expected)}"]
        if e.why:
            lines.append(f"why = {json.dumps(e.why, ensure_ascii=False)}")
        if e.also:
            lines.append(f"also = {json.dumps(list(e.also))}")
    return "\n".join(lines) + "\n"


def behaviour_lines(observed: Mapping[str, str], expected: Mapping[str, Expectation]) -> list[str]:
    """Markdown naming, for each clause upstream does not pass, the behaviour behind it."""
    lines = ["## Upstream behaviour behind each clause it does not pass", ""]
    rows = [
        f"- **{cid}** ({verdict}): {expected[cid].why if cid in expected and expected[cid].why else NEEDS_WHY}"
        for cid, verdict in observed.items()
        if verdict != "passed"
    ]
    return lines + (rows or ["- none"])
