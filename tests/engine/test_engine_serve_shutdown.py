"""``miles-verifiers engine serve`` stops cleanly on Ctrl-C, as SGLang does.

On shutdown SGLang ends each running request with an ``abort`` finish: HTTP 200 with the
partial output. The command runs as a real subprocess here, since Ctrl-C is a signal to it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import httpx
import pytest
from miles_verifiers_testkit.tokenizers import offline_environ

SLOW_BODY = {
    "input_ids": [9707, 11],
    "sampling_params": {"ignore_eos": True, "max_new_tokens": 5000},
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until(check: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.05)


def _answers(url: str, path: str) -> bool:
    try:
        return httpx.get(url + path, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _in_flight(url: str) -> int:
    info = httpx.get(url + "/server_info", timeout=2.0).json()
    return int(info["internal_states"][0]["num_inflight_reqs"])


@dataclass
class Stopped:
    returncode: int
    stderr: str
    answer: httpx.Response | None


@pytest.fixture(scope="module")
def stopped_with_a_request_in_flight(offline_tokenizers: None) -> Stopped:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **offline_environ(), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "miles_verifiers._cli", "engine", "serve", "--port", str(port),
         "--decode-s-per-token", "0.01", "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    answers: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: answers.append(httpx.post(url + "/generate", json=SLOW_BODY, timeout=60.0))
    )
    try:
        _wait_until(lambda: process.poll() is not None or _answers(url, "/health"), "start")
        assert process.poll() is None, process.communicate(timeout=30)[1]
        sender.start()
        _wait_until(lambda: _in_flight(url) == 1, "the request reaching the engine")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    sender.join(60)
    return Stopped(process.returncode, stderr, answers[0] if answers else None)


def test_ctrl_c_stops_the_engine_without_a_traceback(stopped_with_a_request_in_flight):
    assert "Traceback" not in stopped_with_a_request_in_flight.stderr
    assert stopped_with_a_request_in_flight.returncode in (0, 130)


def test_a_request_in_flight_at_ctrl_c_ends_with_an_abort_and_its_partial_output(
    stopped_with_a_request_in_flight,
):
    answer = stopped_with_a_request_in_flight.answer
    assert answer is not None and answer.status_code == 200, answer
    body = answer.json()
    assert body["meta_info"]["finish_reason"]["type"] == "abort"
    assert len(body["output_ids"]) < SLOW_BODY["sampling_params"]["max_new_tokens"]
