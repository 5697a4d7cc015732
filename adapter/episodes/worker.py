"""The episode side's request handler, behind every backend: a local child and a Ray actor
(``handle_frame``, bytes in and out) and the trainer's own process (``handle``). What differs
between Verifiers generations is a :class:`Generation`; each rollout call is an
:class:`~miles_verifiers.episodes.calls.OpenCall` held by one task from entry to exit.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from miles_verifiers.episodes.calls import EnvironmentPool, OpenCall
from miles_verifiers.errors import RolloutCallError
from miles_verifiers.protocol.messages import (
    CallEnd,
    CallStart,
    DescribeRequest,
    Done,
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
from miles_verifiers.protocol.versions import process_versions

logger = logging.getLogger(__name__)


class WorkerRequestError(RolloutCallError, RuntimeError):
    """A request the worker cannot carry out (answered as ``Refused``)."""


@dataclass(frozen=True)
class Built:
    """What a setup message built (once per worker); ``renderer_pool`` is 0.2's shared one."""

    setup: WorkerSetup
    tasks: Sequence[Any]
    environments: EnvironmentPool
    renderer_pool: Any = None

    def __post_init__(self) -> None:
        if len(self.tasks) != self.setup.expected_tasks:
            raise WorkerRequestError(
                f"the worker loaded {len(self.tasks)} tasks from {self.setup.config_path} but "
                f"the trainer has {self.setup.expected_tasks}: the taskset differs between the "
                "two processes. Fix: install the same taskset version and data where the "
                "workers run."
            )


class Generation(Protocol):
    """What differs between Verifiers generations (``build`` and ``describe`` run in a thread;
    ``open_call`` gives a call's client and the address its episodes reach it at, or "")."""

    def build(self, setup: WorkerSetup) -> Any: ...

    def describe(self, request: DescribeRequest) -> ReplyBody: ...

    def open_call(self, built: Any, start: CallStart, transport: Any) -> tuple[Any, str]: ...

    def close_call(self, call_id: str) -> None: ...

    async def run_group(self, built: Any, call: OpenCall, request: GroupRequest) -> GroupResult: ...


def generation_for(verifiers_version: str | None) -> Generation:
    from miles_verifiers.versions import uses_slots_api

    if not uses_slots_api(verifiers_version):
        from miles_verifiers.episodes.v02.episodes import Generation02

        return Generation02()
    from miles_verifiers.episodes.v04.episodes import Generation04

    return Generation04()


