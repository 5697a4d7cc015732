"""The transport in every deployment production Miles runs: behind the real Rust sglang-router,
behind a raw pass-through proxy (Miles' own router), and against a bare worker reached directly;
each under the 0.5.16 fork production Miles runs and under upstream 0.5.23.

Where the router binary cannot start, its cases skip with the reason (never pass).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from verifiers.v1.clients.train import TrainClient
from verifiers.v1.dialects import ChatDialect
from verifiers.v1.errors import OverlongPromptError, ProviderError
from verifiers.v1.types import Response, SamplingConfig

from miles_verifiers.engine.routers import RouterKind
from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers_testkit.engine import EngineConfig, LatencyModel, LoopbackEngine
from miles_verifiers_testkit.engine import topology as topology_module
from miles_verifiers_testkit.engine.model import load_model_profile
from miles_verifiers_testkit.engine.topology import (
    TOPOLOGIES,
    RunningTopology,
    TopologyUnavailable,
    serve_topology,
)
from tests.transport.abort_support import abort_mid_turn

MODEL = "Qwen/Qwen3-0.6B"
CONTEXT_LEN = 512
VERSIONS = ("0.5.16-fork", "0.5.23")
ROUTER_OF = {
    "direct": RouterKind.PASS_THROUGH,
    "pass-through": RouterKind.PASS_THROUGH,
    "sglang-router": RouterKind.SGLANG_ROUTER,
}


class SeenEngine(LoopbackEngine):
    """A loopback worker keeping the sampling params of every /generate it received."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[dict[str, Any]] = []

    async def generate(self, body: Any) -> Any:
        try:
            self.seen.append(json.loads(body).get("sampling_params") or {})
        except (ValueError, TypeError, AttributeError):
            pass
        return await super().generate(body)


@pytest.fixture(scope="module")
def profile(offline_tokenizers: None) -> Any:
    return load_model_profile(MODEL, CONTEXT_LEN)


@pytest.fixture(scope="module", params=[(t, v) for t in TOPOLOGIES for v in VERSIONS], ids=str)
def topology(request: pytest.FixtureRequest, profile: Any) -> Iterator[RunningTopology]:
    name, version = request.param
    count = 1 if name == "direct" else 2
    config = EngineConfig(
        model=MODEL, context_length=CONTEXT_LEN, sglang_version=version, router=False
    )
    engines = [SeenEngine(config, model=profile) for _ in range(count)]
    try:
        with serve_topology(name, engines) as running:
            yield running
    except TopologyUnavailable as exc:
        pytest.skip(f"{name} topology unavailable here: {exc}")


@pytest.fixture(scope="module")
def renderer_pool(offline_tokenizers: None) -> Any:
    from renderers import create_renderer_pool

    return create_renderer_pool(MODEL, None, size=1)


def client_for(
    topology: RunningTopology, renderer_pool: Any, **overrides: Any
) -> tuple[TrainClient, SGLangTransport]:
    values: dict[str, Any] = {
        "engine_url": topology.url,
        "max_response_len": 64,
        "context_len": CONTEXT_LEN,
        "served_model_names": (MODEL,),
        "router": ROUTER_OF[topology.name],
        "probe_engine_limits": True,
        "retry": {"max_retries": 1, "initial_backoff_s": 0.0, "max_backoff_s": 0.0},
    }
    values.update(overrides)
    transport = SGLangTransport(TransportSettings(**values))
    client = TrainClient(transport, renderer_model_name=MODEL)  # type: ignore[arg-type]
    client._pool = renderer_pool
    return client, transport


async def respond(client: TrainClient, **sampling: Any) -> Response:
    config = SamplingConfig(temperature=1.0, max_tokens=32, **sampling)
    body = {"messages": [{"role": "user", "content": "What is 3 + 4?"}]}
    return await client.get_response(ChatDialect(), body, MODEL, config, session_id="a" * 32)


async def ask(client: TrainClient, **sampling: Any) -> Response:
    """One turn, then the client closed (as a caller done with it would)."""
    try:
        return await respond(client, **sampling)
    finally:
        await client.close()


def probing_transport(topology: RunningTopology, **settings: Any) -> SGLangTransport:
    """A bare transport to the topology that reads the workers' limits from them."""
    return SGLangTransport(
        TransportSettings(
            engine_url=topology.url,
            max_response_len=64,
            probe_engine_limits=True,
            router=ROUTER_OF[topology.name],
            **settings,
        )
    )


async def generate_then_close(transport: SGLangTransport, url: str, token_ids: list[int]) -> Any:
    """One /generate through the transport, which is closed after it however it ends."""
    try:
        return await transport.post(
            f"{url}/inference/v1/generate",
            body={"token_ids": token_ids, "sampling_params": {}},
        )
    finally:
        await transport.close()


def test_a_turn_is_served(topology: RunningTopology, renderer_pool: Any) -> None:
    client, _ = client_for(topology, renderer_pool)
    response = asyncio.run(ask(client, top_k=20, min_tokens=1, seed=3))
    assert response.tokens is not None and response.tokens.completion_ids


def test_an_abort_sweep_leaves_nothing_running(
    topology: RunningTopology, renderer_pool: Any
) -> None:
    # Every turn holds the engine until aborted: the fixture model answers this prompt in 8
    # tokens, which at 50 ms a token could finish before the sweep reached a busy engine.
    for running in topology.engines:
        running.engine.set_latency(LatencyModel(decode_s_per_token=5.0))
    client, transport = client_for(topology, renderer_pool)
    try:
        check_abort_sweep(topology, client, transport)
    finally:
        for running in topology.engines:
            running.engine.set_latency(LatencyModel())


