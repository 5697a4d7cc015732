"""The episode side: owns environments, a renderer pool and one transport per call.

:class:`WorkerHandler` answers protocol requests. It is the same object behind every backend:
a local child process and a Ray actor (``handle_frame`` takes request bytes and returns reply
bytes), and the trainer's own process (``handle`` takes the request itself, see
:mod:`.in_process`). Each rollout call gets its own :class:`~miles_verifiers._episodes.CallScope`
(own environment, transport with the rid prefix the trainer chose for this worker, client),
keyed by call id, so a training and an evaluation call on one worker stay apart. Ending a call
cancels its leftover episodes and aborts their requests on the engines.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from miles_verifiers._episodes import (
    CallScope,
    CleanupLimits,
    EnvironmentPool,
    GroupRun,
    run_group,
)
from miles_verifiers._errors import RolloutCallError
from miles_verifiers._workers.describe import describe, installed_versions, load_config_and_taskset
from miles_verifiers._workers.protocol import (
    CallEnd,
    CallStart,
    DescribeRequest,
    Done,
    EpisodeErrorRecord,
    GroupRequest,
    GroupResult,
    ProtocolVersionError,
    Ready,
    Refused,
    Reply,
    ReplyBody,
    WorkerSetup,
    read_request,
)
from miles_verifiers._workers.records import trace_record

logger = logging.getLogger(__name__)


class WorkerRequestError(RolloutCallError, RuntimeError):
    """A request the worker cannot carry out (answered as ``Refused``)."""


@dataclass
class _Built:
    """What a setup message built (once per worker)."""

    setup: WorkerSetup
    tasks: tuple[Any, ...]
    environments: EnvironmentPool
    renderer_pool: Any
    renderer_spec: Any
    limits: CleanupLimits


@dataclass
class _Call:
    start: CallStart
    scope: CallScope
    semaphore: asyncio.Semaphore


def build(setup: WorkerSetup) -> _Built:
    """Load the config, the taskset and the renderer pool the construction checks described.

    Only the worker's own interpreter and packages are used (the taskset packages must be
    installed where the workers run): nothing of the trainer's import path is borrowed.
    """
    from miles_verifiers._clients import shared_renderer_pool

    config, loaded = load_config_and_taskset(setup.config_path, setup.config_text)
    if len(loaded.tasks) != setup.expected_tasks:
        raise WorkerRequestError(
            f"the worker loaded {len(loaded.tasks)} tasks from {setup.config_path} but the trainer has "
            f"{setup.expected_tasks}: the taskset differs between the two processes. Fix: "
            "install the same taskset version and data where the workers run."
        )
    return assemble(setup, config, loaded, shared_renderer_pool(renderer_spec(setup)))


def renderer_spec(setup: WorkerSetup) -> Any:
    from miles_verifiers._clients import RendererSpec

    return RendererSpec(**setup.renderer.model_dump())


def assemble(setup: WorkerSetup, config: Any, loaded: Any, renderer_pool: Any) -> _Built:
    """What ``setup`` builds, from a config and taskset already loaded and a renderer pool."""
    from verifiers.v1 import Environment

    return _Built(
        setup,
        loaded.tasks,
        EnvironmentPool(lambda: Environment(config), first=loaded.environment),
        renderer_pool,
        renderer_spec(setup),
        CleanupLimits(**setup.cleanup.model_dump()),
    )


def slots_api_runner() -> Any | None:
    """The runner for Verifiers >= 0.3 (Env / slots / run_slot) when that is what this
    worker's interpreter has installed; None for 0.2.0, which this module runs itself."""
    from miles_verifiers._versions import installed_versions, uses_slots_api

    if not uses_slots_api(installed_versions(["verifiers"])["verifiers"]):
        return None
    from miles_verifiers._workers.episodes04 import Episodes04

    return Episodes04()


