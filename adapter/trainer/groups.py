"""A group's episode as the trainer side reads it (:class:`GroupRun`: trace records and why
the group failed, if it did), and what a call chooses per group: rid prefix and sampling seeds."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from miles_verifiers.protocol.records import TraceRecord

# "worker_lost": the episode worker running the group died or hung (see backends.pool).
RunFailure = Literal["episode_error", "episode_timeout", "worker_lost"]


@dataclass(frozen=True)
class GroupRun:
    """What one task's episode produced, in rollout order (when it failed, whatever its
    rollouts had reached: possibly fewer, possibly unscored)."""

    traces: tuple[TraceRecord, ...]
    failure: RunFailure | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class CallScope(Protocol):
    """One call's groups and tasks (``backends.call.WorkerCallScope``, whatever the backend)."""

    async def run(self, slot: int, task_index: int) -> GroupRun:
        """The episode of task ``task_index`` at ``slot`` (its seeds follow the slot)."""
        ...

    def spawn(
        self, coroutine: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]: ...

    async def wind_down(self) -> None:
        """Stop what is left of the call's work."""


def rollout_seeds(base_seed: int, slot: int, samples_per_slot: int) -> list[int]:
    """Per-rollout sampling seeds, ``base_seed + slot * samples_per_slot + k`` (``slot``: the
    task's stream offset or eval position), so a seed never depends on timing."""
    start = base_seed + slot * samples_per_slot
    return [start + k for k in range(samples_per_slot)]


def new_rid_prefix(mode: str) -> str:
    """A fresh rid prefix for one call (letters, digits and '_' only: see TransportSettings)."""
    return f"mv{mode[:1]}_{uuid.uuid4().hex[:16]}"
