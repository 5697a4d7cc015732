"""The in-process backend: the episodes run in the trainer's own interpreter and event loop.

The same handler a worker runs (named by :mod:`miles_verifiers.protocol.handler`, so this side
never imports the episode side) answers the same requests, handed over as they are (no JSON,
no frames): the describe request and the setup at construction, then each call's start, groups
and end. A group's traces become trace records exactly where a worker makes them, and the
trainer side reads one record type whatever the backend. There is no process to lose, restart
or kill: an episode past its deadline is cancelled by the handler, and ending the call ends
whatever of it still runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Coroutine
from typing import Any

from miles_verifiers.errors import describe_error
from miles_verifiers.protocol.handler import load_handler_class
from miles_verifiers.protocol.messages import (
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


class InProcessEpisodes:
    """One handler in this process; a call's rid prefix is its call id.

    At construction it is the episode side construction asks (``describe``, then ``start``
    with the setup); afterwards the backend the calls run their groups on.
    """

    # The workers' interpreter: none, the episodes run in this one.
    python: str | None = None

    def __init__(self, handler: Any = None) -> None:
        self._handler = (
            handler if handler is not None else load_handler_class().in_trainer_process()
        )
        # call id -> the task starting that call on the handler (its first group starts it).
        self._starts: dict[str, asyncio.Task[Any]] = {}

    # -- construction

    def describe(self, request: DescribeRequest) -> Description:
        """The handler's description; its refusal is raised here as the error it raised."""
        body = _answer_now(self._handler.handle(request))
        if not isinstance(body, Description):
            raise WorkerRefusedError(
                f"the in-process episodes answered a describe with {body.kind}"
            )
        return body

    def start(
        self, setup: WorkerSetup, description: Description, settings: Any
    ) -> InProcessEpisodes:
        """Set the handler up now (the taskset the describe step loaded, the renderer pool), and
        check that its hello reports the versions its description did."""
        hello = _answer_now(self._handler.handle(setup))
        if not isinstance(hello, Ready):
            raise WorkerRefusedError(
                f"the in-process episodes answered the setup with {hello.kind}"
            )
        reported = {**hello.versions, "protocol": hello.protocol}
        check_worker_versions(description.versions, reported, "the in-process episode side")
        return self

    # -- calls

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


def _answer_now(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run one of the handler's answers to completion from synchronous construction (on a
    thread of its own when construction itself runs on an event loop, which must not block)."""
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
