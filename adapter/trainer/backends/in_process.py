"""The in-process backend: the episodes run in the trainer's own interpreter and event loop.

The same :class:`~miles_verifiers.episodes.worker.WorkerHandler` a worker runs answers the
requests, handed over as they are (no JSON, no frames), so a group's traces become trace
records exactly where a worker makes them and the trainer side reads one record type whatever
the backend. The handler is built at construction from the config, taskset and renderer pool
the construction checks loaded. There is no process to lose, restart or kill: an episode past
its deadline is cancelled by the handler, and ending the call ends whatever of it still runs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from miles_verifiers.episodes.v02.calls import GroupRun, describe_error
from miles_verifiers.episodes.worker import WorkerHandler
from miles_verifiers.protocol.messages import GroupRequest, GroupResult
from miles_verifiers.trainer.backends.pool import CallOnWorkers, WorkerRefusedError, group_run

logger = logging.getLogger(__name__)


class InProcessEpisodes:
    """One handler in this process; a call's rid prefix is its call id."""

    def __init__(self, handler: WorkerHandler) -> None:
        self._handler = handler
        # call id -> the task starting that call on the handler (its first group starts it).
        self._starts: dict[str, asyncio.Task[Any]] = {}

    async def run_group(self, call: CallOnWorkers, request: GroupRequest) -> GroupRun:
        await asyncio.shield(self._started(call))
        # Shielded as on a worker: the caller giving up does not stop the episode; ending the
        # call does (it cancels the episodes left and aborts their requests, rid by rid).
        answer = asyncio.ensure_future(self._handler.handle(request))
        answer.add_done_callback(_retrieve)
        body = await asyncio.shield(answer)
        if not isinstance(body, GroupResult):
            raise WorkerRefusedError(f"the in-process episodes answered a group with {body.kind}")
        return group_run(body)

    def _started(self, call: CallOnWorkers) -> asyncio.Task[Any]:
        start = self._starts.get(call.call_id)
        if start is None:
            start = asyncio.ensure_future(self._handler.handle(call.start_message(call.call_id)))
            start.add_done_callback(_retrieve)
            self._starts[call.call_id] = start
        return start

    async def end_call(self, call: CallOnWorkers, timeout_s: float) -> list[str]:
        start = self._starts.pop(call.call_id, None)
        if start is None:
            return []
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.wait([start])
                await self._handler.end_call(call.call_id)
        except Exception as error:
            logger.warning("ending call %s failed: %s", call.call_id, describe_error(error))
            return [call.call_id]
        return []

    def close(self) -> None:
        """Nothing runs outside a call here, and each call ends itself."""


def _retrieve(task: asyncio.Task[Any]) -> None:
    # Its caller may have stopped waiting (shielded): a failure is then only logged.
    if not task.cancelled() and task.exception() is not None:
        logger.debug("in-process episode request ended with %r", task.exception())
