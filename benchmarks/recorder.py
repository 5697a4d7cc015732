"""Collects figures while the benchmarks run and writes the result files at the end."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.machine import machine_info, package_versions
from benchmarks.report import markdown_table, write_plot
from benchmarks.results import BenchResult, Better, Figure, ParamValue, make_figure, write_result

RESULT_JSON = "bench-result.json"
RESULT_MARKDOWN = "bench-result.md"
RESULT_PLOT = "bench-throughput.png"


@dataclass
class Recorder:
    settings: dict[str, ParamValue] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    machine: dict[str, ParamValue] | None = None
    """Taken when the run starts, so the commit named is the code that was measured even if
    the tree changes while the run goes; None takes it when the result is written."""

    def record(
        self,
        key: str,
        samples: list[float],
        *,
        group: str,
        label: str,
        unit: str,
        better: Better = "higher",
        **params: ParamValue,
    ) -> Figure:
        figure = make_figure(
            key, samples, group=group, label=label, unit=unit, better=better, params=params
        )
        self.figures = [f for f in self.figures if f.key != key] + [figure]
        return figure

    def group(self, name: str, **params: ParamValue) -> GroupRecorder:
        """Records into report group ``name``, every figure with ``params``."""
        return GroupRecorder(self, name, params)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def result(self) -> BenchResult:
        return BenchResult(
            created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            machine=self.machine if self.machine is not None else machine_info(),
            versions=package_versions(),
            settings=self.settings,
            figures=self.figures,
            notes=self.notes,
        )


@dataclass(frozen=True)
class GroupRecorder:
    """Figures of one report group that share their parameters."""

    recorder: Recorder
    name: str
    params: dict[str, ParamValue]

    def __call__(
        self, key: str, samples: list[float], label: str, unit: str, better: Better = "higher"
    ) -> Figure:
        return self.recorder.record(
            key, samples, group=self.name, label=label, unit=unit, better=better, **self.params
        )

    def each(
        self, prefix: str, figures: Iterable[tuple[str, list[float], str, str, Better]]
    ) -> None:
        """``(name, samples, label, unit, better)`` figures, each keyed ``<prefix>.<name>``."""
        for name, samples, label, unit, better in figures:
            self(f"{prefix}.{name}", samples, label, unit, better)


@dataclass(frozen=True)
class WrittenFiles:
    json: Path
    markdown: Path
    plot: Path | None


def write_outputs(result: BenchResult, out_dir: Path) -> WrittenFiles:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = (
        out_dir / RESULT_JSON,
        out_dir / RESULT_MARKDOWN,
        out_dir / RESULT_PLOT,
    )
    write_result(result, json_path)
    md_path.write_text(markdown_table(result), encoding="utf-8")
    plotted = write_plot(result, png_path)
    return WrittenFiles(json=json_path, markdown=md_path, plot=png_path if plotted else None)
