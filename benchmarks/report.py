"""Render a ``BenchResult`` for people: a Markdown table and a throughput-vs-concurrency plot."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from benchmarks.results import BenchResult, Figure
from benchmarks.stock04 import stock04_goals
from benchmarks.workers import GoalRow, evaluate_goals

# Report sections in reading order; a group not listed here goes last, alphabetically.
GROUP_ORDER: tuple[str, ...] = (
    "summary",
    "engine",
    "transport",
    "rollout",
    "environment",
    "ceiling",
    "saturation",
    "workers",
    "workers-saturation",
    "stock04",
    "cold",
    "memory",
)

GROUP_TITLES: dict[str, str] = {
    "summary": "Headline ratios",
    "engine": "Loopback engine alone (zero latency)",
    "transport": "Transport overhead per request",
    "rollout": "End-to-end rollouts through the adapter",
    "environment": "Environment costs (outside the adapter)",
    "ceiling": "Adapter against the direct load generator (same token workload, same concurrency)",
    "saturation": "Saturation against a latency-modelled loopback engine",
    "workers": "Throughput and per-turn CPU against the episode-worker count (zero latency)",
    "workers-saturation": "Saturation against the episode-worker count (latency model)",
    "stock04": "Verifiers 0.4 on its stock harness: the adapter against Verifiers' own loop",
    "cold": "Cold start: a fresh process per measurement",
    "memory": "Memory of the trainer-side process",
}


def format_number(value: float) -> str:
    """Three significant digits, without scientific notation for everyday magnitudes."""
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if magnitude >= 0.001:
        return f"{value:#.3g}"
    return f"{value:.2e}"


def _format_params(figure: Figure) -> str:
    shown = {k: v for k, v in figure.params.items() if k != "series"}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def ordered_groups(result: BenchResult) -> list[tuple[str, list[Figure]]]:
    groups: dict[str, list[Figure]] = defaultdict(list)
    for figure in result.figures:
        groups[figure.group].append(figure)
    rank = {name: i for i, name in enumerate(GROUP_ORDER)}
    names = sorted(groups, key=lambda g: (rank.get(g, len(rank)), g))
    return [(name, groups[name]) for name in names]


def markdown_table(result: BenchResult) -> str:
    machine = result.machine
    lines = [
        "# miles-verifiers benchmark",
        "",
        f"- created: {result.created}",
        f"- machine: {machine.get('cpu')}, {machine.get('cores')} cores, "
        f"{machine.get('memory_gib')} GiB, Python {machine.get('python')}",
        f"- commit measured: {machine.get('commit', machine.get('git'))}"
        + (" (with uncommitted changes)" if machine.get("dirty") else ""),
        "- versions: "
        + ", ".join(f"{k} {v}" for k, v in result.versions.items() if v != "not installed"),
    ]
    if result.settings:
        lines.append("- settings: " + ", ".join(f"{k}={v}" for k, v in result.settings.items()))
    lines.append("")
    lines.append(
        "Each figure is over its measured rounds (n): median, then min and max. A ratio "
        "between two series is the median of per-round ratios (the two measured interleaved "
        "in one run), not the ratio of their medians. "
        "Benchmarks measure; nothing here is a pass/fail threshold."
    )
    goals = evaluate_goals(result) + stock04_goals(result)
    if goals:
        lines += ["", "## Goals of the episode-worker work (measured, not asserted)", ""]
        lines += goal_table(goals)
    for group, figures in ordered_groups(result):
        lines += ["", f"## {GROUP_TITLES.get(group, group)}", ""]
        lines.append("| figure | parameters | median | min | max | unit | n |")
        lines.append("|---|---|---:|---:|---:|---|---:|")
        for f in figures:
            lines.append(
                f"| {f.label} | {_format_params(f)} | **{format_number(f.median)}** | "
                f"{format_number(f.min)} | {format_number(f.max)} | {f.unit} | {len(f.samples)} |"
            )
    if result.notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def goal_table(rows: list[GoalRow]) -> list[str]:
    lines = ["| goal | measured | target | status |", "|---|---:|---|---|"]
    for row in rows:
        measured = "-" if row.measured is None else format_number(row.measured)
        lines.append(f"| {row.goal} | {measured} | {row.target} | {row.status} |")
    return lines


def plot_series(result: BenchResult) -> dict[str, dict[str, list[Figure]]]:
    """Figures with ``series`` and ``concurrency`` params, by unit (panel) then series (line)."""
    panels: dict[str, dict[str, list[Figure]]] = defaultdict(lambda: defaultdict(list))
    for figure in result.figures:
        if "series" in figure.params and "concurrency" in figure.params:
            panels[figure.unit][str(figure.params["series"])].append(figure)
    for lines in panels.values():
        for figures in lines.values():
            figures.sort(key=lambda f: float(f.params["concurrency"]))
    return {unit: dict(lines) for unit, lines in panels.items()}


def write_plot(result: BenchResult, path: Path) -> bool:
    """Write the throughput-vs-concurrency PNG. Returns False when there is nothing to plot."""
    panels = plot_series(result)
    if not panels:
        return False
    import matplotlib  # imported here: only the bench extra installs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    units = sorted(panels)
    fig, axes = plt.subplots(1, len(units), figsize=(5.5 * len(units), 4.2), squeeze=False)
    for ax, unit in zip(axes[0], units, strict=False):
        for series, figures in sorted(panels[unit].items()):
            xs = [float(f.params["concurrency"]) for f in figures]
            ys = [f.median for f in figures]
            low = [f.median - f.min for f in figures]
            high = [f.max - f.median for f in figures]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=series)
        ax.set_xscale("log", base=2)
        ticks = sorted(
            {float(f.params["concurrency"]) for lines in panels[unit].values() for f in lines}
        )
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_yscale("log")
        ax.set_xlabel("concurrency (rollouts in flight)")
        ax.set_ylabel(unit)
        ax.set_title(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(
        f"miles-verifiers throughput ({result.machine.get('cores')} cores, "
        f"git {result.machine.get('git')})"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
