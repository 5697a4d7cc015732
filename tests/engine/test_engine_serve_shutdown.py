"""``miles-verifiers engine serve`` stops cleanly on Ctrl-C or SIGTERM, as SGLang does.

On shutdown SGLang ends each request it still holds with an ``abort`` finish: HTTP 200, with
the partial output of one that was generating. Two requests are in flight when the signal
comes: one decoding (paced by ``--decode-s-per-token``) and one still held before the
scheduler by a long delay fault (``--fault-delay``). The command runs as a real subprocess
here, since the signal is sent to it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from miles_verifiers_testkit.loopback_http import client
from miles_verifiers_testkit.tokenizers import offline_environ

MAX_NEW_TOKENS = 5000
# Fault draws come in arrival order from --fault-seed; with this seed and a delay chance of
# one half, the first call is served at once and the second is held (for ten minutes).
FAULT_FLAGS = ["--fault-delay", "0.5", "--fault-delay-s", "600", "--fault-seed", "10"]


def _body(rid: str) -> dict[str, object]:
    return {
        "rid": rid,
        "input_ids": [9707, 11],
        "sampling_params": {"ignore_eos": True, "max_new_tokens": MAX_NEW_TOKENS},
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until(check: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
    # A guard against hanging, not a speed check: a loaded machine starts the engine slowly.
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.05)


def _answers(url: str, path: str) -> bool:
    try:
        with client(url, timeout=2.0) as http:
            return http.get(url + path).status_code == 200
    except httpx.HTTPError:
        return False


def _engine_state(url: str) -> tuple[int, int]:
    """Requests the engine is running, and calls it has held with a delay fault."""
    info = httpx.get(url + "/server_info", timeout=2.0).json()
    in_flight = int(info["internal_states"][0]["num_inflight_reqs"])
    return in_flight, int(info["loopback_engine"]["stats"]["faults"]["delay"])


@dataclass
class Stopped:
    returncode: int
    stderr: str
    answers: dict[str, httpx.Response | BaseException]


def _stop_with_requests_in_flight(signum: signal.Signals) -> Stopped:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **offline_environ(), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "miles_verifiers.cli.main", "engine", "serve", "--port", str(port),
         "--decode-s-per-token", "0.02", *FAULT_FLAGS, "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    answers: dict[str, httpx.Response | BaseException] = {}

    def send(rid: str) -> None:
        try:
            answers[rid] = httpx.post(url + "/generate", json=_body(rid), timeout=60.0)
        except httpx.HTTPError as error:
            answers[rid] = error

    senders = {rid: threading.Thread(target=send, args=(rid,)) for rid in ("decoding", "held")}
    try:
        _wait_until(lambda: process.poll() is not None or _answers(url, "/health"), "start")
        assert process.poll() is None, process.communicate(timeout=30)[1]
        senders["decoding"].start()
        _wait_until(lambda: _engine_state(url) == (1, 0), "the first request decoding")
        senders["held"].start()
        _wait_until(lambda: _engine_state(url) == (1, 1), "the second request being held")
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    for sender in senders.values():
        if sender.ident is not None:  # started
            sender.join(60)
    return Stopped(process.returncode, stderr, answers)


@pytest.fixture(scope="module", params=[signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def stopped(request: pytest.FixtureRequest, offline_tokenizers: None) -> Stopped:
    return _stop_with_requests_in_flight(request.param)


def _finish(stopped: Stopped, rid: str) -> dict[str, object]:
    answer = stopped.answers.get(rid)
    assert isinstance(answer, httpx.Response) and answer.status_code == 200, answer
    return answer.json()


def test_the_engine_stops_without_a_traceback_and_exits_0(stopped: Stopped) -> None:
    assert "Traceback" not in stopped.stderr
    assert "loopback engine stopped" in stopped.stderr
    assert stopped.returncode == 0, stopped.stderr


def test_a_decoding_request_ends_with_an_abort_and_its_partial_output(stopped: Stopped) -> None:
    body = _finish(stopped, "decoding")
    assert body["meta_info"]["finish_reason"]["type"] == "abort"  # type: ignore[index]
    assert len(body["output_ids"]) < MAX_NEW_TOKENS  # type: ignore[arg-type]


def test_a_request_held_before_the_scheduler_ends_with_an_abort(stopped: Stopped) -> None:
    body = _finish(stopped, "held")
    assert body["meta_info"]["finish_reason"]["type"] == "abort"  # type: ignore[index]
    assert body["output_ids"] == []