class WorkerHandler:
    """Answers one worker's requests; ``generation`` defaults to the installed Verifiers'."""

    def __init__(self, generation: Generation | None = None) -> None:
        self._generation = generation or generation_for(process_versions().get("verifiers"))
        self._built: Any = None
        self._calls: dict[str, OpenCall] = {}
        self._router_drops_warned: set[str] = set()  # warned once per worker

    @classmethod
    def in_trainer_process(cls) -> WorkerHandler:
        """The in-process backend's: 0.2.0 is the one generation the trainer's process runs."""
        from miles_verifiers.episodes.v02.episodes import Generation02

        return cls(Generation02(keeps_described=True))

    async def handle_frame(self, data: bytes) -> bytes:
        """Request bytes in, reply bytes out (never raises for a bad request)."""
        try:
            request = read_request(data)
        except (ProtocolVersionError, ValueError) as error:
            return Reply(id=_request_id(data), body=_refused(error)).model_dump_json().encode()
        try:
            body = await self.handle(request.body)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:
                raise
            body = Refused(error_type="CancelledError", message="the call ended first")
        except Exception as error:
            logger.debug("episode worker refused a %s request", request.body.kind, exc_info=True)
            body = _refused(error)
        return Reply(id=request.id, body=body).model_dump_json().encode()

    async def handle(self, body: Any) -> ReplyBody:
        if isinstance(body, WorkerSetup):
            if self._built is None:
                self._built = await asyncio.to_thread(self._generation.build, body)
            return Ready(versions=process_versions())
        if isinstance(body, DescribeRequest):
            return await asyncio.to_thread(self._generation.describe, body)
        if isinstance(body, CallStart):
            await self._open(body)
            return Done()
        if isinstance(body, CallEnd):
            await self.end_call(body.call_id)
            return Done()
        if isinstance(body, GroupRequest):
            return await self._run_group(body)
        raise WorkerRequestError(f"unknown request kind {getattr(body, 'kind', body)!r}")

    def _need_setup(self) -> Any:
        if self._built is None:
            raise WorkerRequestError("the worker got a call before its setup message")
        return self._built

    async def _open(self, start: CallStart) -> None:
        from miles_verifiers.engine.settings import TransportSettings
        from miles_verifiers.episodes.transport import SGLangTransport

        built = self._need_setup()
        call = self._calls.get(start.call_id)
        if call is None:
            # The trainer's template for the call's mode, with the engine and the rid prefix.
            template = built.setup.transport.get(start.mode)
            if template is None:
                raise WorkerRequestError(f"the worker has no transport settings for {start.mode!r}")
            settings = TransportSettings.model_validate(
                {**template, "engine_url": start.engine_url, "rid_prefix": start.rid_prefix}
            )
            transport = SGLangTransport(settings, router_drops_warned=self._router_drops_warned)
            client, base_url = self._generation.open_call(built, start, transport)
            call = OpenCall(
                start, built.environments, transport, client, built.setup.cleanup, base_url
            )
            call.holder = asyncio.get_running_loop().create_task(
                self._hold(call), name=f"episodes-call-{start.call_id}"
            )
            self._calls[start.call_id] = call
        # Whoever waits for the opening may give up; the holder goes on (and ends with the call).
        await asyncio.shield(call.opened)

    async def _hold(self, call: OpenCall) -> None:
        """Enter the call's scope, wait for its end, exit: in one task, so Verifiers' serving
        context is left where it was entered, by ``end_call`` or cancellation alike."""
        try:
            async with call:
                call.opened.set_result(None)
                await call.ended.wait()
        except BaseException as error:
            if call.opened.done():
                raise
            self._calls.pop(call.start.call_id, None)
            if isinstance(error, asyncio.CancelledError):
                call.opened.cancel()
                raise
            call.opened.set_exception(error)
        finally:
            self._generation.close_call(call.start.call_id)

    async def end_call(self, call_id: str) -> None:
        """Cancel the call's leftover episodes, abort its requests, release its environment."""
        call = self._calls.pop(call_id, None)
        if call is None or call.holder is None:
            return
        call.ended.set()
        # Not cancelled with this wait: the holder finishes its own (bounded) exit.
        await asyncio.wait([call.holder])
        if not call.holder.cancelled() and call.holder.exception() is not None:
            logger.debug("ending call %s: %r", call_id, call.holder.exception())

    async def close(self) -> None:
        for call_id in list(self._calls):
            await self.end_call(call_id)

    async def _run_group(self, request: GroupRequest) -> GroupResult:
        built = self._need_setup()
        call = self._calls.get(request.call_id)
        if call is None or not call.is_open:
            raise WorkerRequestError(f"call {request.call_id} is not open on this worker")
        if request.task_index >= len(built.tasks):
            raise WorkerRequestError(
                f"task index {request.task_index} is out of range ({len(built.tasks)} tasks)"
            )
        return await call.tasks.spawn(
            self._generation.run_group(built, call, request),
            name=f"episodes-group-{request.slot}",
        )


def _refused(error: BaseException) -> Refused:
    return Refused(
        error_type=type(error).__name__,
        message=str(error)[:4000],
        error_bases=tuple(cls.__name__ for cls in type(error).__mro__[1:]),
    )


def _request_id(data: bytes) -> int:
    try:
        raw = json.loads(data)
        value = raw.get("id") if isinstance(raw, dict) else None
        return value if isinstance(value, int) else -1
    except ValueError:
        return -1
