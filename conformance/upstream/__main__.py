"""``python -m miles_verifiers_conformance.upstream``: the suite against Miles' own Verifiers adapter.

Run by ``tox -e upstream`` (``MILES_SRC`` names a Miles checkout, installed into the env as
for ``tox -e miles``). It runs the suite on ``verifiers_rollout:VerifiersRolloutFn`` from
``$MILES_SRC/examples/experimental/verifiers`` (the path a Miles user gives it), each test
file in a pytest process of its own (a call past its deadline keeps running in the background
and would take later tests' memory with it), merges their reports, writes the
clause report to ``reports/upstream/conformance.{md,json}`` with the upstream behaviour behind
each clause it does not pass, and exits non-zero when the verdicts differ from
``conformance/upstream/expected.toml`` or an expectation lacks its explanation.

``--write-expected`` rewrites the expectation file from the run instead, keeping every
``why`` already written; new non-passing verdicts get a placeholder to replace. Any other
argument goes to pytest (``-k``, ``--clause``, ``-x``...).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from miles_verifiers_conformance.clauses import CLAUSES
from miles_verifiers_conformance.report import build_report
from miles_verifiers_conformance.upstream.expected import (
    ExpectationError,
    behaviour_lines,
    compare,
    parse_expectations,
    regenerate,
    render_expectations,
    unexplained,
)
from miles_verifiers_conformance.upstream.merge import merge_clause_results

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "conformance" / "upstream" / "expected.toml"
REPORT = ROOT / "reports" / "upstream" / "conformance"
ADAPTER_DIR = Path("examples") / "experimental" / "verifiers"
# As a Miles user names it: --rollout-function-path verifiers_rollout.VerifiersRolloutFn with
# that folder on the path. It has no bounded-replacement error (it resamples without bound).
ADAPTER = "verifiers_rollout:VerifiersRolloutFn"
REPLACEMENT_ERROR = "miles_verifiers_conformance.upstream.miles_process:NoReplacementError"
# Upstream hangs on several clauses; a shorter deadline than the default 120 s bounds the run.
CALL_DEADLINE_S = 60
# A pytest run whose tests ran: all passed (0), some failed (1), or -k left none (5).
PYTEST_RAN = (0, 1, 5)
PARTS = ROOT / "reports" / "upstream" / "parts"
HEADER = """Expected conformance verdicts of Miles' own Verifiers adapter
(examples/experimental/verifiers/verifiers_rollout.py), one entry per clause.
`tox -e upstream` fails when a run's verdicts differ from these.
Regenerate: MILES_SRC=/path/to/miles tox -e upstream -- --write-expected
(keeps every `why`; replace each TODO with the upstream behaviour behind the verdict)."""


def test_files(pytest_args: list[str]) -> tuple[list[str], list[str]]:
    """The suite's test files to run (those named among the arguments, else all but the
    selftests, which check the suite with this project's adapter), and the other arguments."""
    named = [a for a in pytest_args if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    rest = [a for a in pytest_args if a not in named]
    if named:
        return named, rest
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "conformance").glob("test_*.py")), rest


def pytest_command(target: str, report: Path, pytest_args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        target,
        "-p",
        "no:randomly",
        "-p",
        "miles_verifiers_conformance.upstream.miles_process",
        "--adapter",
        ADAPTER,
        "--replacement-error",
        REPLACEMENT_ERROR,
        "--call-deadline",
        str(CALL_DEADLINE_S),
        "--conformance-report",
        str(report),
        *pytest_args,
    ]


def run_parts(pytest_args: list[str], env: dict[str, str]) -> list[str] | None:
    """Each test file in a pytest process of its own: a call that missed its deadline keeps
    running in the background, and must not take later tests' memory or engine with it."""
    targets, rest = test_files(pytest_args)
    PARTS.mkdir(parents=True, exist_ok=True)
    for stale in PARTS.glob("*.json"):
        stale.unlink()  # never merge a part an earlier run left
    parts: list[str] = []
    for target in targets:
        part = PARTS / Path(target.split("::")[0]).stem
        print(f"== {target}", flush=True)
        ran = subprocess.run(pytest_command(target, part, rest), cwd=ROOT, env=env, check=False)
        if ran.returncode not in PYTEST_RAN:
            print(
                f"error: {target} did not run to the end (pytest exit {ran.returncode}); "
                "no verdicts to compare",
                file=sys.stderr,
            )
            return None
        if part.with_suffix(".json").is_file():
            parts.append(part.with_suffix(".json").read_text(encoding="utf-8"))
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m miles_verifiers_conformance.upstream", description=__doc__
    )
    parser.add_argument(
        "--write-expected",
        action="store_true",
        help=f"rewrite {EXPECTED.relative_to(ROOT)} from this run, keeping the why texts",
    )
    options, pytest_args = parser.parse_known_args(argv)

    from tests_miles.miles_env import MilesSourceError, miles_source

    try:
        source = miles_source()
    except MilesSourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    adapter_dir = source / ADAPTER_DIR
    if not (adapter_dir / "verifiers_rollout.py").is_file():
        print(
            f"error: {adapter_dir} has no verifiers_rollout.py; MILES_SRC must be a Miles "
            "checkout with the Verifiers example",
            file=sys.stderr,
        )
        return 2
    try:
        previous = (
            parse_expectations(EXPECTED.read_text(encoding="utf-8"), str(EXPECTED))
            if EXPECTED.is_file()
            else {}
        )
    except ExpectationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(adapter_dir), str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    parts = run_parts(pytest_args, env)
    if parts is None:
        return 2
    clauses, versions = merge_clause_results(parts, CLAUSES)
    report = build_report(
        ADAPTER, versions, datetime.now(UTC).isoformat(timespec="seconds"), clauses
    )
    REPORT.with_suffix(".json").write_text(report.to_json(), encoding="utf-8")
    observed = {c.id: c.verdict.value for c in clauses}

    if options.write_expected:
        expected = regenerate(observed, previous)
        EXPECTED.write_text(render_expectations(expected, HEADER), encoding="utf-8")
        print(f"wrote {EXPECTED.relative_to(ROOT)} ({len(expected)} clauses)")
    else:
        expected = previous
    REPORT.with_suffix(".md").write_text(
        report.to_markdown().rstrip()
        + "\n\n"
        + "\n".join(behaviour_lines(observed, expected))
        + "\n",
        encoding="utf-8",
    )
    print(f"written: {REPORT.relative_to(ROOT)}.md and .json")
    return verdict(expected, observed)


def verdict(expected: dict, observed: dict) -> int:
    """Print what differs from the expectations; 0 when nothing does."""
    differences = compare(expected, observed)
    missing_why = unexplained(expected)
    for difference in differences:
        print(f"verdict differs: {difference.describe()}", file=sys.stderr)
    for cid in missing_why:
        print(
            f"unexplained: {cid} is expected {expected[cid].expected!r} with no why in "
            f"{EXPECTED.relative_to(ROOT)}",
            file=sys.stderr,
        )
    if differences or missing_why:
        print(
            f"upstream verdicts: {len(differences)} difference(s), {len(missing_why)} unexplained",
            file=sys.stderr,
        )
        return 1
    print(f"upstream verdicts match {EXPECTED.relative_to(ROOT)} ({len(observed)} clauses)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
