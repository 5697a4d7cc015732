"""The episode worker for Verifiers 0.4 (the Env / slots / run_slot V1 API).

It answers the same protocol requests as the 0.2.0 worker (:mod:`._workers.worker`), which hands
them here when the worker's Verifiers is 0.3 or newer. A group of ``n`` rollouts is ``n``
slots of one task (``env.slots(task, n)``), each an independent episode run by
``env.run_slot`` with its own model context, so every rollout gets its own sampling seed
without any private hook. The model client is Verifiers' own ``TrainClient``, built by the
interception server from a ``TrainClientConfig``; its engine connection is the call's SGLang
transport (exact token ids and log-probs, this worker's rid prefix for aborts), put there
through the one non-public seam listed in :mod:`miles_verifiers._upstream04`.

Only the traces of trainable agents become records; a rollout must yield exactly one. A group
whose rollout yields none or several, whose clean trace has an unscored reward, or whose
episode failed as a whole (an env hook, its deadline) comes back failed with a named error
type, so the trainer drops it (``episode_error`` / ``episode_timeout``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from miles_verifiers._episodes import CallScope, CleanupLimits, EnvironmentPool
from miles_verifiers._errors import RolloutCallError
from miles_verifiers._upstream04 import TransportLoans, install_transport_hook
from miles_verifiers._workers.config04 import Loaded04, describe04, load04, renderer_config04
from miles_verifiers._workers.protocol import (
    CallEnd,
    CallStart,
    DescribeRequest,
    Done,
    EpisodeErrorRecord,
    GroupRequest,
    GroupResult,
    Ready,
    ReplyBody,
    WorkerSetup,
)
from miles_verifiers._workers.records import TraceRecord
from miles_verifiers._workers.records04 import trace_record04

# The API key variable the TrainClientConfig names: none is needed (the transport talks to
# SGLang), and naming Verifiers' default would make it read the Prime CLI's config.
API_KEY_VAR = "MILES_VERIFIERS_NO_API_KEY"

# Error types of a group failed for a reason of this worker's (the trainer shows them).
TRAINABLE_COUNT_ERROR = "TrainableTraceCountError"
UNSCORED_ERROR = "UnscoredRewardError"
EPISODE_ERROR = "EpisodeError"
EPISODE_TIMEOUT = "EpisodeTimeoutError"


class Worker04RequestError(RolloutCallError, RuntimeError):
    """A request the 0.4 worker cannot carry out (answered as ``Refused``)."""


@dataclass(frozen=True)
class Built04:
    """What a setup message built (once per worker)."""

    setup: WorkerSetup
    loaded: Loaded04
    environments: EnvironmentPool
    limits: CleanupLimits


@dataclass
class Call04:
    start: CallStart
    scope: CallScope
    semaphore: asyncio.Semaphore
    base_url: str


@dataclass(frozen=True)
class SlotsRun:
    """What running one group's slots produced (records in rollout order)."""

    traces: tuple[TraceRecord, ...]
    failure: str | None = None
    error: EpisodeErrorRecord | None = None


def build04(setup: WorkerSetup) -> Built04:
    """Load the environment and its tasks the way the describe step did."""
    import verifiers.v1 as vf

    loaded = load04(setup.config_path, setup.config_text)
    if len(loaded.tasks) != setup.expected_tasks:
        raise Worker04RequestError(
            f"the worker loaded {len(loaded.tasks)} tasks from {setup.config_path} but the "
            f"trainer has {setup.expected_tasks}: the taskset differs between the two "
            "processes. Fix: install the same taskset version and data where the workers run."
        )
    config = loaded.config
    return Built04(
        setup,
        loaded,
        EnvironmentPool(lambda: vf.load_environment(config), first=loaded.environment),
        CleanupLimits(**setup.cleanup.model_dump()),
    )


