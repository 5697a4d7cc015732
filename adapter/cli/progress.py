"""A rich progress bar over a run's calls: rollouts done, groups and samples so far, elapsed."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from miles_verifiers.cli.engine import EngineAddress
from miles_verifiers.cli.schedule import PlannedCall
from miles_verifiers.cli.summary import EvalCallStats, TrainCallStats


def call_label(call: PlannedCall) -> str:
    return f"{call.kind} rollout {call.rollout_id}"


class ProgressObserver:
    """A :class:`~miles_verifiers.cli.session.RunObserver` drawing on ``console``."""

    def __init__(self, calls: Sequence[PlannedCall], console: Console) -> None:
        self._console = console
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("groups {task.fields[groups]}, samples {task.fields[samples]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task: TaskID = self._progress.add_task(
            "constructing", total=len(calls), groups=0, samples=0
        )
        self._groups = 0
        self._samples = 0

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def constructed(self, seconds: float) -> None:
        self._progress.console.log(f"rollout function constructed in {seconds:.1f} s", markup=False)
        self._progress.update(self._task, description="starting engine")

    def engine_ready(self, address: EngineAddress) -> None:
        kind = "embedded loopback engine" if address.embedded else "engine"
        self._progress.console.log(f"{kind} at {address.base_url}", markup=False)

    def call_started(self, call: PlannedCall) -> None:
        self._progress.update(self._task, description=call_label(call))

    def call_finished(self, call: PlannedCall, stats: TrainCallStats | EvalCallStats) -> None:
        if isinstance(stats, TrainCallStats):
            self._groups += stats.groups
            self._samples += stats.samples
        self._progress.update(
            self._task, advance=1, groups=self._groups, samples=self._samples, description="done"
        )
