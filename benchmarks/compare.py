"""Compare two benchmark results, figure by figure: ``python -m benchmarks.compare OLD NEW``.

For every figure in both files it prints new / old as the median of per-round ratios
(round i of the new run over round i of the old run, over the rounds both have), not the
ratio of the two medians, and whether that is better or worse for the figure. A change whose
min-max ranges overlap is reported as noise, and one within 3% as the same: on a shared
2-core machine run-to-run noise is often 1.5x, so compare releases side by side on one
machine, ideally interleaved (old round, new round, ...) so round i of each saw the same load.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.ratios import median_round_ratio
from benchmarks.report import format_number
from benchmarks.results import BenchResult, Figure, ResultFileError, load_result

Verdict = Literal["better", "worse", "noise", "same", "n/a"]


@dataclass(frozen=True)
class FigureChange:
    key: str
    label: str
    unit: str
    old: Figure
    new: Figure
    ratio: float | None
    """Median of per-round ratios new / old; None when an old round is 0."""
    paired_rounds: int
    verdict: Verdict


# Changes smaller than this fraction are reported as "same": below what any of these figures
# can resolve, even with a single sample.
SAME_WITHIN = 0.03


def _verdict(old: Figure, new: Figure, ratio: float | None) -> Verdict:
    if ratio is None or old.better == "none":
        return "n/a"
    if abs(ratio - 1.0) <= SAME_WITHIN:
        return "same"
    if new.min <= old.max and old.min <= new.max:
        return "noise"
    improved = ratio > 1.0 if old.better == "higher" else ratio < 1.0
    return "better" if improved else "worse"


def paired_ratio(old: Figure, new: Figure) -> tuple[float | None, int]:
    """new / old as the median of round-by-round ratios, and how many rounds were paired.

    Rounds pair by position; when one run has more rounds, its extra rounds are left out.
    """
    paired = min(len(old.samples), len(new.samples))
    try:
        return median_round_ratio(new.samples[:paired], old.samples[:paired]), paired
    except ValueError:
        return None, paired


def compare_results(
    old: BenchResult, new: BenchResult
) -> tuple[list[FigureChange], list[str], list[str]]:
    """Changes for figures in both runs, then keys only in the old run, then only in the new."""
    old_figures, new_figures = old.by_key(), new.by_key()
    changes: list[FigureChange] = []
    for key, new_figure in new_figures.items():
        old_figure = old_figures.get(key)
        if old_figure is None:
            continue
        ratio, paired = paired_ratio(old_figure, new_figure)
        changes.append(
            FigureChange(
                key=key,
                label=new_figure.label,
                unit=new_figure.unit,
                old=old_figure,
                new=new_figure,
                ratio=ratio,
                paired_rounds=paired,
                verdict=_verdict(old_figure, new_figure, ratio),
            )
        )
    removed = [k for k in old_figures if k not in new_figures]
    added = [k for k in new_figures if k not in old_figures]
    return changes, removed, added


def _commit(result: BenchResult) -> str:
    commit = result.machine.get("commit") or result.machine.get("git")
    dirty = " (uncommitted changes)" if result.machine.get("dirty") else ""
    return f"commit {commit}{dirty}"


def render_markdown(old_path: Path, new_path: Path, old: BenchResult, new: BenchResult) -> str:
    changes, removed, added = compare_results(old, new)
    lines = [
        f"# Benchmark comparison: {new_path} against {old_path}",
        "",
        f"- old: {old.created}, {_commit(old)}, {old.machine.get('cpu')}",
        f"- new: {new.created}, {_commit(new)}, {new.machine.get('cpu')}",
        "",
        "new/old is the median of per-round ratios (round i of new over round i of old, "
        "n rounds paired), not the ratio of the medians.",
        "",
        "| figure | key | old median | new median | unit | new/old | n | verdict |",
        "|---|---|---:|---:|---|---:|---:|---|",
    ]
    for c in changes:
        ratio = "n/a" if c.ratio is None else f"{c.ratio:.3f}"
        lines.append(
            f"| {c.label} | `{c.key}` | {format_number(c.old.median)} | "
            f"{format_number(c.new.median)} | "
            f"{c.unit} | {ratio} | {c.paired_rounds} | {c.verdict} |"
        )
    if removed:
        lines += ["", "Only in the old run: " + ", ".join(f"`{k}`" for k in removed)]
    if added:
        lines += ["", "Only in the new run: " + ", ".join(f"`{k}`" for k in added)]
    if old.machine.get("cpu") != new.machine.get("cpu") or old.machine.get(
        "cores"
    ) != new.machine.get("cores"):
        lines += [
            "",
            "Warning: the two runs were on different machines; "
            "ratios mix machine and code changes.",
        ]
    return "\n".join(lines) + "\n"


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        prog="python -m benchmarks.compare",
        description="Compare two benchmark result files (bench-result.json), figure by figure.",
    )
    parser.add_argument(
        "old", type=Path, help="the earlier result, e.g. the last release's bench-result.json"
    )
    parser.add_argument("new", type=Path, help="the result to judge against it")
    parser.add_argument(
        "--output", "-o", type=Path, default=None, help="also write the Markdown comparison here"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        old, new = load_result(args.old), load_result(args.new)
    except ResultFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = render_markdown(args.old, args.new, old, new)
    sys.stdout.write(text)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
