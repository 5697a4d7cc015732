"""The transport inside real Verifiers ``TrainClient.get_response`` with a real Qwen3 renderer.

The engine behind the transport is a scripted ``httpx.MockTransport`` that answers SGLang's
native /generate shape (a stand-in until the loopback engine is used; see
test_transport_engine.py for that). It samples the tokenization of a fixed reply.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from verifiers.v1.clients.train import TrainClient
from verifiers.v1.dialects import ChatDialect
from verifiers.v1.errors import OverlongPromptError, ProviderError
from verifiers.v1.types import Response, SamplingConfig

from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport import SGLangTransport

MODEL = "Qwen/Qwen3-0.6B"
IM_END = 151645
# A host of its own: renderers caches the /models probe per (base_url, model) for the process.
ENGINE = "http://trainclient-tests.test:30000"
CONTEXT_LEN = 96
MAX_PROMPT_LEN = 48

Handler = Callable[[httpx.Request], httpx.Response]


@dataclass
class ScriptedEngine:
    handler: Handler | None = None
    payloads: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/generate", request.url
        self.payloads.append(json.loads(request.content))
        assert self.handler is not None, "no engine behaviour scripted for this test"
        return self.handler(request)


@dataclass
class Setup:
    engine: ScriptedEngine
    client: TrainClient
    reply_ids: list[int]


@pytest.fixture(scope="module")
def setup(offline_tokenizers: None) -> Iterator[Setup]:
    from renderers.base import load_tokenizer

    tokenizer = load_tokenizer(MODEL)
    reply_ids = [*tokenizer.encode("Hello there", add_special_tokens=False), IM_END]
    engine = ScriptedEngine()
    settings = TransportSettings(
        engine_url=ENGINE,
        max_response_len=16,
        context_len=CONTEXT_LEN,
        max_prompt_len=MAX_PROMPT_LEN,
        served_model_names=(MODEL,),
        retry={"max_retries": 0},
    )
    transport = SGLangTransport(settings, http_transport=httpx.MockTransport(engine))
    client = TrainClient(transport, renderer_model_name=MODEL)  # type: ignore[arg-type]
    yield Setup(engine=engine, client=client, reply_ids=reply_ids)
    asyncio.run(client.close())


@pytest.fixture
def s(setup: Setup) -> Iterator[Setup]:
    setup.engine.payloads.clear()
    yield setup
    setup.engine.handler = None


def sampled(ids: list[int], logprobs: list[float], finish: dict[str, Any]) -> Handler:
    def reply(request: httpx.Request) -> httpx.Response:
        rid = json.loads(request.content)["rid"]
        answer = {
            "text": "Hello there",
            "output_ids": ids,
            "meta_info": {
                "id": rid,
                "finish_reason": finish,
                "output_token_logprobs": [
                    [lp, t, None] for lp, t in zip(logprobs, ids, strict=True)
                ],
                "completion_tokens": len(ids),
            },
        }
        return httpx.Response(200, json=answer)

    return reply


def turn(s: Setup, text: str, session: str = "f" * 32, **sampling: Any) -> Response:
    body = {"messages": [{"role": "user", "content": text}]}
    config = SamplingConfig(temperature=1.0, max_tokens=8, **sampling)
    return asyncio.run(
        s.client.get_response(ChatDialect(), body, MODEL, config, session_id=session)
    )


def test_a_turn_carries_the_engines_exact_ids_and_logprobs(s: Setup) -> None:
    logprobs = [-0.125 * (i + 1) for i in range(len(s.reply_ids))]
    s.engine.handler = sampled(s.reply_ids, logprobs, {"type": "stop", "matched": IM_END})
    response = turn(s, "hi", session="a" * 32)
    assert response.tokens is not None
    assert response.tokens.completion_ids == s.reply_ids
    assert response.tokens.completion_logprobs == logprobs
    assert response.message.content == "Hello there"
    assert response.finish_reason == "stop"
    assert response.id == s.engine.payloads[0]["rid"]


def test_the_prompt_trained_on_is_the_prompt_sglang_received(s: Setup) -> None:
    s.engine.handler = sampled(
        s.reply_ids, [-0.5] * len(s.reply_ids), {"type": "length", "length": 8}
    )
    response = turn(s, "hi", session="b" * 32)
    assert response.tokens is not None
    assert response.tokens.prompt_ids == s.engine.payloads[0]["input_ids"]
    assert response.finish_reason == "length"


def test_sampling_reaches_sglang_under_its_own_names(s: Setup) -> None:
    s.engine.handler = sampled(
        s.reply_ids, [-0.5] * len(s.reply_ids), {"type": "stop", "matched": IM_END}
    )
    turn(s, "hi", session="c" * 32, top_k=20, min_tokens=2, seed=5, reasoning_effort="low")
    params = s.engine.payloads[0]["sampling_params"]
    assert params["top_k"] == 20
    assert params["min_new_tokens"] == 2
    assert params["sampling_seed"] == 5
    assert params["max_new_tokens"] == 8
    assert IM_END in params["stop_token_ids"]
    assert not {"reasoning_effort", "logprobs", "seed", "min_tokens", "max_tokens"} & params.keys()


def test_a_long_first_prompt_ends_as_overlong_without_a_request(s: Setup) -> None:
    long_text = " ".join(["word"] * (MAX_PROMPT_LEN + 5))
    with pytest.raises(OverlongPromptError, match="max_prompt_len"):
        turn(s, long_text, session="d" * 32)
    assert s.engine.payloads == []


def test_a_prompt_over_the_context_is_stopped_by_renderers_preflight(s: Setup) -> None:
    # The /models probe advertises max_model_len=CONTEXT_LEN, so renderers refuses it first.
    long_text = " ".join(["word"] * (CONTEXT_LEN + 5))
    with pytest.raises(OverlongPromptError, match="exceeds maximum context length"):
        turn(s, long_text, session="e" * 32)
    assert s.engine.payloads == []


def test_an_engine_abort_is_a_provider_error_not_a_turn(s: Setup) -> None:
    s.engine.handler = sampled(
        s.reply_ids[:1], [-0.5], {"type": "abort", "message": "Aborted", "status_code": None}
    )
    with pytest.raises(ProviderError, match="aborted") as caught:
        turn(s, "hi", session="1" * 32)
    assert not isinstance(caught.value, OverlongPromptError)
    assert caught.value.status_code == 503


def test_an_engine_400_is_a_provider_error_with_status_400(s: Setup) -> None:
    s.engine.handler = lambda request: httpx.Response(
        400, json={"error": {"message": "top_p must be in (0, 1], got 0.0."}}
    )
    with pytest.raises(ProviderError, match="top_p") as caught:
        turn(s, "hi", session="2" * 32)
    assert caught.value.status_code == 400


def test_an_unreachable_engine_is_a_provider_error_503(s: Setup) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    s.engine.handler = refuse
    with pytest.raises(ProviderError) as caught:
        turn(s, "hi", session="3" * 32)
    assert caught.value.status_code == 503
