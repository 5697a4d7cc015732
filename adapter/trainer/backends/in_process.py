"""The in-process backend: the episodes run in the trainer's own interpreter and event loop.

The handler a worker runs answers the same requests, handed over as they are (no JSON, no
frames). There is no process to lose or kill: the handler cancels an episode past its deadline,
and ending the call ends whatever of it still runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Coroutine
from pkgutil import resolve_name
from typing import Any, TypeVar

from miles_verifiers.errors import describe_error
from miles_verifiers.protocol.messages import (
    HANDLER,
    DescribeRequest,
    Description,
    GroupRequest,
    GroupResult,
    Ready,
    WorkerSetup,
)
from miles_verifiers.protocol.versions import check_worker_versions
from miles_verifiers.trainer.backends.pool import CallOnWorkers, WorkerRefusedError, group_run
from miles_verifiers.trainer.groups import GroupRun

logger = logging.getLogger(__name__)
_Body = TypeVar("_Body")


class InProcessEpisodes:
    """One handler in this process, for construction and the calls (rid prefix: the call id)."""

    python: str | None = None  # no workers' interpreter: the episodes run in this one

    def __init__(self, handler: Any = None) -> None:
        self._handler = (
            handler if handler is not None else resolve_name(HANDLER).in_trainer_process()
        )
        # call id -> the task starting that call on the handler (its first group starts it).
        self._starts: dict[str, asyncio.Task[Any]] = {}

    def describe(self, request: DescribeRequest) -> Description:
        """The handler's description; its refusal is raised here as the error it raised."""
        return _expect(_answer_now(self._handler.handle(request)), Description, "a describe")

    def start(
        self, setup: WorkerSetup, description: Description, settings: Any
    ) -> InProcessEpisodes:
        """Set the handler up now; its hello must report the versions its description did."""
        hello = _expect(_answer_now(self._handler.handle(setup)), Ready, "the setup")
        check_worker_versions(description.versions, hello, "the in-process episode side")
        return self

    async def run_group(self, call: CallOnWorkers, request: GroupRequest) -> GroupRun:
        start = self._starts.get(call.call_id)
        if start is None:
            start = asyncio.ensure_future(self._handler.handle(call.start_message(call.call_id)))
            start.add_done_callback(_retrieve)
            self._starts[call.call_id] = start
        await asyncio.shield(start)
        # Shielded as on a worker: only ending the call stops the episode.
        answer = asyncio.ensure_future(self._handler.handle(request))
        answer.add_done_callback(_retrieve)
        body = await asyncio.shield(answer)
        return group_run(_expect(body, GroupResult, "a group"))

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


def _expect(body: Any, kind: type[_Body], what: str) -> _Body:
    if not isinstance(body, kind):
        raise WorkerRefusedError(f"the in-process episodes answered {what} with {body.kind}")
    return body


def _answer_now(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a handler's answer from synchronous code (in a thread when on an event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="episodes-setup") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _retrieve(task: asyncio.Task[Any]) -> None:
    # Its caller may have stopped waiting (shielded): a failure is then only logged.
    if not task.cancelled() and task.exception() is not None:
        logger.debug("in-process episode request ended with %r", task.exception())
