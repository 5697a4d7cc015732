"""The benchmark result file: every figure with its samples and min/median/max.

One ``BenchResult`` is written per run as JSON. It is the unit that ``benchmarks.compare``
reads, so its shape is versioned (``schema``) and validated when loaded.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1

Better = Literal["higher", "lower", "none"]
ParamValue = str | int | float | bool


class Figure(BaseModel):
    """One measured quantity, e.g. rollouts/s for the single-turn taskset at concurrency 32."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Stable identifier, used to match figures across runs.")
    group: str = Field(description="Section of the report: engine, transport, rollout, ...")
    label: str = Field(description="What a reader sees in the table.")
    unit: str
    better: Better = "higher"
    params: dict[str, ParamValue] = Field(default_factory=dict)
    samples: list[float] = Field(min_length=1, description="One value per measured round.")
    min: float = 0.0
    median: float = 0.0
    max: float = 0.0

    @model_validator(mode="after")
    def _summarise(self) -> Figure:
        self.min = min(self.samples)
        self.median = statistics.median(self.samples)
        self.max = max(self.samples)
        return self


class BenchResult(BaseModel):
    """A whole benchmark run: where it ran, on what, and every figure."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    created: str
    machine: dict[str, ParamValue]
    versions: dict[str, str]
    settings: dict[str, ParamValue] = Field(default_factory=dict)
    figures: list[Figure] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_keys(self) -> BenchResult:
        seen: set[str] = set()
        for figure in self.figures:
            if figure.key in seen:
                raise ValueError(f"figure key {figure.key!r} appears twice; keys must be unique")
            seen.add(figure.key)
        return self

    def figure(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)

    def by_key(self) -> dict[str, Figure]:
        return {f.key: f for f in self.figures}


def make_figure(
    key: str,
    samples: Iterable[float],
    *,
    group: str,
    label: str,
    unit: str,
    better: Better = "higher",
    params: Mapping[str, ParamValue] | None = None,
) -> Figure:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError(f"figure {key!r} has no samples; measure at least one round")
    return Figure(
        key=key,
        group=group,
        label=label,
        unit=unit,
        better=better,
        params=dict(params or {}),
        samples=values,
    )


class ResultFileError(ValueError):
    """A file given as a benchmark result is missing or is not one."""


def load_result(path: Path) -> BenchResult:
    """Read a result file, with an error that names the file when it is not one."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultFileError(
            f"benchmark result {path} does not exist; run `tox -e bench` first"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultFileError(
            f"benchmark result {path} is not JSON ({exc}); pass a bench-result.json"
        ) from None
    if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
        found = raw.get("schema_version") if isinstance(raw, dict) else type(raw).__name__
        raise ResultFileError(
            f"{path} is not a miles-verifiers benchmark result of schema {SCHEMA_VERSION} "
            f"(found schema_version={found!r}); pass a bench-result.json written by `tox -e bench`"
        )
    try:
        return BenchResult.model_validate(raw)
    except ValueError as exc:
        raise ResultFileError(f"{path} is not a valid benchmark result: {exc}") from None


def write_result(result: BenchResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
