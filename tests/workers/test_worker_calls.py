"""A call on the episode side holds its environment's serving context in one task of its own:
entered and exited there whether the call is ended by a request from another task or cut
short by the event loop shutting down (a context left open would be closed by the loop's
async-generator finaliser instead, outside any task, which Verifiers' serving does not
survive). Stand-in generation and environment; the transport is real but never used."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from miles_verifiers.episodes.calls import EnvironmentPool
from miles_verifiers.episodes.worker import WorkerHandler
from miles_verifiers.protocol.messages import (
    CallEnd,
    CallStart,
    WorkerSetup,
)
from tests.workers.scenarios import run, unused_setup

START = CallStart(
    call_id="c1",
    mode="train",
    rid_prefix="mvt_c1",
    engine_url="http://127.0.0.1:9",
    model="m",
    max_concurrency=2,
)


class ServedEnvironment:
    """Records the task that entered and the task that left its serving context."""

    def __init__(self) -> None:
        self.entered_in: asyncio.Task[Any] | None = None
        self.exited_in: asyncio.Task[Any] | None = None

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        self.entered_in = asyncio.current_task()
        try:
            yield
        finally:
            self.exited_in = asyncio.current_task()


@dataclass
class Built:
    environment: ServedEnvironment
    setup: WorkerSetup = field(
        default_factory=lambda: unused_setup(transport={"train": {"max_response_len": 8}})
    )
    tasks: tuple[Any, ...] = ("task",)

    @property
    def environments(self) -> EnvironmentPool:
        return EnvironmentPool(lambda: self.environment)


class Client:
    def end(self) -> None:
        pass


class StandInGeneration:
    def __init__(self, built: Built) -> None:
        self.built = built
        self.closed: list[str] = []

    def build(self, setup: WorkerSetup) -> Built:
        return self.built

    def open_call(self, built: Any, start: CallStart, transport: Any) -> tuple[Any, str]:
        return Client(), ""

    def close_call(self, call_id: str) -> None:
        self.closed.append(call_id)


def stand_in_handler() -> tuple[ServedEnvironment, StandInGeneration, WorkerHandler]:
    """A worker handler on a stand-in generation serving one recording environment."""
    environment = ServedEnvironment()
    generation = StandInGeneration(Built(environment))
    return environment, generation, WorkerHandler(generation)  # type: ignore[arg-type]


def test_a_call_ended_from_another_task_leaves_serving_in_the_task_that_entered_it() -> None:
    environment, generation, handler = stand_in_handler()

    async def scenario() -> None:
        await handler.handle(generation.built.setup)
        await asyncio.create_task(handler.handle(START))
        await asyncio.create_task(handler.handle(CallEnd(call_id="c1")))

    run(scenario())

    assert environment.exited_in is not None
    assert environment.exited_in is environment.entered_in
    assert generation.closed == ["c1"]


def test_a_call_cut_short_by_the_loop_shutting_down_still_leaves_serving_in_its_own_task() -> None:
    environment, generation, handler = stand_in_handler()

    async def scenario() -> None:
        await handler.handle(generation.built.setup)
        await handler.handle(START)  # and never ended: asyncio.run cancels what is left

    run(scenario())

    assert environment.exited_in is not None
    assert environment.exited_in is environment.entered_in
