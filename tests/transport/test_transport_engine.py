"""Integration: real Verifiers ``TrainClient`` + real Qwen3 renderer + the transport, talking
HTTP to the loopback SGLang engine (``miles_verifiers_testkit.engine``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from verifiers.v1.clients.train import TrainClient
from verifiers.v1.dialects import ChatDialect
from verifiers.v1.errors import OverlongPromptError, ProviderError
from verifiers.v1.types import Response, SamplingConfig

from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers_testkit.engine import EngineConfig, FaultPlan, LatencyModel, serve_engine
from miles_verifiers_testkit.engine.server import RunningEngine
from tests.transport.abort_support import abort_mid_turn

MODEL = "Qwen/Qwen3-0.6B"
CONTEXT_LEN = 512
QUESTION = "What is 3 + 4?"


class RecordingTransport(httpx.AsyncBaseTransport):
    """The real network layer, keeping a copy of each SGLang request payload and answer."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[tuple[dict[str, Any], int, bytes]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        body = await response.aread()
        payload = json.loads(request.content) if request.content else {}
        self.exchanges.append((payload, response.status_code, body))
        headers = [
            (k, v)
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
        ]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def answers(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, status, body in self.exchanges if status == 200]


@pytest.fixture(scope="module")
def engine(offline_tokenizers: None) -> Iterator[RunningEngine]:
    with serve_engine(EngineConfig(model=MODEL, context_length=CONTEXT_LEN)) as running:
        yield running


@pytest.fixture(scope="module")
def renderer_pool(offline_tokenizers: None) -> Any:
    from renderers import create_renderer_pool

    return create_renderer_pool(MODEL, None, size=1)


@pytest.fixture
def clean_engine(engine: RunningEngine) -> Iterator[RunningEngine]:
    yield engine
    engine.engine.set_faults(FaultPlan())
    engine.engine.set_latency(LatencyModel())


MakeClient = Callable[..., tuple[TrainClient, SGLangTransport]]


@pytest.fixture
def make_client(renderer_pool: Any) -> MakeClient:
    """Real TrainClients on fresh transports, sharing one loaded renderer pool."""

    def build(
        url: str, recorder: RecordingTransport | None = None, sleep: Any = None, **overrides: Any
    ) -> tuple[TrainClient, SGLangTransport]:
        values: dict[str, Any] = {
            "engine_url": url,
            "max_response_len": 64,
            "context_len": CONTEXT_LEN,
            "served_model_names": (MODEL,),
            "retry": {"max_retries": 2, "initial_backoff_s": 0.0, "max_backoff_s": 0.0},
        }
        values.update(overrides)
        kwargs: dict[str, Any] = {"http_transport": recorder}
        if sleep is not None:
            kwargs["sleep"] = sleep
        transport = SGLangTransport(TransportSettings(**values), **kwargs)
        client = TrainClient(transport, renderer_model_name=MODEL)  # type: ignore[arg-type]
        # Loading the tokenizer costs seconds per client; this is the same (real) pool
        # TrainClient._renderer_pool would build for the model.
        client._pool = renderer_pool
        return client, transport

    return build


async def respond(
    client: TrainClient, text: str = QUESTION, session: str = "a" * 32, **sampling: Any
) -> Response:
    config = SamplingConfig(temperature=1.0, max_tokens=64, **sampling)
    body = {"messages": [{"role": "user", "content": text}]}
    return await client.get_response(ChatDialect(), body, MODEL, config, session_id=session)


async def ask(
    client: TrainClient, text: str = QUESTION, session: str = "a" * 32, **sampling: Any
) -> Response:
    """One turn, then the client closed (as a caller done with it would)."""
    try:
        return await respond(client, text, session, **sampling)
    finally:
        await client.close()


