"""A group's episode as the trainer side reads it, and what a call derives per group.

:class:`GroupRun` is what every backend hands training and evaluation: the group's trace
records (never Verifiers traces: those stay on the episode side, which turns them into
records where they are made), and why the group failed, if it did. The rid prefix of a call
and the rollouts' sampling seeds are chosen here, on the trainer side, and sent across.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from miles_verifiers.protocol.records import TraceRecord

# "worker_lost": the episode worker running the group died or hung (see backends.pool).
RunFailure = Literal["episode_error", "episode_timeout", "worker_lost"]


@dataclass(frozen=True)
class GroupRun:
    """What running one task's episode produced, in rollout order.

    When the episode itself failed (``failure`` set) ``traces`` are whatever its rollouts had
    reached, possibly fewer than asked for, possibly unscored.
    """

    traces: tuple[TraceRecord, ...]
    failure: RunFailure | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class GroupRunner(Protocol):
    """Runs task groups for one call (``backends.call.WorkerCallScope``, whatever the backend)."""

    async def run(self, slot: int, task_index: int) -> GroupRun:
        """The episode of task ``task_index`` at ``slot`` (its seeds follow the slot)."""
        ...


class Spawner(Protocol):
    def spawn(
        self, coroutine: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]: ...


def rollout_seeds(base_seed: int, slot: int, samples_per_slot: int) -> list[int]:
    """Per-rollout sampling seeds: ``base_seed + slot * samples_per_slot + k``.

    ``slot`` is the task's offset in the training stream (or its position in the evaluation),
    so a sample's seed depends on which task and which of its rollouts it is, never on timing.
    """
    start = base_seed + slot * samples_per_slot
    return [start + k for k in range(samples_per_slot)]


def new_rid_prefix(mode: str) -> str:
    """A fresh rid prefix for one call (letters, digits and '_' only: see TransportSettings)."""
    return f"mv{mode[:1]}_{uuid.uuid4().hex[:16]}"


async def gather_bounded(
    scope: Spawner,
    factories: Sequence[Callable[[], Awaitable[Any]]],
    limit: int,
) -> list[Any]:
    """Run ``factories`` as tasks of ``scope``, at most ``limit`` at a time; results in order."""
    gate = asyncio.Semaphore(max(1, limit))

    async def gated(factory: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await factory()

    tasks = [scope.spawn(gated(f)) for f in factories]
    return list(await asyncio.gather(*tasks))