class WorkerHandler:
    """Answers one worker's requests; every call it serves is keyed by its call id.

    With the default builder, a worker whose Verifiers is 0.3 or newer hands every request
    to :func:`slots_api_runner`'s runner instead (same protocol, the >= 0.3 API)."""

    def __init__(
        self,
        builder: Callable[[WorkerSetup], _Built] = build,
        runner: Any | None = None,
        built: _Built | None = None,
    ) -> None:
        """``built``: already set up (in the trainer's process), no setup message needed."""
        self._builder = builder
        self._built = built
        # In-process (``built``) runs the trainer's own Verifiers, which the gate allowed: 0.2.
        default = builder is build and built is None
        self._runner = runner if runner is not None or not default else slots_api_runner()
        self._calls: dict[str, _Call] = {}
        self._router_drops_warned: set[str] = set()  # warned once per worker

    async def handle_frame(self, data: bytes) -> bytes:
        """Request bytes in, reply bytes out (never raises for a bad request)."""
        try:
            request = read_request(data)
        except (ProtocolVersionError, ValueError) as error:
            reply = Reply(id=_request_id(data), body=_refused(error))
            return reply.model_dump_json().encode()
        try:
            body = await self.handle(request.body)
        except asyncio.CancelledError:
            if _current_task_cancelling():
                raise
            body = Refused(error_type="CancelledError", message="the call ended first")
        except Exception as error:
            logger.debug("episode worker refused a %s request", request.body.kind, exc_info=True)
            body = _refused(error)
        return Reply(id=request.id, body=body).model_dump_json().encode()

    async def handle(self, body: Any) -> ReplyBody:
        if self._runner is not None:
            return await self._runner.handle(body)
        if isinstance(body, WorkerSetup):
            if self._built is None:
                self._built = await asyncio.to_thread(self._builder, body)
            return Ready(versions=installed_versions())
        if isinstance(body, DescribeRequest):
            return await asyncio.to_thread(describe, body)
        if isinstance(body, CallStart):
            await self._start_call(body)
            return Done()
        if isinstance(body, CallEnd):
            await self.end_call(body.call_id)
            return Done()
        if isinstance(body, GroupRequest):
            return await self._run_group(body)
        raise WorkerRequestError(f"unknown request kind {getattr(body, 'kind', body)!r}")

    def _need_setup(self) -> _Built:
        if self._built is None:
            raise WorkerRequestError("the worker got a call before its setup message")
        return self._built

    async def _start_call(self, start: CallStart) -> None:
        from miles_verifiers._clients import MilesTrainClient
        from miles_verifiers._transport import SGLangTransport, TransportSettings

        built = self._need_setup()
        if start.call_id in self._calls:
            return
        template = built.setup.transport.get(start.mode)
        if template is None:
            raise WorkerRequestError(f"the worker has no transport settings for {start.mode!r}")
        settings = TransportSettings.model_validate(
            {**template, "engine_url": start.engine_url, "rid_prefix": start.rid_prefix}
        )
        transport = SGLangTransport(settings, router_drops_warned=self._router_drops_warned)
        client = MilesTrainClient(transport, built.renderer_pool, built.renderer_spec)
        scope = CallScope(built.environments, transport, client, built.limits)
        await scope.__aenter__()
        self._calls[start.call_id] = _Call(start, scope, asyncio.Semaphore(start.max_concurrency))

    async def end_call(self, call_id: str) -> None:
        """Cancel the call's leftover episodes, abort its requests, release its environment."""
        if self._runner is not None:
            await self._runner.end_call(call_id)
            return
        call = self._calls.pop(call_id, None)
        if call is not None:
            await call.scope.__aexit__(None, None, None)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.close()
        for call_id in list(self._calls):
            await self.end_call(call_id)

    async def _run_group(self, request: GroupRequest) -> GroupResult:
        built = self._need_setup()
        call = self._calls.get(request.call_id)
        if call is None:
            raise WorkerRequestError(f"call {request.call_id} is not open on this worker")
        if request.task_index >= len(built.tasks):
            raise WorkerRequestError(
                f"task index {request.task_index} is out of range ({len(built.tasks)} tasks)"
            )
        contexts = _contexts(call, request.sampling)
        task = call.scope.spawn(
            run_group(
                call.scope.environment,
                built.tasks[request.task_index],
                contexts,
                semaphore=call.semaphore,
                deadline_s=request.deadline_s,
            ),
            name=f"verifiers-group-{request.slot}",
        )
        run: GroupRun = await task
        transport = call.scope.transport
        return GroupResult(
            traces=[trace_record(t, transport.prefix_cache_usage) for t in run.traces],
            failure=run.failure,
            error=(_error_record(run.error) if run.error is not None else None),
        )


def _contexts(call: _Call, sampling: list[dict[str, Any]]) -> list[Any]:
    from verifiers.v1 import ModelContext, SamplingConfig

    def context(values: dict[str, Any]) -> Any:
        return ModelContext(
            model=call.start.model,
            client=call.scope.client,
            sampling=SamplingConfig.model_validate(values),
        )

    # Rollouts without their own seed share one context, as in the trainer process.
    if all(values == sampling[0] for values in sampling):
        return [context(sampling[0])] * len(sampling)
    return [context(values) for values in sampling]


def _error_record(error: BaseException) -> EpisodeErrorRecord:
    # The same two fields describe_error reads, so the trainer describes it identically.
    message = getattr(error, "message", None)
    return EpisodeErrorRecord(
        type=getattr(error, "type", None) or type(error).__name__,
        message=str(error) if message is None else str(message),
    )


def _refused(error: BaseException) -> Refused:
    return Refused(error_type=type(error).__name__, message=str(error)[:4000])


def _request_id(data: bytes) -> int:
    try:
        raw = json.loads(data)
        value = raw.get("id") if isinstance(raw, dict) else None
        return value if isinstance(value, int) else -1
    except ValueError:
        return -1


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
