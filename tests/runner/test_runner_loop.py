"""Rollout calls run like Miles': sync or async, on one persistent loop, with a time limit."""

from __future__ import annotations

import asyncio
import threading

import pytest

from miles_verifiers.trainer.background_loop import BackgroundLoop, RolloutCallTimeout
from miles_verifiers_testkit.runner.calling import call_rollout_function


def test_a_sync_function_result_is_returned_as_is():
    with BackgroundLoop() as loop:
        assert call_rollout_function(lambda x: x * 2, 21, loop, timeout=5) == 42


def test_every_async_call_runs_on_the_same_background_loop():
    seen: list[tuple[int, int]] = []

    async def fn(_: object) -> None:
        seen.append((id(asyncio.get_running_loop()), threading.get_ident()))

    with BackgroundLoop() as loop:
        call_rollout_function(fn, None, loop, timeout=5)
        call_rollout_function(fn, None, loop, timeout=5)
    assert len(set(seen)) == 1
    assert seen[0][1] != threading.get_ident()


def test_state_created_on_the_loop_survives_between_calls():
    class Stateful:
        def __init__(self) -> None:
            self.queue: asyncio.Queue[int] | None = None

        async def __call__(self, value: int) -> int:
            if self.queue is None:
                self.queue = asyncio.Queue()  # bound to the loop of the first call
            await self.queue.put(value)
            return await self.queue.get()

    fn = Stateful()
    with BackgroundLoop() as loop:
        assert [call_rollout_function(fn, v, loop, timeout=5) for v in (1, 2)] == [1, 2]


def test_a_call_past_its_timeout_is_cancelled_and_reported():
    cancelled = threading.Event()

    async def slow(_: object) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with BackgroundLoop() as loop:
        with pytest.raises(RolloutCallTimeout, match="--call-timeout"):
            call_rollout_function(slow, None, loop, timeout=0.2)
        assert cancelled.wait(5)


def test_errors_from_the_coroutine_reach_the_caller():
    async def broken(_: object) -> None:
        raise KeyError("boom")

    with BackgroundLoop() as loop, pytest.raises(KeyError):
        call_rollout_function(broken, None, loop, timeout=5)


def test_code_on_the_loop_sees_it_as_current_and_other_threads_do_not():
    async def on_loop() -> bool:
        return loop.is_current()

    with BackgroundLoop() as loop:
        assert call_rollout_function(lambda _: on_loop(), None, loop, timeout=5) is True
        assert loop.is_current() is False


def test_the_legacy_entry_point_refuses_a_call_from_its_own_loop():
    from miles_verifiers.trainer import rollout

    async def nested() -> None:
        coroutine = asyncio.sleep(0)
        rollout._run_on_legacy_loop(coroutine)

    with pytest.raises(RuntimeError, match="its own event loop"):
        rollout._run_on_legacy_loop(nested())


def test_the_test_kit_calls_rollout_functions_on_this_loop():
    from miles_verifiers_testkit.miles import MilesLoop

    loop = MilesLoop()
    try:
        assert isinstance(loop, BackgroundLoop)
    finally:
        loop.close()
