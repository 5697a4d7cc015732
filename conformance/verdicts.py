"""One verdict per clause: assertion blocks that each belong to one clause.

A test that checks several clauses puts each clause's assertions in its own block::

    def test_x(verdicts, ...):
        with verdicts.check("GRP-1"):
            assert ...
        with verdicts.check("GRP-2"):
            assert ...

A failing block fails its clause only and the test goes on (soft), so later blocks of other
clauses still run; the test then fails at its end with :class:`ClauseFailures`, listing every
failed clause with its evidence. ``check(..., hard=True)`` stops the test at once when the rest
depends on the block. In a hypothesis test the failures of one example end that example, so
hypothesis reports (and under the long profile shrinks) it.

:func:`decide` turns what one test did into a verdict per clause; it is pure, and the plugin
feeds it what pytest observed. A single-clause test may keep plain asserts: the whole test
decides its clause.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum

from miles_verifiers_conformance.clauses import CLAUSES


class Verdict(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_DECIDED = "not decided"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    # The evidence of a failure, or why the clause was not decided; empty for a pass.
    detail: str = ""


class ClauseFailures(AssertionError):
    """The clauses whose blocks failed in a test, with their evidence."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        self.failures = dict(failures)
        lines = [f"{cid}: {evidence}" for cid, evidence in self.failures.items()]
        super().__init__(f"clause(s) failed: {', '.join(self.failures)}\n" + "\n".join(lines))


@dataclass
class Check:
    """One block's handle: ``ok`` says whether it passed (to skip work that depends on it)."""

    clause: str
    ok: bool = True


@dataclass(repr=False)
class ClauseBook:
    """What the blocks of one test decided, across all its (hypothesis) examples."""

    marked: tuple[str, ...]
    passed_blocks: dict[str, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    # Clauses that failed in the example now running (reset per hypothesis example).
    failed_now: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # shown in hypothesis' falsifying examples
        return "verdicts"

    @property
    def used_blocks(self) -> bool:
        return bool(self.passed_blocks or self.failures)

    @contextmanager
    def check(self, clause: str, *, hard: bool = False) -> Iterator[Check]:
        """A block of assertions that decides ``clause`` (one of the test's marked clauses)."""
        if clause not in CLAUSES:
            raise ValueError(
                f"verdicts.check({clause!r}): no such clause in conformance/clauses.py"
            )
        if clause not in self.marked:
            raise ValueError(
                f"verdicts.check({clause!r}): the test is not marked with it; add it to "
                f"@pytest.mark.clause (marked: {', '.join(self.marked) or 'none'})"
            )
        handle = Check(clause)
        try:
            yield handle
        except Exception as error:
            if _is_hypothesis_control(error):
                raise
            handle.ok = False
            # The latest failing example wins: under shrinking it is the minimal one.
            self.failures[clause] = _evidence(error)
            self.failed_now.append(clause)
            if hard:
                raise ClauseFailures({c: self.failures[c] for c in self.failed_now}) from error
        else:
            self.passed_blocks[clause] = self.passed_blocks.get(clause, 0) + 1

    def begin_example(self) -> None:
        self.failed_now.clear()

    def raise_failures_now(self) -> None:
        """End the test (or the hypothesis example) when a block of it failed."""
        if self.failed_now:
            raise ClauseFailures({c: self.failures[c] for c in dict.fromkeys(self.failed_now)})


def _is_hypothesis_control(error: BaseException) -> bool:
    try:
        from hypothesis.errors import HypothesisException
    except ImportError:  # pragma: no cover - hypothesis is a dependency of the suite
        return False
    return isinstance(error, HypothesisException)


def _evidence(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass(frozen=True)
class Stop:
    """How a test phase ended, as the plugin saw it."""

    phase: str  # "setup", "call" or "teardown"
    kind: str  # "passed", "clause_failures", "error", "skipped"
    message: str = ""
    # Hypothesis' falsifying example (and other notes) of the error, when there is one.
    notes: str = ""


def decide(
    book: ClauseBook,
    stop: Stop,
    *,
    attributed: Mapping[str, str] | None = None,
) -> dict[str, Decision]:
    """Each clause the test marks (plus any ``attributed`` to it) with its verdict.

    ``attributed`` maps clauses the failure's evidence points at (a sampling key the engine
    refused: TRP-1) to that evidence; it applies when the test stopped on an error, and the
    test's own undecided clauses then say the error came from there.
    """
    suffix = f"\n{stop.notes}" if stop.notes else ""
    decisions: dict[str, Decision] = {}
    if stop.kind == "skipped":
        return {c: Decision(Verdict.NOT_DECIDED, f"skipped: {stop.message}") for c in book.marked}
    if stop.phase == "setup" and stop.kind == "error":
        return {
            c: Decision(Verdict.NOT_DECIDED, f"set-up failed before the test ran: {stop.message}")
            for c in book.marked
        }
    for cid, evidence in book.failures.items():
        decisions[cid] = Decision(Verdict.FAILED, evidence + suffix)
    blame = dict(attributed or {}) if stop.kind == "error" else {}
    for cid, evidence in blame.items():
        decisions.setdefault(cid, Decision(Verdict.FAILED, evidence + suffix))
    for cid in book.marked:
        if cid in decisions:
            continue
        decisions[cid] = _undecided_or_passed(cid, book, stop, blame, suffix)
    return decisions


def _undecided_or_passed(
    cid: str, book: ClauseBook, stop: Stop, blame: Mapping[str, str], suffix: str
) -> Decision:
    if stop.kind == "error" and stop.phase == "teardown":
        return Decision(Verdict.NOT_DECIDED, f"teardown failed: {stop.message}")
    if stop.kind == "error":
        if blame:
            return Decision(
                Verdict.NOT_DECIDED,
                f"the test stopped on an error caused by {', '.join(blame)} "
                f"(see there): {stop.message}",
            )
        if len(book.marked) == 1:
            return Decision(Verdict.FAILED, stop.message + suffix)  # the whole test decides
        return Decision(
            Verdict.NOT_DECIDED,
            f"the test stopped before its check, on an error outside any clause block: "
            f"{stop.message}{suffix}",
        )
    if book.used_blocks and not book.passed_blocks.get(cid):
        failed = ", ".join(book.failures)
        why = f" (it stopped after {failed} failed)" if failed else ""
        return Decision(Verdict.NOT_DECIDED, f"no check of it ran in this test{why}")
    return Decision(Verdict.PASSED)


def combine(decisions: Sequence[Decision]) -> Verdict:
    """A clause over all the tests that decided it: any failure fails it; else any pass
    passes it; else it is not decided."""
    verdicts = {d.verdict for d in decisions}
    for candidate in (Verdict.FAILED, Verdict.PASSED):
        if candidate in verdicts:
            return candidate
    return Verdict.NOT_DECIDED
