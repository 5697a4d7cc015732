"""The worker pool's placement of starts and stops, with stand-in workers (no processes): a
failed or hanging start is a lost worker, stopping never blocks the event loop, and a
``close()`` during a start leaves nothing running."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from miles_verifiers.errors import RolloutCallError
from miles_verifiers.protocol.messages import (
    CleanupSpec,
    Done,
    GroupRequest,
    GroupResult,
    RendererSpecModel,
    Reply,
    WorkerSetup,
    read_request,
)
from miles_verifiers.trainer.backends.call import WorkerCallScope
from miles_verifiers.trainer.backends.link import WorkerLostError
from miles_verifiers.trainer.backends.pool import PoolLimits, WorkerPool, WorkerRestartLimitError

# Bounds the scenarios below by (a hang fails the test instead of stalling the suite).
SCENARIO_BOUND_S = 20.0
# How long a stand-in's blocking kill waits to be let go before it gives up.
KILL_WAIT_S = 5.0


class StandInWorker:
    """Answers every request at once; records how it was stopped."""

    def __init__(self, name: str, release: threading.Event | None = None) -> None:
        self.name = name
        self.stopped = False
        self.kill_done = threading.Event()
        # A blocking kill waits for this (as a real kill waits for the process to exit).
        self._release = release
        self.released_in_time: bool | None = None

    @property
    def alive(self) -> bool:
        return not self.stopped

    @property
    def description(self) -> str:
        return f"stand-in worker {self.name}"

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        body = read_request(payload).body
        reply = GroupResult(traces=[]) if isinstance(body, GroupRequest) else Done()
        return Reply(id=request_id, body=reply).model_dump_json().encode()

    def kill(self) -> None:
        self.stopped = True
        if self._release is not None:
            self.released_in_time = self._release.wait(KILL_WAIT_S)
        self.kill_done.set()

    async def stop(self) -> None:
        self.stopped = True
        self.kill_done.set()


Starter = Callable[[str], Awaitable[Any]]


def make_pool(start: Starter, *, restarts: int = 0, start_timeout_s: float = 300.0) -> WorkerPool:
    setup = WorkerSetup(
        config_path="unused.toml",
        config_text="",
        expected_tasks=1,
        renderer=RendererSpecModel(tokenizer_source="unused", identity=None),
        transport={},
        cleanup=CleanupSpec(abort_s=1, grace_s=1, shutdown_s=1, handler_s=1),
    )
    limits = PoolLimits(count=1, restarts_per_call=restarts, start_timeout_s=start_timeout_s)
    return WorkerPool(limits, setup, start)


def make_call(pool: WorkerPool, call_id: str = "c1") -> WorkerCallScope:
    return WorkerCallScope(
        pool=pool,
        call_id=call_id,
        mode="train",
        transport=None,
        sampling_for=lambda slot: [{}],
        deadline_s=1.0,
        engine_url="http://127.0.0.1:1",
        model="unused",
        max_concurrency=1,
    )


def group(call: WorkerCallScope) -> GroupRequest:
    return GroupRequest(call_id=call.call_id, slot=0, task_index=0, sampling=[{}], deadline_s=1)


def run(scenario: Awaitable[Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(scenario, SCENARIO_BOUND_S)

    return asyncio.run(bounded())


def test_a_worker_that_fails_to_start_counts_as_a_restart() -> None:
    async def never_starts(name: str) -> Any:
        raise WorkerLostError(f"episode worker {name} did not start")

    pool = make_pool(never_starts, restarts=0)
    call = make_call(pool)

    async def scenario() -> None:
        first = await pool.run_group(call, group(call))
        assert first.failure == "worker_lost"
        await pool.run_group(call, group(call))  # the second start is a restart: over the bound

    with pytest.raises(WorkerRestartLimitError, match="MILES_VERIFIERS_EPISODE_WORKER_RESTARTS"):
        run(scenario())


def test_a_start_that_hangs_is_a_lost_worker_after_the_start_timeout() -> None:
    async def hangs(name: str) -> Any:
        await asyncio.Event().wait()

    pool = make_pool(hangs, restarts=0, start_timeout_s=0.1)
    call = make_call(pool)

    async def scenario() -> list[str | None]:
        first = await pool.run_group(call, group(call))
        try:
            await pool.run_group(call, group(call))
        except WorkerRestartLimitError:
            return [first.failure, "restart limit"]
        return [first.failure, None]

    assert run(scenario()) == ["worker_lost", "restart limit"]


def test_close_during_a_start_stops_the_worker_that_was_starting() -> None:
    started: list[StandInWorker] = []

    async def scenario() -> None:
        go_on = asyncio.Event()

        async def slow_start(name: str) -> StandInWorker:
            await go_on.wait()
            started.append(StandInWorker(name))
            return started[-1]

        pool = make_pool(slow_start)
        call = make_call(pool)
        running = asyncio.ensure_future(pool.run_group(call, group(call)))
        await asyncio.sleep(0)  # the start is under way
        await asyncio.to_thread(pool.close)  # as the trainer's thread would
        go_on.set()
        with pytest.raises(RolloutCallError, match="closed"):
            await running

    run(scenario())
    assert len(started) == 1 and started[0].stopped


def test_close_on_an_event_loop_thread_returns_while_the_workers_stop() -> None:
    release = threading.Event()
    workers: list[StandInWorker] = []

    async def start(name: str) -> StandInWorker:
        workers.append(StandInWorker(name, release))
        return workers[-1]

    pool = make_pool(start)
    call = make_call(pool)

    async def scenario() -> bool:
        await pool.run_group(call, group(call))
        pool.close()  # on the loop's own thread (a finalizer can run there)
        return workers[0].kill_done.is_set()

    finished_before_close_returned = run(scenario())
    release.set()

    assert not finished_before_close_returned
    assert workers[0].kill_done.wait(KILL_WAIT_S) and workers[0].released_in_time


def test_a_call_on_a_new_event_loop_stops_the_old_workers_without_blocking_it() -> None:
    release = threading.Event()
    workers: list[StandInWorker] = []

    async def start(name: str) -> StandInWorker:
        workers.append(StandInWorker(name, release))
        return workers[-1]

    pool = make_pool(start)

    async def first_loop() -> None:
        call = make_call(pool, "c1")
        await pool.run_group(call, group(call))

    async def second_loop() -> None:
        # Runs only if the loop is free while the old worker is being stopped.
        asyncio.get_running_loop().call_soon(release.set)
        call = make_call(pool, "c2")
        await pool.run_group(call, group(call))

    run(first_loop())
    run(second_loop())
    pool.close()

    assert workers[0].stopped and workers[0].released_in_time
    assert len(workers) == 2


class LosingWorker(StandInWorker):
    """Lost at its first group; its stop takes as long as it is let."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.stopping = asyncio.Event()

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        if isinstance(read_request(payload).body, GroupRequest):
            raise WorkerLostError(f"{self.description} was lost")
        return await super().request(request_id, payload, timeout_s=timeout_s)

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.Event().wait()


def test_close_also_stops_a_lost_worker_whose_stop_is_still_under_way() -> None:
    workers: list[LosingWorker] = []

    async def start(name: str) -> LosingWorker:
        workers.append(LosingWorker(name))
        return workers[-1]

    pool = make_pool(start, restarts=1)
    call = make_call(pool)

    async def scenario() -> None:
        running = asyncio.ensure_future(pool.run_group(call, group(call)))
        while not workers or not workers[0].stopping.is_set():
            await asyncio.sleep(0.01)
        await asyncio.to_thread(pool.close)
        running.cancel()

    run(scenario())
    assert workers[0].kill_done.is_set()
