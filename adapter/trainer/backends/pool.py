"""Hands task groups to episode workers (local processes or Ray actors) and keeps them running.

A group goes to the least loaded worker. Workers start at a call's first group and are reused
across calls, under a rid prefix per call. A worker that exits, fails to start, or misses the
group's deadline plus a margin is *lost*: its groups come back as ``worker_lost`` runs, and the
next group starts a fresh one, within ``restarts_per_call``. A hello with other versions than
the description stops the call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from miles_verifiers.errors import RolloutCallError
from miles_verifiers.protocol.messages import (
    CallEnd,
    CallStart,
    GroupRequest,
    GroupResult,
    Ready,
    Refused,
    Reply,
    Request,
    WorkerSetup,
    read_reply,
)
from miles_verifiers.protocol.versions import WorkerVersionsError, check_worker_versions
from miles_verifiers.trainer.groups import GroupRun

logger = logging.getLogger(__name__)

RESTARTS_SETTING = "MILES_VERIFIERS_EPISODE_WORKER_RESTARTS"


class WorkerLostError(RolloutCallError):
    """An episode worker died, closed its pipe, or did not answer in time."""


class WorkerLink(Protocol):
    """One running worker: request bytes in, reply bytes out (else :class:`WorkerLostError`);
    ``kill`` stops it from any thread (blocking, bounded), ``stop`` without blocking its loop."""

    @property
    def alive(self) -> bool: ...

    @property
    def description(self) -> str: ...

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes: ...

    def kill(self) -> None: ...

    async def stop(self) -> None: ...


class WorkerRestartLimitError(RolloutCallError):
    """Episode workers were lost more often in one call than the restart bound allows."""


class WorkerRefusedError(RolloutCallError):
    """An episode worker could not carry out a request (usually its setup)."""


class RemoteEpisodeError(RolloutCallError):
    """An episode that failed on a worker, as the worker described it."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type = type_name
        self.message = message


LinkStarter = Callable[[str], Awaitable[WorkerLink]]


@dataclass(frozen=True)
class PoolLimits:
    count: int
    restarts_per_call: int
    # Added to a group's deadline before its worker counts as hung.
    answer_margin_s: float = 25.0
    # Setup (taskset, tokenizer), call start and call end.
    control_timeout_s: float = 300.0
    # Starting a worker's process or actor (its setup message is bounded by the one above).
    start_timeout_s: float = 300.0


class CallOnWorkers(Protocol):
    """What the pool needs from the call a group belongs to."""

    call_id: str

    def start_message(self, rid_prefix: str) -> CallStart: ...

    def count_restart(self, bound: int) -> None: ...

    def worker_lost(self, rid_prefix: str | None) -> None: ...


@dataclass
class _Slot:
    index: int
    link: WorkerLink | None = None
    generation: int = 0
    load: int = 0
    # call id -> this worker's rid prefix for that call, for the current link only.
    calls: dict[str, str] = field(default_factory=dict)
    lock: asyncio.Lock | None = None
    # The last worker of this slot was lost (not stopped on purpose): starting one is a restart.
    lost: bool = False


