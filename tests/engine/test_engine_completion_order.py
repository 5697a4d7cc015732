"""A forced completion order (``FaultPlan.completion_order``): the order a client sees is the
plan's, not the machine's timing."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import FaultPlan, LoopbackEngine
from miles_verifiers_testkit.engine.ordering import CompletionGate
from tests.engine.engine_support import ServeFactory

GUARD_S = 30.0  # a broken gate fails the test instead of hanging it


async def _finish_order(gate: CompletionGate, count: int) -> list[int]:
    finished: list[int] = []

    async def call(position: int) -> None:
        await gate.wait_turn()
        finished.append(position)

    tasks = []
    for position in range(count):
        tasks.append(asyncio.create_task(call(position)))
        await asyncio.sleep(0)  # the call registers before the next one arrives
    await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
    return finished


def _gate(order: str, **knobs: float) -> CompletionGate:
    settings = {"quiet_s": 0.01, "step_s": 0.001, "max_burst": 256, **knobs}
    return CompletionGate(order, **settings)  # type: ignore[arg-type]


# The burst-order tests close their burst by its size, not by a quiet period: on a loaded
# machine a pause between two arrivals can outlast any quiet period and split the burst.
def test_a_reversed_gate_finishes_a_burst_last_arrival_first() -> None:
    gate = _gate("reversed", quiet_s=3600.0, max_burst=5)
    assert asyncio.run(_finish_order(gate, 5)) == [4, 3, 2, 1, 0]


def test_an_arrival_gate_finishes_a_burst_in_arrival_order() -> None:
    gate = _gate("arrival", quiet_s=3600.0, max_burst=5)
    assert asyncio.run(_finish_order(gate, 5)) == [0, 1, 2, 3, 4]


def test_a_quiet_period_closes_a_burst_short_of_its_bound() -> None:
    # Only the quiet period can let this call go: the burst bound is far away.
    gate = _gate("reversed", quiet_s=0.01, max_burst=256)
    assert asyncio.run(_finish_order(gate, 1)) == [0]
    assert gate.holds == 0


def test_a_free_gate_holds_nothing() -> None:
    gate = _gate("free", quiet_s=3600.0)
    assert asyncio.run(_finish_order(gate, 3)) == [0, 1, 2]
    assert gate.holds == 0


def test_a_full_burst_is_released_without_waiting_for_quiet() -> None:
    # With an hour of quiet needed, only the burst bound can let these calls go.
    finished = asyncio.run(_finish_order(_gate("reversed", quiet_s=3600.0, max_burst=3), 3))
    assert finished == [2, 1, 0]


@pytest.mark.parametrize(
    ("field", "value"),
    [("completion_order", "sideways"), ("order_quiet_s", -1.0), ("order_max_burst", 0)],
)
def test_a_bad_completion_order_setting_is_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        FaultPlan(**{field: value})  # type: ignore[arg-type]


def _post_in_turn(base_url: str, count: int, engine: LoopbackEngine) -> list[str]:
    """POST ``count`` calls, each after the engine holds the previous one (a plan whose burst
    bound is ``count``); the rids in the order the engine answered them.

    The order is read where the engine hands each answer to the HTTP layer, on its own event
    loop: the order the client threads wake up in is the machine's, not the engine's.
    """
    answered: list[str] = []
    generate = engine.generate

    async def recording(body: Any) -> Any:
        result = await generate(body)
        answered.append(result.body["meta_info"]["id"])
        return result

    engine.generate = recording  # type: ignore[method-assign]

    def post(rid: str) -> None:
        body = {"rid": rid, "input_ids": [9707, 11], "sampling_params": {"max_new_tokens": 2}}
        with httpx.Client(base_url=base_url, timeout=GUARD_S) as http:
            assert http.post("/generate", json=body).status_code == 200

    threads = []
    for position in range(count):
        thread = threading.Thread(target=post, args=(f"call-{position}",))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + GUARD_S
        # The last call completes the burst, which then goes at once: nothing to wait for.
        while position < count - 1 and engine.held_calls <= position:
            assert time.monotonic() < deadline, "the engine never held the call"
            time.sleep(0.002)
    for thread in threads:
        thread.join(GUARD_S)
    return answered


def test_the_engine_answers_a_reversed_burst_last_arrival_first(serve: ServeFactory) -> None:
    # The burst closes at its fourth call (see the gate tests above for why not by quiet).
    plan = FaultPlan(
        completion_order="reversed", order_quiet_s=3600.0, order_step_s=0.05, order_max_burst=4
    )
    with serve(faults=plan) as running:
        finished = _post_in_turn(running.base_url, 4, running.engine)
    assert finished == ["call-3", "call-2", "call-1", "call-0"]


def test_new_faults_release_the_calls_the_old_plan_held(serve: ServeFactory) -> None:
    with serve(faults=FaultPlan(completion_order="arrival", order_quiet_s=3600.0)) as running:
        threads = []
        for _ in range(2):
            thread = threading.Thread(
                target=lambda: httpx.post(
                    f"{running.base_url}/generate",
                    json={"input_ids": [9707], "sampling_params": {"max_new_tokens": 1}},
                    timeout=GUARD_S,
                )
            )
            thread.start()
            threads.append(thread)
        deadline = time.monotonic() + GUARD_S
        while running.engine.held_calls < 2:
            assert time.monotonic() < deadline, "the engine never held the calls"
            time.sleep(0.002)
        running.engine.set_faults(FaultPlan())
        for thread in threads:
            thread.join(GUARD_S)
        assert not any(thread.is_alive() for thread in threads)
        assert running.engine.held_calls == 0