def client_config04(setup: WorkerSetup, base_url: str) -> Any:
    """The TrainClientConfig of one call: the marker address and the renderer to use."""
    from verifiers.v1 import TrainClientConfig

    spec = setup.renderer
    return TrainClientConfig(
        base_url=base_url,
        api_key_var=API_KEY_VAR,
        renderer_model_name=spec.tokenizer_source,
        renderer=renderer_config04(spec.identity),
    )


def contexts04(
    model: str, client: Any, chat_template_kwargs: dict[str, Any], sampling: Sequence[dict[str, Any]]
) -> list[Any]:
    """One model context per slot (its own seed, when the trainer sent one)."""
    from verifiers.v1 import ModelContext, SamplingConfig

    extra = {"chat_template_kwargs": chat_template_kwargs} if chat_template_kwargs else {}
    return [
        ModelContext(
            model=model, client=client, sampling=SamplingConfig.model_validate({**values, **extra})
        )
        for values in sampling
    ]


def _error(kind: str, message: str) -> EpisodeErrorRecord:
    return EpisodeErrorRecord(type=kind, message=" ".join(message.split())[:2000])


def judge_episodes(
    episodes: Sequence[Any], prefix_cache: Any = None
) -> SlotsRun:
    """The records of finished episodes (one per slot) and, when the group cannot be trained
    as it is, why (see the module docstring)."""
    records: list[TraceRecord] = []
    for slot, episode in enumerate(episodes):
        trainable = [t for t in episode.traces if getattr(t.agent, "trainable", True)]
        records += [trace_record04(t, prefix_cache) for t in trainable]
        if episode.errors:
            last = episode.errors[-1]
            kind = EPISODE_TIMEOUT if getattr(episode, "is_timeout", False) else EPISODE_ERROR
            failure = "episode_timeout" if kind == EPISODE_TIMEOUT else "episode_error"
            return SlotsRun(
                tuple(records), failure, _error(kind, f"{last.type}: {last.message}")
            )
        if len(trainable) != 1:
            return SlotsRun(
                tuple(records),
                "episode_error",
                _error(
                    TRAINABLE_COUNT_ERROR,
                    f"rollout {slot} of task {episode.task.data.idx} yielded {len(trainable)} "
                    "traces of trainable agents; the Miles adapter trains exactly one per "
                    "rollout (multi-trace episodes such as best-of-n are not supported yet)",
                ),
            )
    unscored = [r for r in records if r.error is None and r.unscored]
    if unscored:
        first = unscored[0]
        return SlotsRun(
            tuple(records),
            "episode_error",
            _error(
                UNSCORED_ERROR,
                f"trace {first.id} finished cleanly but Verifiers left its reward(s) "
                f"{', '.join(first.unscored)} unscored (None); a group is trained only with "
                "every reward scored",
            ),
        )
    return SlotsRun(tuple(records))


async def run_slots(
    environment: Any,
    task: Any,
    contexts: Sequence[Any],
    *,
    semaphore: asyncio.Semaphore | None,
    deadline_s: float,
    prefix_cache: Any = None,
) -> SlotsRun:
    """``len(contexts)`` independent episodes of ``task``, slot ``k`` with ``contexts[k]``.

    Never raises for the episodes' own failures (they come back as a failed run, with the
    traces the slots had reached); cancellation propagates."""
    slots = environment.slots(task, len(contexts))
    try:
        async with asyncio.timeout(deadline_s):
            episodes = await asyncio.gather(
                *(
                    environment.run_slot(slot, context, semaphore)
                    for slot, context in zip(slots, contexts, strict=True)
                )
            )
    except TimeoutError:
        reached = [
            trace_record04(t, prefix_cache)
            for slot in slots
            for t in slot.traces
            if getattr(t.agent, "trainable", True)
        ]
        return SlotsRun(
            tuple(reached),
            "episode_timeout",
            _error(
                EPISODE_TIMEOUT,
                f"the episodes of task {task.data.idx} ran past their deadline of "
                f"{deadline_s:g} s and were cancelled",
            ),
        )
    except Exception as error:
        return SlotsRun((), "episode_error", _error(type(error).__name__, str(error)))
    return judge_episodes(episodes, prefix_cache)


