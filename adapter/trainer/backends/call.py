"""The trainer side of one rollout call, whichever backend runs its episodes.

Winding down cancels waiting groups and has every worker end the call (aborting its requests
rid by rid); if anything could still run, every worker's rid prefix is aborted too, a lost one's
included (SGLang acts on an exact rid only when one tokenizer process serves it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import httpx

from miles_verifiers.engine.client import EngineClient
from miles_verifiers.errors import describe_error
from miles_verifiers.owned_tasks import OwnedTasks
from miles_verifiers.protocol.messages import CallStart, CleanupSpec, GroupRequest
from miles_verifiers.trainer.backends.in_process import InProcessEpisodes
from miles_verifiers.trainer.backends.pool import (
    RESTARTS_SETTING,
    WorkerPool,
    WorkerRestartLimitError,
)
from miles_verifiers.trainer.groups import GroupRun

logger = logging.getLogger(__name__)

SamplingFor = Callable[[int], Sequence[dict[str, Any]]]
# Where the groups of a call run: a call starts where its first group runs.
EpisodeBackend = WorkerPool | InProcessEpisodes


@dataclass
class WorkerCallScope:
    pool: EpisodeBackend
    call_id: str
    mode: str
    transport: EngineClient  # the trainer's own: the model check and the backstop aborts
    sampling_for: SamplingFor
    deadline_s: float
    engine_url: str
    model: str
    max_concurrency: int
    limits: CleanupSpec = field(default_factory=CleanupSpec)
    restarts: int = 0
    prefixes: list[str] = field(default_factory=list)
    _tasks: OwnedTasks = field(default_factory=OwnedTasks)
    _needs_backstop: bool = False
    _ended: bool = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.wind_down()
        finally:
            try:
                await self.transport.close()
            except Exception as error:
                logger.debug("closing the SGLang transport failed: %r", error)

    def start_message(self, rid_prefix: str) -> CallStart:
        self.prefixes.append(rid_prefix)
        return CallStart(
            call_id=self.call_id,
            mode="train" if self.mode == "train" else "eval",
            rid_prefix=rid_prefix,
            engine_url=self.engine_url,
            model=self.model,
            max_concurrency=self.max_concurrency,
        )

    def count_restart(self, bound: int) -> None:
        self.restarts += 1
        if self.restarts > bound:
            raise WorkerRestartLimitError(
                f"episode workers were lost {self.restarts} times in one {self.mode} call, more "
                f"than the {bound} restarts {RESTARTS_SETTING} allows. The workers' own output "
                "(stderr) says why they died; a worker is also lost when a group gets no answer "
                "within the episode deadline plus a margin. Fix the cause, or raise "
                f"{RESTARTS_SETTING}."
            )

    def worker_lost(self, rid_prefix: str | None) -> None:
        self._needs_backstop = True
        if rid_prefix is not None:  # its requests may still run on the engines
            self.spawn(self._abort([rid_prefix]), name=f"abort-{rid_prefix}")

    def spawn(
        self, coroutine: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        return self._tasks.spawn(coroutine, name=name)

    async def run(self, slot: int, task_index: int) -> GroupRun:
        request = GroupRequest(
            call_id=self.call_id,
            slot=slot,
            task_index=task_index,
            sampling=list(self.sampling_for(slot)),
            deadline_s=self.deadline_s,
        )
        return await self.pool.run_group(self, request)

    async def wind_down(self) -> None:
        """Cancel waiting groups, end the call on every worker, abort leftovers (bounded)."""
        if self._ended:
            return
        self._ended = True
        leftovers = self._tasks.cancel_running()
        if leftovers:
            self._needs_backstop = True
            await asyncio.wait(leftovers, timeout=self.limits.grace_s)
        end_timeout = self.limits.abort_s + self.limits.grace_s + self.limits.shutdown_s + 10.0
        failed = await self.pool.end_call(self, end_timeout)
        if failed:
            self._needs_backstop = True
        if self._needs_backstop and self.prefixes:
            await self._abort(self.prefixes)

    async def _abort(self, prefixes: Sequence[str]) -> None:
        from miles_verifiers.engine.tls import default_tls_context
        from miles_verifiers.engine.workers import abort_on_workers

        timeout_s = self.limits.abort_s
        try:
            async with asyncio.timeout(timeout_s * 2):
                urls = await self.transport.list_workers(timeout_s=timeout_s)
                async with httpx.AsyncClient(verify=default_tls_context()) as client:
                    report = await abort_on_workers(
                        client, urls, [f"{p}-" for p in prefixes], timeout_s=timeout_s
                    )
        except Exception as error:
            logger.warning("could not abort the workers' requests: %s", describe_error(error))
            return
        if not report.ok:
            logger.warning("%s", report.describe_failures("the workers' requests"))
