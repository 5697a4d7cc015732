"""The test kit's loopback clients go direct, whatever proxy the environment names.

A proxy named by ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` cannot reach this machine's
loopback; the kit's own clients bypass it as the adapter's transport does, and a failure that
did go through a proxy names it.
"""

from __future__ import annotations

import pytest

from miles_verifiers_testkit.engine import EngineConfig, LoopbackEngine, ModelProfile
from miles_verifiers_testkit.engine.topology import TopologyUnavailable, serve_topology
from miles_verifiers_testkit.loopback_http import client, describe_failure
from tests.dead_proxy import set_dead_proxy
from tests.engine.engine_support import QWEN, ServeFactory

BODY = {"input_ids": [9707, 11], "sampling_params": {"max_new_tokens": 4}}


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    return set_dead_proxy(monkeypatch)


def _workers(qwen: ModelProfile, count: int) -> list[LoopbackEngine]:
    config = EngineConfig(model=QWEN, router=False)
    return [LoopbackEngine(config, model=qwen) for _ in range(count)]


def test_the_engine_starts_behind_a_dead_proxy(serve: ServeFactory, dead_proxy: str) -> None:
    # serve_engine's readiness probe asks /health; through the proxy it would be refused.
    with serve() as running, client(running.base_url, timeout=10) as http:
        assert http.get(f"{running.base_url}/health").status_code == 200


def test_the_pass_through_proxy_forwards_to_its_workers_behind_a_dead_proxy(
    qwen: ModelProfile, dead_proxy: str
) -> None:
    with (
        serve_topology("pass-through", _workers(qwen, 2)) as topology,
        client(topology.url, timeout=10) as http,
    ):
        answers = [http.get(f"{topology.url}/model_info") for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]


def test_the_sglang_router_reaches_its_workers_behind_a_dead_proxy(
    qwen: ModelProfile, dead_proxy: str
) -> None:
    try:
        topology_context = serve_topology("sglang-router", _workers(qwen, 2), startup_timeout=30)
        with topology_context as topology, client(topology.url, timeout=10) as http:
            answer = http.post(f"{topology.url}/generate", json=BODY)
    except TopologyUnavailable as unavailable:
        if "not installed" in str(unavailable):
            pytest.skip(str(unavailable))
        raise
    assert answer.status_code == 200


def test_a_failure_through_a_proxy_names_the_proxy() -> None:
    environ = {"HTTP_PROXY": "http://user:secret@127.0.0.1:9"}
    text = describe_failure(ConnectionRefusedError("refused"), "http://engine.invalid/x", environ)
    assert text.startswith("ConnectionRefusedError: refused")
    assert "through the proxy http://127.0.0.1:9" in text
    assert "secret" not in text


def test_a_failure_on_loopback_names_no_proxy() -> None:
    environ = {"HTTP_PROXY": "http://127.0.0.1:9"}
    text = describe_failure(ConnectionRefusedError("refused"), "http://127.0.0.1:30000/", environ)
    assert text == "ConnectionRefusedError: refused"