def check_abort_sweep(
    topology: RunningTopology, client: TrainClient, transport: SGLangTransport
) -> None:
    error, report = asyncio.run(
        abort_mid_turn(
            client, transport, respond(client), topology.in_flight_rids, turn_timeout_s=20
        )
    )
    assert report.ok, report.failures
    assert isinstance(error, ProviderError) and "aborted" in str(error)
    assert topology.in_flight_rids() == []


def test_a_prompt_three_tokens_short_of_the_context_ends_as_context_length(
    topology: RunningTopology,
) -> None:
    transport = probing_transport(topology, context_len=CONTEXT_LEN)
    with pytest.raises(OverlongPromptError):
        asyncio.run(generate_then_close(transport, topology.url, [9707] * (CONTEXT_LEN - 3)))


def test_logit_bias_reaches_the_engine_only_without_the_rust_router(
    topology: RunningTopology, renderer_pool: Any
) -> None:
    engines = [running.engine for running in topology.engines]
    for engine in engines:
        engine.seen.clear()  # type: ignore[attr-defined]
    client, _ = client_for(topology, renderer_pool)
    asyncio.run(ask(client, logit_bias={"9707": -1.0}))
    (params,) = [p for engine in engines for p in engine.seen]  # type: ignore[attr-defined]
    # The Rust router re-serialises /generate into its typed struct, which has no logit_bias.
    assert ("logit_bias" in params) is (topology.name != "sglang-router")


def test_every_turn_of_a_session_reaches_one_worker_under_the_manual_policy(
    profile: Any,
) -> None:
    # The key-based router policy Miles picks with --use-session-server (sglang-router 0.3.2
    # has no consistent_hashing): the transport sends the session id as the routing key.
    config = EngineConfig(model=MODEL, context_length=CONTEXT_LEN, router=False)
    engines = [SeenEngine(config, model=profile) for _ in range(2)]
    try:
        manager = serve_topology("sglang-router", engines, policy="manual")
        running = manager.__enter__()
    except TopologyUnavailable as exc:
        pytest.skip(f"sglang-router topology unavailable here: {exc}")
    try:
        transport = SGLangTransport(
            TransportSettings(
                engine_url=running.url,
                max_response_len=8,
                routing="manual",
                router=RouterKind.SGLANG_ROUTER,
            )
        )

        async def turns() -> None:
            try:
                for session in ("s" * 32, "t" * 32):
                    for turn in range(3):
                        await transport.post(
                            f"{running.url}/inference/v1/generate",
                            body={"token_ids": [9707, turn + 1], "sampling_params": {}},
                            options={"headers": {"X-Session-ID": session}},
                        )
            finally:
                await transport.close()

        asyncio.run(turns())
    finally:
        manager.__exit__(None, None, None)
    per_worker = [len(engine.seen) for engine in engines]
    assert sum(per_worker) == 6
    assert all(count % 3 == 0 for count in per_worker), per_worker


def test_max_new_tokens_is_clamped_to_what_the_workers_will_generate(
    topology: RunningTopology,
) -> None:
    # The Rust router does not report the workers' limits itself; they are read from them.
    prompt_len = CONTEXT_LEN - 20
    for running in topology.engines:
        running.engine.seen.clear()  # type: ignore[attr-defined]
    transport = probing_transport(topology)
    asyncio.run(generate_then_close(transport, topology.url, [9707] * prompt_len))
    (params,) = [p for r in topology.engines for p in r.engine.seen]  # type: ignore[attr-defined]
    # SGLang generates at most max_req_len - prompt - 1 = (context - 1) - prompt - 1 tokens.
    assert params["max_new_tokens"] == CONTEXT_LEN - 1 - prompt_len - 1


def test_two_rust_routers_run_side_by_side_on_one_machine(profile: Any) -> None:
    # Two test runs (or a run beside a real job) each start a router; neither may block the
    # other through a listener of its own, such as the metrics exporter.
    config = EngineConfig(model=MODEL, context_length=CONTEXT_LEN, router=False)
    try:
        with (
            serve_topology("sglang-router", [SeenEngine(config, model=profile)]) as first,
            serve_topology("sglang-router", [SeenEngine(config, model=profile)]) as second,
        ):
            assert first.url != second.url
    except TopologyUnavailable as exc:
        if "Address already in use" in str(exc):
            raise
        pytest.skip(f"sglang-router unavailable here: {exc}")


@pytest.mark.parametrize("taken", ["port", "metrics port"])
def test_a_router_whose_port_is_taken_before_it_starts_starts_again_on_new_ports(
    profile: Any, renderer_pool: Any, monkeypatch: pytest.MonkeyPatch, taken: str
) -> None:
    # Its ports are chosen free, then bound by the router's own process: another test worker
    # (or anything on the machine) may take one in between.
    real_free_port = topology_module._free_port
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        # The first start gets the held port first (its router port) or second (its metrics
        # port); every later choice is really free.
        choices = iter([held] if taken == "port" else [real_free_port(), held])
        monkeypatch.setattr(
            topology_module, "_free_port", lambda: next(choices, None) or real_free_port()
        )
        config = EngineConfig(model=MODEL, context_length=CONTEXT_LEN, router=False)
        try:
            with serve_topology("sglang-router", [SeenEngine(config, model=profile)]) as running:
                assert not running.url.endswith(f":{held}")
                response = asyncio.run(ask(client_for(running, renderer_pool)[0]))
        except TopologyUnavailable as exc:
            if "Address already in use" in str(exc):
                raise
            pytest.skip(f"sglang-router unavailable here: {exc}")
    assert response.tokens is not None and response.tokens.completion_ids
