"""Running Verifiers episodes for one rollout call, and winding them down cleanly.

Each rollout call (a training step or an evaluation) gets a :class:`CallScope`: its own
Verifiers ``Environment`` (``env.serving()`` keeps per-environment serving state, so two
overlapping calls must not share one), its own SGLang transport (its own rid prefix, so its
aborts reach only its own requests) and its own client around the shared renderer pool.

Leaving the scope winds everything down within bounded time: the client stops serving, every
episode still running is cancelled, this call's requests are aborted on the workers behind the
router, the cancelled episodes get a short grace period, and the environment's servers are
shut down under a deadline (Verifiers' interception server would otherwise wait up to a minute
for a request handler that is still running).
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


# -- one task group ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeRun:
    """What running one task's episode produced: its Verifiers traces, in rollout order (the
    worker turns them into trace records). When the episode itself failed (``failure`` set)
    they are whatever traces its rollouts had reached, possibly fewer than asked for, possibly
    unscored.
    """

    traces: tuple[Any, ...]
    failure: EpisodeFailure | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


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
    """Run ``len(contexts)`` rollouts of ``task``, rollout ``k`` with model context ``contexts[k]``.

    Never raises for the episode's own failures: ``env.episode`` refusing the task, a group
    reward raising out of ``episode.run`` (verifiers lets ``TaskError`` escape there), or the
    deadline passing are returned as a failed :class:`EpisodeRun`. Cancellation propagates.
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


# -- environments ---------------------------------------------------------------------------------


class EnvironmentPool:
    """Verifiers environments for one config, one per concurrent rollout call.

    Building an ``Environment`` is cheap (the taskset is loaded once, at construction, and its
    tasks are reused), but ``env.serving()`` keeps state on the instance, so a call checks one
    out for its whole duration. An environment whose shutdown did not finish cleanly is not
    reused.
    """

    def __init__(self, factory: Callable[[], Any], first: Any | None = None) -> None:
        self._factory = factory
        self._idle: list[Any] = [first] if first is not None else []

    def checkout(self) -> Any:
        return self._idle.pop() if self._idle else self._factory()

    def give_back(self, environment: Any) -> None:
        self._idle.append(environment)


# -- one rollout call --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CleanupLimits:
    """Seconds the wind-down of a call may spend in each step (each bounded)."""

    abort_s: float = 10.0
    grace_s: float = 10.0
    shutdown_s: float = 15.0
    # How long the environment's interception servers wait for request handlers that are
    # still running when the call ends (they belong to cancelled rollouts by then).
    handler_s: float = 1.0


@dataclass
class CallScope:
    """The resources of one rollout call; use as ``async with``.

    ``spawn`` starts episode work that belongs to the call; whatever is still running when the
    scope exits (normally or not) is cancelled and its requests aborted.
    """

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
        hurry_interception_shutdown(self.environment, self.limits.handler_s)
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


def hurry_interception_shutdown(environment: Any, seconds: float) -> None:
    """Make the environment's interception servers give up on leftover handlers after ``seconds``.

    Verifiers 0.2.0 shuts its aiohttp interception servers down with aiohttp's default grace
    of 60 s per connection. When a user-simulator rollout is cancelled, its request handler can
    be left waiting on the simulator's MCP session, which was closed with the rollout and never
    answers, so every cancellation would cost that full minute. At call end every rollout of
    the call has finished or been cancelled, so whatever handler is still running is orphaned.
    (Private attributes of verifiers 0.2.0 and aiohttp: anything missing is left alone.)
    """
    for runner in interception_runners(environment):
        set_shutdown_timeout(runner, seconds)