def test_training_sees_the_engines_exact_ids_and_logprobs(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    recorder = RecordingTransport()
    client, _ = make_client(clean_engine.base_url, recorder)
    response = asyncio.run(ask(client))

    (answer,) = recorder.answers()
    triples = answer["meta_info"]["output_token_logprobs"]
    assert response.tokens is not None
    assert response.tokens.completion_ids == [t for _, t, _ in triples] == answer["output_ids"]
    assert response.tokens.completion_logprobs == [lp for lp, _, _ in triples]
    assert response.tokens.prompt_ids == recorder.exchanges[0][0]["input_ids"]
    assert response.message.content
    assert response.finish_reason == answer["meta_info"]["finish_reason"]["type"]


def test_the_older_sglang_contract_is_served_too(make_client: MakeClient) -> None:
    config = EngineConfig(model=MODEL, context_length=CONTEXT_LEN, sglang_version="0.5.15")
    with serve_engine(config) as running:
        client, _ = make_client(running.base_url)
        response = asyncio.run(ask(client, top_k=-1, min_tokens=1, seed=3))
    assert response.tokens is not None and response.tokens.completion_ids


def test_an_ill_typed_sampling_value_is_refused_before_sglang_0_5_16_can_500(
    make_client: MakeClient,
) -> None:
    # SGLang 0.5.16 (production Miles' base) crashes on it with a bare 500 that names nothing
    # and is retried; the transport refuses it at once, naming the key.
    config = EngineConfig(model=MODEL, context_length=CONTEXT_LEN, sglang_version="0.5.15")
    with serve_engine(config) as running:
        recorder = RecordingTransport()
        client, _ = make_client(running.base_url, recorder)
        with pytest.raises(ProviderError, match="top_k") as caught:
            asyncio.run(ask(client, top_k="many"))
    assert caught.value.status_code == 400
    assert recorder.exchanges == []


def test_all_verifiers_sampling_extras_pass_sglangs_schema_gate(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    recorder = RecordingTransport()
    client, _ = make_client(clean_engine.base_url, recorder)
    asyncio.run(
        ask(
            client,
            top_k=20,
            min_tokens=1,
            seed=11,
            min_p=0.05,
            repetition_penalty=1.1,
            presence_penalty=0.1,
            frequency_penalty=0.1,
            reasoning_effort="low",
            n=2,
            stop=["\n\n\n"],
            routed_experts_prompt_start=12,
        )
    )
    ((payload, status, body),) = recorder.exchanges
    assert status == 200, body
    assert "routed_experts_prompt_start" not in payload["sampling_params"]


def test_adapter_namespace_fields_pass_sglangs_schema_gate(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    recorder = RecordingTransport()
    client, _ = make_client(
        clean_engine.base_url, recorder, extra_key="adapter:v1", priority=1, routing="manual"
    )
    asyncio.run(ask(client))
    ((payload, status, body),) = recorder.exchanges
    assert status == 200, body
    assert payload["extra_key"] == "adapter:v1"


def test_an_engine_context_overflow_ends_as_overlong(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    # Without a configured context length neither the pre-flight nor the clamp can catch it,
    # so SGLang's own 400 must be recognised.
    client, _ = make_client(clean_engine.base_url, context_len=None)
    long_text = " ".join(["seven"] * (CONTEXT_LEN + 20))
    with pytest.raises(OverlongPromptError, match="context length"):
        asyncio.run(ask(client, long_text))


@pytest.mark.parametrize("probe_engine_limits", [True, False])
def test_a_prompt_three_tokens_short_of_the_context_ends_as_context_length(
    clean_engine: RunningEngine, make_client: MakeClient, probe_engine_limits: bool
) -> None:
    # It fits the context, but SGLang's scheduler refuses prompts of max_req_input_len =
    # context - 6 tokens or more. With the limits read from the engine the transport ends it
    # before sending; without them, the engine's refusal is recognised.
    _, transport = make_client(clean_engine.base_url, probe_engine_limits=probe_engine_limits)

    async def send() -> Any:
        try:
            return await transport.post(
                f"{clean_engine.base_url}/inference/v1/generate",
                body={"token_ids": [9707] * (CONTEXT_LEN - 3), "sampling_params": {}},
            )
        finally:
            await transport.close()

    with pytest.raises(OverlongPromptError):
        asyncio.run(send())


def test_the_models_probe_agrees_with_the_engine(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    _, transport = make_client(clean_engine.base_url)
    listing = asyncio.run(transport.get("/models"))
    engine_cards = httpx.get(f"{clean_engine.base_url}/v1/models", timeout=10).json()["data"]
    ours = {card["id"]: card["max_model_len"] for card in listing["data"]}
    theirs = {card["id"]: card["max_model_len"] for card in engine_cards}
    assert ours == theirs


async def abort_a_turn(
    client: TrainClient, transport: SGLangTransport, engine: Any
) -> tuple[ProviderError | None, Any]:
    return await abort_mid_turn(
        client, transport, respond(client), engine.in_flight_rids, turn_timeout_s=10
    )


def test_aborting_leftover_work_ends_the_turn_as_a_provider_error(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    clean_engine.engine.set_latency(LatencyModel(decode_s_per_token=0.05))
    client, transport = make_client(clean_engine.base_url)

    error, report = asyncio.run(abort_a_turn(client, transport, clean_engine.engine))
    assert isinstance(error, ProviderError)
    assert error.status_code == 503
    assert "aborted" in str(error)
    assert report.ok
    assert clean_engine.engine.in_flight_rids() == []


def test_an_abort_sweep_against_a_direct_worker_leaves_nothing_running(
    make_client: MakeClient,
) -> None:
    # A bare SGLang worker has no /workers or /list_workers: the sweep must abort at its URL.
    config = EngineConfig(
        model=MODEL,
        context_length=CONTEXT_LEN,
        router=False,
        latency=LatencyModel(decode_s_per_token=0.05),
    )
    with serve_engine(config) as running:
        client, transport = make_client(running.base_url)

        error, report = asyncio.run(abort_a_turn(client, transport, running.engine))
        assert report.ok
        assert report.workers == (running.base_url,)
        assert isinstance(error, ProviderError) and "aborted" in str(error)
        assert running.engine.in_flight_rids() == []


def test_persistent_5xx_is_retried_then_a_provider_error(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    clean_engine.engine.set_faults(FaultPlan(server_error=1.0, error_status=503))
    recorder = RecordingTransport()
    client, _ = make_client(clean_engine.base_url, recorder)
    with pytest.raises(ProviderError) as caught:
        asyncio.run(ask(client))
    assert caught.value.status_code == 503
    assert len(recorder.exchanges) == 3


def test_a_dropped_connection_is_retried_and_recovers(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    clean_engine.engine.set_faults(FaultPlan(drop_connection=1.0))
    backoffs: list[float] = []

    async def heal_engine(seconds: float) -> None:
        backoffs.append(seconds)
        clean_engine.engine.set_faults(FaultPlan())

    client, _ = make_client(clean_engine.base_url, sleep=heal_engine)
    response = asyncio.run(ask(client))
    assert response.tokens is not None and response.tokens.completion_ids
    assert len(backoffs) == 1


def test_a_malformed_engine_body_is_a_502_provider_error(
    clean_engine: RunningEngine, make_client: MakeClient
) -> None:
    clean_engine.engine.set_faults(FaultPlan(malformed_body=1.0))
    client, _ = make_client(clean_engine.base_url)
    with pytest.raises(ProviderError) as caught:
        asyncio.run(ask(client))
    assert caught.value.status_code == 502
