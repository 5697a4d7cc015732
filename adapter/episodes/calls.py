"""One rollout call's resources on an episode worker, wound down within bounded time: its own
environment (``env.serving()`` keeps state on the instance), SGLang transport (its rid prefix,
so its aborts reach only its requests) and client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from miles_verifiers.episodes.v02.upstream import interception_runners, set_shutdown_timeout
from miles_verifiers.errors import describe_error
from miles_verifiers.owned_tasks import OwnedTasks
from miles_verifiers.protocol.messages import CallStart, CleanupSpec

logger = logging.getLogger(__name__)


class EnvironmentPool:
    """Environments for one config, one checked out per open call; one that did not shut down
    cleanly is not given back."""

    def __init__(self, factory: Callable[[], Any], first: Any | None = None) -> None:
        self._factory = factory
        self._idle: list[Any] = [first] if first is not None else []

    def checkout(self) -> Any:
        return self._idle.pop() if self._idle else self._factory()

    def give_back(self, environment: Any) -> None:
        self._idle.append(environment)


@dataclass
class OpenCall:
    """One rollout call open on this worker (``async with``, held by one task from entry to
    exit). Leaving it stops the client, cancels what ``tasks`` still runs and aborts its
    requests, and shuts the environment's servers down under a deadline."""

    start: CallStart
    environments: EnvironmentPool
    transport: Any
    client: Any
    limits: CleanupSpec
    # Where the call's episodes reach its transport (the 0.4 interception seam; else "").
    base_url: str
    environment: Any = None
    semaphore: asyncio.Semaphore = field(init=False)
    tasks: OwnedTasks = field(default_factory=OwnedTasks)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    opened: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    holder: asyncio.Task[None] | None = None
    _serving: Any = None
    _reusable: bool = True

    @property
    def is_open(self) -> bool:
        done = self.opened.done() and not self.opened.cancelled()
        return done and self.opened.exception() is None

    async def __aenter__(self) -> Self:
        self.semaphore = asyncio.Semaphore(self.start.max_concurrency)
        self.environment = self.environments.checkout()
        self._serving = self.environment.serving()
        try:
            await self._serving.__aenter__()
        except BaseException:
            self._serving = None
            await self._close_transport()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.wind_down()
        finally:
            await self._shut_down_environment()
            await self._close_transport()
            if self._reusable:
                self.environments.give_back(self.environment)

    async def wind_down(self) -> None:
        """Stop serving, cancel leftover episodes and abort their requests (all bounded)."""
        self.client.end()
        leftovers = self.tasks.cancel_running()
        if not leftovers:
            return
        await self._abort_requests()
        done, still_running = await asyncio.wait(leftovers, timeout=self.limits.grace_s)
        if still_running:
            self._reusable = False
            logger.warning(
                "%d cancelled episode(s) did not stop within %.0f s; leaving them behind",
                len(still_running),
                self.limits.grace_s,
            )
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                logger.debug("cancelled episode ended with %r", task.exception())

    async def _abort_requests(self) -> None:
        try:
            async with asyncio.timeout(self.limits.abort_s):
                report = await self.transport.abort(timeout_s=self.limits.abort_s)
        except Exception as error:
            logger.warning("could not abort this call's SGLang requests: %s", describe_error(error))
            return
        if not report.ok:
            logger.warning("%s", report.describe_failures("this call's SGLang requests"))

    async def _shut_down_environment(self) -> None:
        if self._serving is None:
            return
        serving, self._serving = self._serving, None
        # Verifiers 0.2.0's aiohttp servers give each connection 60 s; a cancelled
        # user-simulator rollout's handler can wait on a closed MCP session that never answers.
        for runner in interception_runners(self.environment):
            set_shutdown_timeout(runner, self.limits.handler_s)
        try:
            async with asyncio.timeout(self.limits.shutdown_s):
                await serving.__aexit__(None, None, None)
        except TimeoutError:
            self._reusable = False
            logger.warning(
                "the Verifiers environment's servers did not shut down within %.0f s; "
                "continuing without waiting for them",
                self.limits.shutdown_s,
            )
        except Exception as error:
            self._reusable = False
            logger.warning(
                "shutting down the Verifiers environment failed: %s", describe_error(error)
            )

    async def _close_transport(self) -> None:
        try:
            await self.transport.close()
        except Exception as error:
            logger.debug("closing the SGLang transport failed: %r", error)
