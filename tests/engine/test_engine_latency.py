"""The latency model and the continuous-batch capacity.

Pacing is checked on a virtual clock the engine is given: time moves only when the engine
waits, so the time between two readings is what it waited, with no sleeping and no wall
clock (speed is for benchmarks). Its waits end early, as event-loop timers may, so the engine
must pace to a deadline rather than trust one wait.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import LatencyModel, VirtualClock
from tests.engine.engine_support import ServeFactory, in_background, wait_in_flight

PROMPT = [9707, 11, 1879, 0]


def _generate(http: httpx.Client, clock: VirtualClock, body: dict[str, Any]) -> tuple[Any, float]:
    """The answer to ``body`` and the time the engine waited before giving it."""
    before = clock.now()
    answer = http.post("/generate", json=body).json()
    return answer, clock.now() - before


def test_decode_latency_paces_every_generated_token(
    serve: ServeFactory, early_clock: VirtualClock
) -> None:
    body = {"input_ids": PROMPT, "sampling_params": {"ignore_eos": True, "max_new_tokens": 40}}
    with (
        serve(latency=LatencyModel(decode_s_per_token=0.01), clock=early_clock) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        out, waited = _generate(http, early_clock, body)
    assert out["meta_info"]["completion_tokens"] == 40
    assert waited == pytest.approx(40 * 0.01)
    assert out["meta_info"]["e2e_latency"] == pytest.approx(waited)


def test_prefill_latency_is_charged_for_uncached_prompt_tokens(
    serve: ServeFactory, early_clock: VirtualClock
) -> None:
    body = {"input_ids": [9707] * 400, "sampling_params": {"max_new_tokens": 1}}
    with (
        serve(latency=LatencyModel(prefill_s_per_token=0.001), clock=early_clock) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        _, first_waited = _generate(http, early_clock, body)
        second, second_waited = _generate(http, early_clock, body)
    assert first_waited == pytest.approx(400 * 0.001)
    assert second["meta_info"]["cached_tokens"] == 399
    assert second_waited == pytest.approx(1 * 0.001)


def test_latency_can_be_changed_while_serving(
    serve: ServeFactory, early_clock: VirtualClock
) -> None:
    body = {"input_ids": PROMPT, "sampling_params": {"ignore_eos": True, "max_new_tokens": 30}}
    with (
        serve(clock=early_clock) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        _, unpaced = _generate(http, early_clock, body)
        running.engine.set_latency(LatencyModel(decode_s_per_token=0.01))
        _, paced = _generate(http, early_clock, body)
        running.engine.set_latency(LatencyModel())
    assert (unpaced, paced) == (0.0, pytest.approx(30 * 0.01))
    assert running.engine.latency == LatencyModel()


def test_no_more_than_max_running_requests_decode_at_once(serve: ServeFactory) -> None:
    latency = LatencyModel(decode_s_per_token=0.01, max_running_requests=2)
    body = {"input_ids": PROMPT, "sampling_params": {"ignore_eos": True, "max_new_tokens": 2000}}
    with serve(latency=latency) as running:
        jobs = [in_background(running.base_url, body) for _ in range(5)]
        wait_in_flight(running, 5)
        running_now = running.engine.running
        running.engine.abort_threadsafe(abort_all=True)
        for thread, _ in jobs:
            thread.join(10)
        stats = running.engine.stats()
    assert running_now == 2 and stats.peak_running == 2
    assert all(answers[0].status_code == 200 for _, answers in jobs)
    assert stats.items == 5


def test_raising_the_capacity_admits_waiting_requests(serve: ServeFactory) -> None:
    body = {"input_ids": PROMPT, "sampling_params": {"ignore_eos": True, "max_new_tokens": 2000}}
    with serve(latency=LatencyModel(decode_s_per_token=0.01, max_running_requests=1)) as running:
        jobs = [in_background(running.base_url, body) for _ in range(3)]
        wait_in_flight(running, 3)
        assert running.engine.running == 1
        running.engine.set_latency(LatencyModel(decode_s_per_token=0.01, max_running_requests=3))
        deadline = time.monotonic() + 5
        while running.engine.running < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        admitted = running.engine.running
        running.engine.abort_threadsafe(abort_all=True)
        for thread, _ in jobs:
            thread.join(10)
    assert admitted == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prefill_s_per_token": -1.0},
        {"decode_s_per_token": float("nan")},
        {"max_running_requests": -1},
    ],
)
def test_a_latency_model_refuses_impossible_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LatencyModel(**kwargs)  # type: ignore[arg-type]