class WorkerPool:
    def __init__(
        self,
        limits: PoolLimits,
        setup: WorkerSetup,
        start_link: LinkStarter,
        *,
        on_close: Callable[[], None] | None = None,
        expected_versions: Mapping[str, str] | None = None,
    ) -> None:
        self.limits = limits
        # What construction's describe step reported; each worker's hello must match it.
        self._expected_versions = dict(expected_versions or {})
        self._on_close = on_close
        self._setup_payload = setup
        self._start_link = start_link
        self._slots = [_Slot(i) for i in range(limits.count)]
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard = threading.Lock()
        self._closed = False
        # Links taken out of their slot and being stopped (close() stops them too).
        self._stopping: set[WorkerLink] = set()

    @property
    def links(self) -> list[WorkerLink]:
        return [s.link for s in self._slots if s.link is not None]

    def close(self) -> None:
        """Stop every worker now (any thread; bounded; on an event loop without waiting)."""
        with self._guard:
            self._closed = True
            links = self.links + list(self._stopping)
            for slot in self._slots:
                slot.link, slot.calls = None, {}
        kill_all(links, wait=not _in_event_loop())
        if self._on_close is not None:
            self._on_close()

    async def _stop(self, link: WorkerLink) -> None:
        with self._guard:
            self._stopping.add(link)
        try:
            await link.stop()
        finally:
            with self._guard:
                self._stopping.discard(link)

    async def _bind_loop(self) -> None:
        # Links belong to the loop that started them: a call on another starts fresh workers.
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        with self._guard:
            stale = self.links
            for slot in self._slots:
                slot.link, slot.calls, slot.lock = None, {}, asyncio.Lock()
            self._loop = loop
        if stale:
            await asyncio.to_thread(kill_all, stale, wait=True)

    async def _ask(self, link: WorkerLink, body: Any, timeout_s: float) -> Any:
        request = Request(id=next(self._ids), body=body)
        raw = await link.request(
            request.id, request.model_dump_json().encode(), timeout_s=timeout_s
        )
        reply: Reply = read_reply(raw)
        if isinstance(reply.body, Refused):
            raise WorkerRefusedError(
                f"{link.description} refused a {body.kind} request: "
                f"{reply.body.error_type}: {reply.body.message}"
            )
        return reply.body

    async def _ready(self, slot: _Slot, call: CallOnWorkers) -> tuple[WorkerLink, str]:
        assert slot.lock is not None
        async with slot.lock:
            if self._closed:
                raise RolloutCallError("the rollout function was closed; its workers are stopped")
            link = slot.link
            if link is None or not link.alive:
                if link is not None:  # it died while idle
                    await self._drop(slot, link)
                if slot.lost:
                    call.count_restart(self.limits.restarts_per_call)
                    slot.lost = False
                slot.generation += 1
                slot.calls = {}
                link = await self._start(slot)
                try:
                    hello = await self._ask(
                        link, self._setup_payload, self.limits.control_timeout_s
                    )
                    if isinstance(hello, Ready):
                        check_worker_versions(self._expected_versions, hello, link.description)
                except (WorkerRefusedError, WorkerVersionsError):
                    slot.link = None
                    await self._stop(link)
                    raise
            prefix = slot.calls.get(call.call_id)
            if prefix is None:
                prefix = f"{call.call_id}_w{slot.index}g{slot.generation}"
                slot.calls[call.call_id] = prefix
                await self._ask(link, call.start_message(prefix), self.limits.control_timeout_s)
            return link, prefix

    async def _start(self, slot: _Slot) -> WorkerLink:
        """A new worker in ``slot`` (bounded); a failed start counts as a lost worker."""
        name = f"{slot.index}.{slot.generation}"
        try:
            async with asyncio.timeout(self.limits.start_timeout_s):
                link = await self._start_link(name)
        except TimeoutError as error:
            slot.lost = True
            raise WorkerLostError(
                f"episode worker {name} did not start within {self.limits.start_timeout_s:g} s"
            ) from error
        except WorkerLostError:
            slot.lost = True
            raise
        with self._guard:
            closed = self._closed
            if not closed:
                slot.link = link
        if closed:  # close() ran while it started: it must not be left running
            await self._stop(link)
            raise RolloutCallError("the rollout function was closed; its workers are stopped")
        return link

    async def run_group(self, call: CallOnWorkers, request: GroupRequest) -> GroupRun:
        """Run one group on a worker; a lost worker yields a failed ``worker_lost`` run."""
        await self._bind_loop()
        slot = min(self._slots, key=lambda s: (s.load, s.index))
        slot.load += 1
        link: WorkerLink | None = None
        prefix: str | None = None
        try:
            link, prefix = await self._ready(slot, call)
            body = await self._ask(link, request, request.deadline_s + self.limits.answer_margin_s)
        except WorkerLostError as error:
            logger.warning("%s; its groups are dropped as worker_lost", error)
            link = link or slot.link
            if link is not None:  # a hung worker is still running; a dead one left a group
                await self._drop(slot, link)
            call.worker_lost(prefix)
            return GroupRun((), "worker_lost", error)
        finally:
            slot.load -= 1
        if not isinstance(body, GroupResult):
            raise WorkerRefusedError(f"{link.description} answered a group with {body.kind}")
        return group_run(body)

    async def _drop(self, slot: _Slot, link: WorkerLink) -> None:
        """Stop a lost worker, taking it out of ``slot`` if it is still there."""
        if slot.link is link:
            slot.link, slot.calls, slot.lost = None, {}, True
        await self._stop(link)

    async def end_call(self, call: CallOnWorkers, timeout_s: float) -> list[str]:
        """Tell every worker that knows the call to end it; returns the prefixes that failed."""
        await self._bind_loop()
        started = [
            (s, s.link, s.calls.pop(call.call_id)) for s in self._slots if call.call_id in s.calls
        ]

        async def end(slot: _Slot, link: WorkerLink | None, prefix: str) -> str | None:
            if link is None or not link.alive:
                return prefix
            try:
                await self._ask(link, CallEnd(call_id=call.call_id), timeout_s)
                return None
            except (WorkerLostError, WorkerRefusedError) as error:
                logger.warning(
                    "ending call %s on %s failed: %s", call.call_id, link.description, error
                )
                await self._drop(slot, link)
                return prefix

        failed = await asyncio.gather(*(end(s, link, p) for s, link, p in started))
        return [p for p in failed if p is not None]


def group_run(result: GroupResult) -> GroupRun:
    """A worker's answer to a group as the trainer side reads it."""
    error = result.error
    failed = RemoteEpisodeError(error.type, error.message) if error is not None else None
    return GroupRun(tuple(result.traces), result.failure, failed)


def kill_all(links: list[WorkerLink], *, wait: bool) -> None:
    """Stop ``links`` at once, each in a thread of its own (each stop is bounded)."""
    threads = [
        threading.Thread(target=_kill_quietly, args=(link,), name=f"stop {link.description}")
        for link in links
    ]
    for thread in threads:
        thread.start()
    if wait:
        for thread in threads:
            thread.join()


def _kill_quietly(link: WorkerLink) -> None:
    try:
        link.kill()
    except Exception as error:  # stopping must go on for the others
        logger.warning("stopping %s failed: %r", link.description, error)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
