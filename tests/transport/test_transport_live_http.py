"""SGLangTransport over real sockets: a tiny starlette app on 127.0.0.1 plays the engine.

The app answers /generate the way SGLang does for a single request with return_logprob (a
stand-in where no SGLang can run); it exists to exercise the real httpx network path: pooled
connections, read timeouts and refused connections.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport import SGLangTransport

SLOW_PROMPT_TOKEN = 999_999


async def generate(request: Request) -> JSONResponse:
    payload = await request.json()
    if payload["input_ids"][0] == SLOW_PROMPT_TOKEN:
        await asyncio.sleep(1.0)
    ids = [payload["input_ids"][-1] + 1, 2]
    return JSONResponse(
        {
            "text": "",
            "output_ids": ids,
            "meta_info": {
                "id": payload["rid"],
                "finish_reason": {"type": "stop", "matched": 2},
                "prompt_tokens": len(payload["input_ids"]),
                "output_token_logprobs": [[-0.25, t, None] for t in ids],
                "completion_tokens": len(ids),
            },
        }
    )


class LiveServer:
    def __init__(self) -> None:
        app = Starlette(routes=[Route("/generate", generate, methods=["POST"])])
        self.app = app
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                return self
            threading.Event().wait(0.01)
        raise RuntimeError("the test server did not start within 5 s")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with LiveServer() as server:
        yield server


def settings(url: str, **overrides: Any) -> TransportSettings:
    values: dict[str, Any] = {"engine_url": url, "max_response_len": 16, "context_len": 1024}
    values.update(overrides)
    return TransportSettings(**values)


async def post(transport: SGLangTransport, token_ids: list[int]) -> dict[str, Any]:
    base = str(transport.base_url).removesuffix("/v1")
    response = await transport.post(
        f"{base}/inference/v1/generate",
        cast_to=httpx.Response,
        body={"token_ids": token_ids, "sampling_params": {"max_tokens": 4}},
    )
    return json.loads(response.content)


async def post_then_close(transport: SGLangTransport, token_ids: list[int]) -> dict[str, Any]:
    """One turn on a fresh transport, which is closed after it however the turn ends."""
    try:
        return await post(transport, token_ids)
    finally:
        await transport.close()


def unused_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_concurrent_turns_over_real_sockets(live: LiveServer) -> None:
    transport = SGLangTransport(settings(live.url, max_connections=4))

    async def many() -> list[dict[str, Any]]:
        try:
            return await asyncio.gather(*(post(transport, [n, n + 1]) for n in range(16)))
        finally:
            await transport.close()

    results = asyncio.run(many())
    assert [r["choices"][0]["token_ids"] for r in results] == [[n + 2, 2] for n in range(16)]


# The first loop's pooled sockets cannot be closed once that loop is gone; they are dropped
# and Python reports them when collected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_transport_survives_a_change_of_event_loop(live: LiveServer) -> None:
    # Miles may drive rollouts from more than one loop; pooled connections cannot follow.
    transport = SGLangTransport(settings(live.url))
    first = asyncio.run(post(transport, [1, 2]))
    second = asyncio.run(post(transport, [3, 4]))
    asyncio.run(transport.close())
    assert first["choices"][0]["token_ids"] == [3, 2]
    assert second["choices"][0]["token_ids"] == [5, 2]


def test_a_slow_engine_hits_the_read_timeout_once(live: LiveServer) -> None:
    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    transport = SGLangTransport(settings(live.url, timeouts={"read_s": 0.2}), sleep=no_wait)

    with pytest.raises(openai.APITimeoutError):
        asyncio.run(post_then_close(transport, [SLOW_PROMPT_TOKEN]))
    assert sleeps == []


def test_a_refused_connection_is_retried_then_a_connection_error() -> None:
    closed_port = unused_local_port()
    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    transport = SGLangTransport(
        settings(f"http://127.0.0.1:{closed_port}", timeouts={"connect_s": 2.0}), sleep=no_wait
    )

    with pytest.raises(openai.APIConnectionError) as caught:
        asyncio.run(post_then_close(transport, [1, 2]))
    assert not isinstance(caught.value, openai.APITimeoutError)
    assert sleeps == [0.5, 1.0, 2.0]


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every proxy variable points at a closed local port, and nothing is exempted."""
    proxy = f"http://127.0.0.1:{unused_local_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return proxy


def test_a_loopback_engine_is_reached_directly_despite_a_proxy_setting(
    live: LiveServer, dead_proxy: str
) -> None:
    transport = SGLangTransport(settings(live.url))

    assert asyncio.run(post_then_close(transport, [1, 2]))["choices"][0]["token_ids"] == [3, 2]


def test_a_connection_error_through_a_proxy_names_the_proxy(dead_proxy: str) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    # Not loopback, so the request goes to the (closed, local) proxy; the host is never looked up.
    transport = SGLangTransport(settings("http://engine.invalid:30000"), sleep=no_wait)

    with pytest.raises(openai.APIConnectionError) as caught:
        asyncio.run(post_then_close(transport, [1, 2]))
    assert f"through the proxy {dead_proxy}" in str(caught.value)
