"""The fixture harness's clients reach loopback directly, whatever proxy the environment
names, and a model call that did go through a proxy and failed names it."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
import verifiers.v1 as vf
from mv_tools.calculator import Calculator

from miles_verifiers_testkit.harness.agent import model_failure
from miles_verifiers_testkit.harness.clients import ModelClients
from miles_verifiers_testkit.harness.tools import open_toolbox
from tests.dead_proxy import set_dead_proxy
from tests.fixtures_env.fixture_env_support import ToolsetServer

pytestmark = pytest.mark.anyio


class _ModelList(BaseHTTPRequestHandler):
    """An OpenAI-style ``GET /v1/models`` with no models: enough for a client to get through."""

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def models_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ModelList)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
async def calculator_url() -> AsyncIterator[str]:
    async with ToolsetServer(Calculator(vf.ToolsetConfig())) as server:
        yield server.url


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    return set_dead_proxy(monkeypatch)


def _clients() -> ModelClients:
    return ModelClients(timeout_s=10)


async def test_a_model_client_reaches_a_loopback_endpoint_behind_a_dead_proxy(
    models_endpoint: str, dead_proxy: str
) -> None:
    async with _clients().lease(models_endpoint, "secret") as model:
        listed = await model.client.models.list()
    assert listed.data == []


async def test_the_toolbox_reaches_a_loopback_tool_server_behind_a_dead_proxy(
    calculator_url: str, dead_proxy: str
) -> None:
    async with AsyncExitStack() as stack:
        toolbox = await open_toolbox(stack, {"calculator": calculator_url}, timeout_s=30)
        assert await toolbox.call("calculator_add", json.dumps({"a": 2, "b": 3})) == "5"


async def test_a_model_call_that_failed_at_the_proxy_names_the_proxy(dead_proxy: str) -> None:
    # Not loopback, so the call goes to the (closed, local) proxy; the host is never looked up.
    async with _clients().lease("http://interception.invalid:8000/v1", "secret") as model:
        with pytest.raises(openai.APIConnectionError) as caught:
            await model.complete(model="m", messages=[{"role": "user", "content": "hi"}])
        text = model_failure(caught.value, model)
    assert text.startswith("ConnectError")
    assert f"through the proxy {dead_proxy}" in text
