"""The virtual clock the pacing tests hand the engine: time moves only when it is waited on."""

from __future__ import annotations

import asyncio

import pytest

from miles_verifiers_testkit.engine import VirtualClock


def test_a_virtual_clock_moves_by_exactly_the_time_waited() -> None:
    clock = VirtualClock()
    asyncio.run(clock.wait(None, 0.25))
    asyncio.run(clock.wait(None, 0.5))
    assert clock.now() == 0.75
    assert clock.waits == [0.25, 0.5]


def test_a_virtual_clock_with_early_s_ends_longer_waits_that_much_short() -> None:
    clock = VirtualClock(early_s=0.05)
    asyncio.run(clock.wait(None, 0.4))
    assert clock.now() == pytest.approx(0.35)
    asyncio.run(clock.wait(None, 0.05))  # no longer than early_s: waited in full
    assert clock.now() == pytest.approx(0.4)


def test_a_wait_whose_wakeup_is_already_done_does_not_move_the_clock() -> None:
    async def woken() -> None:
        wakeup = asyncio.get_running_loop().create_future()
        wakeup.set_result(None)
        await clock.wait(wakeup, 10.0)

    clock = VirtualClock()
    asyncio.run(woken())
    assert clock.now() == 0.0


def test_a_virtual_clock_polled_without_waiting_fails_instead_of_spinning() -> None:
    clock = VirtualClock(max_reads=3)
    for _ in range(3):
        clock.now()
    with pytest.raises(RuntimeError, match="without waiting"):
        clock.now()
