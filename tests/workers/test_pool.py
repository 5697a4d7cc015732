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
    Done,
    GroupRequest,
    GroupResult,
    Reply,
    read_request,
)
from miles_verifiers.trainer.backends.pool import (
    PoolLimits,
    WorkerLostError,
    WorkerPool,
    WorkerRestartLimitError,
)
from tests.workers.scenarios import group, make_call, run, unused_setup

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


class HeldStarts:
    """Starts stand-in workers whose blocking kill waits for ``release``; keeps them in order."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.workers: list[StandInWorker] = []

    async def __call__(self, name: str) -> StandInWorker:
        self.workers.append(StandInWorker(name, self.release))
        return self.workers[-1]


def make_pool(start: Starter, *, restarts: int = 0, start_timeout_s: float = 300.0) -> WorkerPool:
    limits = PoolLimits(count=1, restarts_per_call=restarts, start_timeout_s=start_timeout_s)
    return WorkerPool(limits, unused_setup(), start)


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
    starts = HeldStarts()
    release, workers = starts.release, starts.workers
    pool = make_pool(starts)
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
    starts = HeldStarts()
    release, workers = starts.release, starts.workers
    pool = make_pool(starts)

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
