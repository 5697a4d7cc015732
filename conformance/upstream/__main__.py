"""``python -m conformance.upstream``: the suite against Miles' own Verifiers adapter.

Run by ``tox -e upstream`` (``MILES_SRC`` names a Miles checkout, installed into the env as
for ``tox -e miles``). It runs the suite on ``verifiers_rollout:VerifiersRolloutFn`` from
``$MILES_SRC/examples/experimental/verifiers`` (the path a Miles user gives it), writes the
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
from pathlib import Path

from conformance.upstream.expected import (
    ExpectationError,
    behaviour_lines,
    compare,
    observed_verdicts,
    parse_expectations,
    regenerate,
    render_expectations,
    unexplained,
)

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "conformance" / "upstream" / "expected.toml"
REPORT = ROOT / "reports" / "upstream" / "conformance"
ADAPTER_DIR = Path("examples") / "experimental" / "verifiers"
# As a Miles user names it: --rollout-function-path verifiers_rollout.VerifiersRolloutFn with
# that folder on the path. It has no bounded-replacement error (it resamples without bound).
ADAPTER = "verifiers_rollout:VerifiersRolloutFn"
REPLACEMENT_ERROR = "conformance.upstream.miles_process:NoReplacementError"
# Upstream hangs on several clauses; a shorter deadline than the default 120 s bounds the run.
CALL_DEADLINE_S = 60
# A pytest run whose tests ran: all passed (0) or some failed (1). Anything else is no verdict.
PYTEST_RAN = (0, 1)
HEADER = """Expected conformance verdicts of Miles' own Verifiers adapter
(examples/experimental/verifiers/verifiers_rollout.py), one entry per clause.
`tox -e upstream` fails when a run's verdicts differ from these.
Regenerate: MILES_SRC=/path/to/miles tox -e upstream -- --write-expected
(keeps every `why`; replace each TODO with the upstream behaviour behind the verdict)."""


def pytest_command(pytest_args: list[str]) -> list[str]:
    # Test paths among the arguments narrow the run; without any, the whole suite runs.
    named = [a for a in pytest_args if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    return [
        sys.executable,
        "-m",
        "pytest",
        *([] if named else ["conformance"]),
        # The selftests check the suite with this project's adapter, not the adapter under test.
        "--ignore=conformance/selftest",
        "-p",
        "no:randomly",
        "-p",
        "conformance.upstream.miles_process",
        "--adapter",
        ADAPTER,
        "--replacement-error",
        REPLACEMENT_ERROR,
        "--call-deadline",
        str(CALL_DEADLINE_S),
        "--conformance-report",
        str(REPORT),
        *pytest_args,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.upstream", description=__doc__)
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
        print(f"error: {adapter_dir} has no verifiers_rollout.py; MILES_SRC must be a Miles "
              "checkout with the Verifiers example", file=sys.stderr)
        return 2
    try:
        previous = parse_expectations(EXPECTED.read_text(encoding="utf-8"), str(EXPECTED)) if EXPECTED.is_file() else {}
    except ExpectationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(adapter_dir), str(ROOT), env.get("PYTHONPATH", "")) if p)
    report_json = REPORT.with_suffix(".json")
    report_json.unlink(missing_ok=True)  # never compare a report an earlier run left
    ran = subprocess.run(pytest_command(pytest_args), cwd=ROOT, env=env, check=False)
    if ran.returncode not in PYTEST_RAN or not report_json.is_file():
        print(f"error: the suite did not run to the end (pytest exit {ran.returncode}); no verdicts to compare",
              file=sys.stderr)
        return ran.returncode or 2
    try:
        observed = observed_verdicts(report_json.read_text(encoding="utf-8"), str(report_json))
    except ExpectationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    if options.write_expected:
        expected = regenerate(observed, previous)
        EXPECTED.write_text(render_expectations(expected, HEADER), encoding="utf-8")
        print(f"wrote {EXPECTED.relative_to(ROOT)} ({len(expected)} clauses)")
    else:
        expected = previous
    markdown = REPORT.with_suffix(".md")
    markdown.write_text(
        markdown.read_text(encoding="utf-8").rstrip() + "\n\n" + "\n".join(behaviour_lines(observed, expected)) + "\n",
        encoding="utf-8",
    )
    return verdict(expected, observed)


def verdict(expected: dict, observed: dict) -> int:
    """Print what differs from the expectations; 0 when nothing does."""
    differences = compare(expected, observed)
    missing_why = unexplained(expected)
    for difference in differences:
        print(f"verdict differs: {difference.describe()}", file=sys.stderr)
    for cid in missing_why:
        print(f"unexplained: {cid} is expected {expected[cid].expected!r} with no why in "
              f"{EXPECTED.relative_to(ROOT)}", file=sys.stderr)
    if differences or missing_why:
        print(f"upstream verdicts: {len(differences)} difference(s), {len(missing_why)} unexplained",
              file=sys.stderr)
        return 1
    print(f"upstream verdicts match {EXPECTED.relative_to(ROOT)} ({len(observed)} clauses)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
