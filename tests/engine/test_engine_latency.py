"""The latency model and the continuous-batch capacity.

Pacing is checked through the engine's own reported ``e2e_latency`` under a timer that fires
early (as event-loop timers may), never against the wall clock: speed is for benchmarks.
"""

from __future__ import annotations

import time

import httpx
import pytest

from miles_verifiers_testkit.engine import LatencyModel
from tests.engine.engine_support import ServeFactory, in_background, wait_in_flight

PROMPT = [9707, 11, 1879, 0]


def test_decode_latency_paces_every_generated_token(serve: ServeFactory, early_timer: None) -> None:
    with (
        serve(latency=LatencyModel(decode_s_per_token=0.01)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        out = http.post(
            "/generate",
            json={
                "input_ids": PROMPT,
                "sampling_params": {"ignore_eos": True, "max_new_tokens": 40},
            },
        ).json()
    assert out["meta_info"]["completion_tokens"] == 40
    assert out["meta_info"]["e2e_latency"] >= 40 * 0.01


def test_prefill_latency_is_charged_for_uncached_prompt_tokens(
    serve: ServeFactory, early_timer: None
) -> None:
    prompt = [9707] * 400
    with (
        serve(latency=LatencyModel(prefill_s_per_token=0.001)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        first = http.post(
            "/generate", json={"input_ids": prompt, "sampling_params": {"max_new_tokens": 1}}
        ).json()
        second = http.post(
            "/generate", json={"input_ids": prompt, "sampling_params": {"max_new_tokens": 1}}
        ).json()
    assert first["meta_info"]["e2e_latency"] >= 0.4
    assert second["meta_info"]["cached_tokens"] == 399


def test_latency_can_be_changed_while_serving(serve: ServeFactory, early_timer: None) -> None:
    with serve() as running, httpx.Client(base_url=running.base_url) as http:
        running.engine.set_latency(LatencyModel(decode_s_per_token=0.01))
        out = http.post(
            "/generate",
            json={
                "input_ids": PROMPT,
                "sampling_params": {"ignore_eos": True, "max_new_tokens": 30},
            },
        ).json()
        running.engine.set_latency(LatencyModel())
    assert out["meta_info"]["e2e_latency"] >= 0.3
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
