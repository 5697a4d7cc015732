"""``/abort_request`` against requests in flight under latency: partial output, HTTP 200."""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import LatencyModel, RunningEngine
from tests.engine.engine_support import (
    ServeFactory,
    assert_generate_response,
    in_background,
    wait_in_flight,
)

PROMPT = [9707, 11, 1879, 0]
SLOW = LatencyModel(decode_s_per_token=0.01)
LONG = {"ignore_eos": True, "max_new_tokens": 2000}  # 20 s unless aborted


def long_request(rid: str, **extra: Any) -> dict[str, Any]:
    return {
        "input_ids": PROMPT,
        "rid": rid,
        "sampling_params": LONG,
        "return_logprob": True,
        **extra,
    }


def abort(running: RunningEngine, **body: Any) -> None:
    with httpx.Client(base_url=running.base_url) as http:
        response = http.post("/abort_request", json=body)
    assert (response.status_code, response.content) == (200, b"")


def assert_aborted_with_partial_output(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200
    out = response.json()
    assert_generate_response(out)
    meta = out["meta_info"]
    assert meta["finish_reason"] == {
        "type": "abort",
        "message": "Aborted",
        "status_code": None,
        "err_type": None,
    }
    assert 0 < len(out["output_ids"]) < LONG["max_new_tokens"]
    assert len(meta["output_token_logprobs"]) == len(out["output_ids"]) == meta["completion_tokens"]
    assert meta["prompt_tokens"] == len(PROMPT)
    return out


def test_aborting_a_running_request_by_rid_returns_its_partial_output(serve: ServeFactory) -> None:
    with serve(latency=SLOW) as running:
        thread, answers = in_background(running.base_url, long_request("job-1"))
        wait_in_flight(running)
        time.sleep(0.2)  # let some tokens through, so the partial output is not empty
        abort(running, rid="job-1")
        thread.join(10)
    assert not thread.is_alive()
    assert_aborted_with_partial_output(answers[0])


def test_an_abort_by_rid_reaches_every_request_whose_rid_starts_with_it(
    serve: ServeFactory,
) -> None:
    with serve(latency=SLOW) as running:
        jobs = [
            in_background(running.base_url, long_request(rid)) for rid in ("grp", "grp-b", "other")
        ]
        wait_in_flight(running, 3)
        time.sleep(0.2)
        abort(running, rid="grp")
        for thread, _ in jobs[:2]:
            thread.join(10)
        other_still_running = jobs[2][0].is_alive()
        abort(running, abort_all=True)
        jobs[2][0].join(10)
    for _, answers in jobs[:2]:
        assert_aborted_with_partial_output(answers[0])
    assert other_still_running


def test_an_abort_rid_no_request_has_exactly_is_ignored(serve: ServeFactory) -> None:
    # SGLang's tokenizer drops an abort whose rid it does not hold; a batch holds "b_0", "b_1".
    body = {"input_ids": [PROMPT, PROMPT], "rid": "b", "sampling_params": LONG}
    with serve(latency=SLOW) as running:
        thread, answers = in_background(running.base_url, body)
        wait_in_flight(running, 2)
        abort(running, rid="b")
        time.sleep(0.2)
        still_running = running.engine.in_flight_rids()
        abort(running, rid="b_1")
        time.sleep(0.2)
        after_exact_abort = running.engine.in_flight_rids()
        abort(running, abort_all=True)
        thread.join(10)
    assert sorted(still_running) == ["b_0", "b_1"]
    assert after_exact_abort == ["b_0"]
    assert [item["meta_info"]["id"] for item in answers[0].json()] == ["b_0", "b_1"]


def test_abort_all_aborts_every_request_in_flight(serve: ServeFactory) -> None:
    with serve(latency=SLOW) as running:
        jobs = [in_background(running.base_url, long_request(f"r{i}")) for i in range(3)]
        wait_in_flight(running, 3)
        time.sleep(0.2)
        abort(running, abort_all=True)
        for thread, _ in jobs:
            thread.join(10)
    for _, answers in jobs:
        assert_aborted_with_partial_output(answers[0])


def test_a_batch_aborted_mid_flight_answers_every_item(serve: ServeFactory) -> None:
    body = {"input_ids": [PROMPT, PROMPT], "rid": "batch", "sampling_params": LONG}
    with serve(latency=SLOW) as running:
        thread, answers = in_background(running.base_url, body)
        wait_in_flight(running, 2)
        time.sleep(0.2)
        abort(running, abort_all=True)
        thread.join(10)
    items = answers[0].json()
    assert [item["meta_info"]["id"] for item in items] == ["batch_0", "batch_1"]
    assert all(item["meta_info"]["finish_reason"]["type"] == "abort" for item in items)


def test_a_request_waiting_for_a_slot_is_aborted_from_the_queue(serve: ServeFactory) -> None:
    with serve(latency=LatencyModel(decode_s_per_token=0.01, max_running_requests=1)) as running:
        first = in_background(running.base_url, long_request("running"))
        wait_in_flight(running, 1)
        second = in_background(running.base_url, long_request("queued"))
        wait_in_flight(running, 2)
        abort(running, rid="queued")
        second[0].join(10)
        abort(running, rid="running")
        first[0].join(10)
    queued = second[1][0].json()
    assert_generate_response(queued)
    meta = queued["meta_info"]
    assert second[1][0].status_code == 200
    assert meta["finish_reason"] == {"type": "abort", "message": "Abort in waiting queue"}
    assert "prompt_tokens" not in meta and "cached_tokens" not in meta
    assert (queued["output_ids"], queued["text"], meta["completion_tokens"]) == ([], "", 0)
    assert meta["output_token_logprobs"] == []
    assert first[1][0].json()["meta_info"]["finish_reason"]["type"] == "abort"


def test_a_rid_already_in_flight_is_refused(serve: ServeFactory) -> None:
    with serve(latency=SLOW) as running:
        thread, _ = in_background(running.base_url, long_request("dup"))
        wait_in_flight(running)
        with httpx.Client(base_url=running.base_url) as http:
            response = http.post("/generate", json=long_request("dup"))
        abort(running, abort_all=True)
        thread.join(10)
    assert response.status_code == 400
    assert "dup" in response.json()["error"]["message"]


def test_aborting_from_another_thread_reaches_the_engine(serve: ServeFactory) -> None:
    with serve(latency=SLOW) as running:
        thread, answers = in_background(running.base_url, long_request("t"))
        wait_in_flight(running)
        time.sleep(0.2)
        running.engine.abort_threadsafe(abort_all=True)
        thread.join(10)
    assert_aborted_with_partial_output(answers[0])


def test_an_abort_before_the_request_reaches_the_scheduler_is_lost_and_not_resent(
    serve: ServeFactory,
) -> None:
    # As in SGLang: the front end forwards the abort to a scheduler that does not hold the
    # request yet (so nothing happens), and marks it sent, so a later abort is a no-op.
    short = {"ignore_eos": True, "max_new_tokens": 30}
    with serve(latency=SLOW, scheduling_delay_s=1.0) as running:
        body = {"input_ids": PROMPT, "rid": "early-1", "sampling_params": short}
        thread, answers = in_background(running.base_url, body)
        wait_in_flight(running)
        abort(running, rid="early-1")  # still being handed over: lost
        for _ in range(500):
            if running.engine._flights["early-1"].scheduled:
                break
            time.sleep(0.01)
        abort(running, rid="early-1")  # a repeat: ignored
        thread.join(timeout=30)
    (response,) = answers
    assert response.json()["meta_info"]["finish_reason"] == {"type": "length", "length": 30}


def test_a_client_that_hangs_up_has_its_request_aborted(serve: ServeFactory) -> None:
    with serve(latency=SLOW) as running:
        with (
            httpx.Client(base_url=running.base_url, timeout=httpx.Timeout(30.0, read=0.3)) as http,
            contextlib.suppress(httpx.ReadTimeout),
        ):
            http.post("/generate", json=long_request("gone-1"))  # gives up, closes the socket
        for _ in range(1000):
            if not running.engine.in_flight_rids():
                break
            time.sleep(0.01)
        assert running.engine.in_flight_rids() == []
        assert running.engine.stats().aborted_items == 1


def test_a_client_that_hangs_up_before_its_body_arrives_is_let_go_quietly(
    serve: ServeFactory, capfd: pytest.CaptureFixture[str]
) -> None:
    with serve() as running:
        url = httpx.URL(running.base_url)
        with socket.create_connection((url.host, url.port), timeout=10) as raw:
            raw.sendall(
                b"POST /generate HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"input_ids": ['
            )
        with httpx.Client(base_url=running.base_url) as http:  # still serving
            assert http.get("/health").status_code == 200
        time.sleep(0.2)  # the server notices the hang-up
    assert "Traceback" not in capfd.readouterr().err
