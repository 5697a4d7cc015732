"""Running Verifiers episodes for one rollout call, and winding them down cleanly.

Each rollout call gets a :class:`CallScope`: its own ``Environment`` (``env.serving()`` keeps
per-environment state), its own SGLang transport (its rid prefix, so its aborts reach only its
requests) and client. Leaving the scope winds down within bounded time: the client stops
serving, leftover episodes are cancelled and their requests aborted, and the environment's
servers shut down under a deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from miles_verifiers.episodes.v02.upstream import (
    interception_runners,
    set_rollout_context,
    set_shutdown_timeout,
)
from miles_verifiers.errors import RolloutCallError, abort_failures, describe_error
from miles_verifiers.owned_tasks import OwnedTasks

logger = logging.getLogger(__name__)

EpisodeFailure = Literal["episode_error", "episode_timeout"]


class EpisodeTimeoutError(RolloutCallError, TimeoutError):
    """An episode ran past its wall-clock deadline and was cancelled."""


@dataclass(frozen=True)
class EpisodeRun:
    """One task's episode: its traces in rollout order; when it failed (``failure`` set), those
    its rollouts had reached (maybe fewer, maybe unscored)."""

    traces: tuple[Any, ...]
    failure: EpisodeFailure | None = None
    error: BaseException | None = None


def _reached_traces(episode: Any) -> tuple[Any, ...]:
    if episode is None:
        return ()
    return tuple(r.trace for r in episode.rollouts if getattr(r, "trace", None) is not None)


async def run_group(
    environment: Any,
    task: Any,
    contexts: Sequence[Any],
    *,
    semaphore: asyncio.Semaphore | None,
    deadline_s: float,
) -> EpisodeRun:
    """Run ``len(contexts)`` rollouts of ``task``, rollout ``k`` with ``contexts[k]``.

    The episode's own failures (a refused task, a group reward raising, the deadline) are
    returned as a failed :class:`EpisodeRun`; cancellation propagates.
    """
    episode = None
    try:
        episode = environment.episode(task, contexts[0], n=len(contexts))
        for rollout, context in zip(episode.rollouts, contexts, strict=True):
            # Verifiers reads the context when the rollout starts, so per-rollout seeds go here.
            set_rollout_context(rollout, context)
        async with asyncio.timeout(deadline_s):
            traces = await episode.run(semaphore)
        return EpisodeRun(tuple(traces))
    except TimeoutError:
        error = EpisodeTimeoutError(
            f"the episode of task {getattr(task.data, 'idx', '?')} ran past its deadline of "
            f"{deadline_s:g} s and was cancelled"
        )
        return EpisodeRun(_reached_traces(episode), "episode_timeout", error)
    except Exception as error:
        return EpisodeRun(_reached_traces(episode), "episode_error", error)


class EnvironmentPool:
    """Verifiers environments for one config, one checked out per concurrent rollout call
    (``env.serving()`` keeps state on the instance); one that did not shut down cleanly is not
    given back."""

    def __init__(self, factory: Callable[[], Any], first: Any | None = None) -> None:
        self._factory = factory
        self._idle: list[Any] = [first] if first is not None else []

    def checkout(self) -> Any:
        return self._idle.pop() if self._idle else self._factory()

    def give_back(self, environment: Any) -> None:
        self._idle.append(environment)


@dataclass(frozen=True)
class CleanupLimits:
    """Seconds the wind-down of a call may spend in each step (each bounded)."""

    abort_s: float = 10.0
    grace_s: float = 10.0
    shutdown_s: float = 15.0
    # How long the interception servers wait for handlers still running at call end.
    handler_s: float = 1.0


@dataclass
class CallScope:
    """The resources of one rollout call (``async with``); what ``spawn`` started and still
    runs at exit is cancelled and its requests aborted."""

    environments: EnvironmentPool
    transport: Any
    client: Any
    limits: CleanupLimits = field(default_factory=CleanupLimits)
    environment: Any = None
    _serving: Any = None
    _tasks: OwnedTasks = field(default_factory=OwnedTasks)
    _reusable: bool = True

    async def __aenter__(self) -> Self:
        self.environment = self.environments.checkout()
        self._serving = self.environment.serving()
        try:
            await self._serving.__aenter__()
        except BaseException:
            self._serving = None
            await self._close_transport()
            raise
        return self

    def spawn(
        self, coroutine: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        return self._tasks.spawn(coroutine, name=name)

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
        leftovers = self._tasks.cancel_running()
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
        failed = abort_failures(report, "this call's SGLang requests")
        if failed is not None:
            logger.warning("%s", failed)

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