class Episodes04:
    """Answers one worker's requests with Verifiers 0.4; every call is keyed by its id."""

    def __init__(self) -> None:
        self._built: Built04 | None = None
        self._calls: dict[str, Call04] = {}
        self._loans: TransportLoans | None = None
        self._router_drops_warned: set[str] = set()

    async def handle(self, body: Any) -> ReplyBody:
        from miles_verifiers._workers.describe import installed_versions

        if isinstance(body, WorkerSetup):
            if self._built is None:
                self._built = await asyncio.to_thread(build04, body)
            return Ready(versions=installed_versions())
        if isinstance(body, DescribeRequest):
            return await asyncio.to_thread(describe04, body)
        if isinstance(body, CallStart):
            await self._start_call(body)
            return Done()
        if isinstance(body, CallEnd):
            await self.end_call(body.call_id)
            return Done()
        if isinstance(body, GroupRequest):
            return await self._run_group(body)
        raise Worker04RequestError(f"unknown request kind {getattr(body, 'kind', body)!r}")

    def _need_setup(self) -> Built04:
        if self._built is None:
            raise Worker04RequestError("the worker got a call before its setup message")
        return self._built

    async def _start_call(self, start: CallStart) -> None:
        from miles_verifiers._transport import SGLangTransport, TransportSettings

        built = self._need_setup()
        if start.call_id in self._calls:
            return
        template = built.setup.transport.get(start.mode)
        if template is None:
            raise Worker04RequestError(f"the worker has no transport settings for {start.mode!r}")
        settings = TransportSettings.model_validate(
            {**template, "engine_url": start.engine_url, "rid_prefix": start.rid_prefix}
        )
        if self._loans is None:
            self._loans = install_transport_hook(TransportLoans())
        transport = SGLangTransport(settings, router_drops_warned=self._router_drops_warned)
        base_url, lent = self._loans.lend(start.call_id, transport)
        scope = CallScope(built.environments, transport, lent, built.limits)
        try:
            await scope.__aenter__()
        except BaseException:
            self._loans.take_back(start.call_id)
            raise
        self._calls[start.call_id] = Call04(
            start, scope, asyncio.Semaphore(start.max_concurrency), base_url
        )

    async def end_call(self, call_id: str) -> None:
        """Cancel the call's leftover episodes, abort its requests, release its environment."""
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        try:
            await call.scope.__aexit__(None, None, None)
        finally:
            if self._loans is not None:
                self._loans.take_back(call_id)

    async def close(self) -> None:
        for call_id in list(self._calls):
            await self.end_call(call_id)

    async def _run_group(self, request: GroupRequest) -> GroupResult:
        built = self._need_setup()
        call = self._calls.get(request.call_id)
        if call is None:
            raise Worker04RequestError(f"call {request.call_id} is not open on this worker")
        tasks = built.loaded.tasks
        if request.task_index >= len(tasks):
            raise Worker04RequestError(
                f"task index {request.task_index} is out of range ({len(tasks)} tasks)"
            )
        client = client_config04(built.setup, call.base_url)
        kwargs = json.loads(built.setup.renderer.chat_template_kwargs_json or "{}")
        contexts = contexts04(call.start.model, client, kwargs, request.sampling)
        task = call.scope.spawn(
            run_slots(
                call.scope.environment,
                tasks[request.task_index],
                contexts,
                semaphore=call.semaphore,
                deadline_s=request.deadline_s,
                prefix_cache=call.scope.transport.prefix_cache_usage,
            ),
            name=f"verifiers04-group-{request.slot}",
        )
        run: SlotsRun = await task
        failure = run.failure if run.failure in ("episode_error", "episode_timeout") else None
        return GroupResult(
            traces=list(run.traces),
            failure=failure,
            error=run.error,
        )
