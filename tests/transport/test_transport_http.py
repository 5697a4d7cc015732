"""SGLangTransport over httpx.MockTransport: wire format, sessions, retries, errors, lifecycle."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import openai
import pytest
from verifiers.v1.errors import OverlongPromptError

from miles_verifiers.engine.settings import EngineAddressError
from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers.episodes.transport.errors import (
    EngineAbortedError,
    MalformedEngineResponseError,
)

T = TypeVar("T")
GENERATE = "http://engine.test:30000/inference/v1/generate"
SESSION = "0123456789abcdef0123456789abcdef"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def renderer_body(prompt_len: int = 4, **sampling: Any) -> dict[str, Any]:
    return {
        "model": "Qwen/Qwen3-0.6B",
        "token_ids": list(range(100, 100 + prompt_len)),
        "sampling_params": {
            "max_tokens": 16,
            "stop_token_ids": [2],
            "logprobs": 1,
            "skip_special_tokens": False,
            **sampling,
        },
    }


async def post(
    transport: SGLangTransport, body: dict[str, Any], session: str | None = SESSION
) -> dict[str, Any]:
    options = {"headers": {"X-Session-ID": session}} if session else None
    kwargs: dict[str, Any] = {"cast_to": httpx.Response, "body": body}
    if options:
        kwargs["options"] = options
    response = await transport.post(GENERATE, **kwargs)
    assert isinstance(response, httpx.Response)
    return json.loads(response.content)


def test_a_turn_posts_sglang_generate_and_returns_renderers_json(make_harness, echo_reply) -> None:
    h = make_harness()
    h.engine.replies.append(echo_reply([7, 8, 2], logprobs=[-0.5, -1.5, -0.25]))
    data = run(post(h.transport, renderer_body()))

    (request,) = h.engine.requests
    assert str(request.url) == "http://engine.test:30000/generate"
    payload = json.loads(request.content)
    assert payload["input_ids"] == [100, 101, 102, 103]
    assert payload["return_logprob"] is True
    assert payload["rid"].startswith(f"{h.transport.rid_prefix}-")
    assert data["request_id"] == payload["rid"]
    assert data["choices"][0]["token_ids"] == [7, 8, 2]
    assert [c["logprob"] for c in data["choices"][0]["logprobs"]["content"]] == [-0.5, -1.5, -0.25]


def test_every_request_gets_a_new_rid_with_the_transport_prefix(make_harness, echo_reply) -> None:
    h = make_harness(rid_prefix="trainer_a")
    h.engine.replies.extend([echo_reply([1]), echo_reply([1])])

    async def two() -> None:
        await post(h.transport, renderer_body())
        await post(h.transport, renderer_body())

    run(two())
    rids = [p["rid"] for p in h.engine.payloads()]
    assert rids == ["trainer_a-0", "trainer_a-1"]


def test_session_header_is_not_forwarded_but_routing_key_is(make_harness, echo_reply) -> None:
    h = make_harness(routing="consistent_hashing")
    h.engine.replies.append(echo_reply([1]))
    run(post(h.transport, renderer_body()))
    headers = h.engine.requests[0].headers
    assert headers["X-SMG-Routing-Key"] == SESSION
    assert "X-Session-ID" not in headers


def test_first_prompt_limit_applies_once_per_session(make_harness, echo_reply) -> None:
    h = make_harness(max_prompt_len=5)
    h.engine.replies.append(echo_reply([1]))

    async def turns() -> None:
        await post(h.transport, renderer_body(prompt_len=5))
        await post(h.transport, renderer_body(prompt_len=40))

    h.engine.replies.append(echo_reply([1]))
    run(turns())
    assert len(h.engine.requests) == 2


def test_an_overlong_first_prompt_is_not_sent(make_harness) -> None:
    h = make_harness(max_prompt_len=5)
    with pytest.raises(OverlongPromptError, match="first prompt"):
        run(post(h.transport, renderer_body(prompt_len=6)))
    assert h.engine.requests == []


def test_an_overlong_first_prompt_does_not_open_the_session(make_harness) -> None:
    h = make_harness(max_prompt_len=5)

    async def twice() -> None:
        for _ in range(2):
            with pytest.raises(OverlongPromptError):
                await post(h.transport, renderer_body(prompt_len=6))

    run(twice())


def test_requests_without_a_session_are_all_first_prompts(make_harness, echo_reply) -> None:
    h = make_harness(max_prompt_len=5)
    h.engine.replies.append(echo_reply([1]))

    async def turns() -> None:
        await post(h.transport, renderer_body(prompt_len=5), session=None)
        with pytest.raises(OverlongPromptError):
            await post(h.transport, renderer_body(prompt_len=6), session=None)

    run(turns())


def test_a_bridged_turn_of_a_forgotten_session_is_not_capped(make_harness, echo_reply) -> None:
    h = make_harness(max_prompt_len=5, session_cache_size=1)
    h.engine.replies.append(echo_reply([1]))
    body = renderer_body(prompt_len=30, routed_experts_prompt_start=20)
    run(post(h.transport, body, session="never-seen"))
    assert "routed_experts_prompt_start" not in h.engine.payloads()[0]["sampling_params"]


def test_a_prompt_leaving_no_room_is_overlong_and_not_sent(make_harness) -> None:
    h = make_harness(context_len=10, max_prompt_len=None)
    with pytest.raises(OverlongPromptError, match="no room"):
        run(post(h.transport, renderer_body(prompt_len=10)))
    assert h.engine.requests == []


def test_5xx_is_retried_with_backoff_then_succeeds(make_harness, echo_reply) -> None:
    h = make_harness()
    h.engine.replies.extend(
        [httpx.Response(503, text="busy"), httpx.Response(500, text="oops"), echo_reply([3])]
    )
    data = run(post(h.transport, renderer_body()))
    assert data["choices"][0]["token_ids"] == [3]
    assert h.sleeps == [0.5, 1.0]


def test_each_retry_uses_a_fresh_rid_under_the_same_prefix(make_harness, echo_reply) -> None:
    h = make_harness(rid_prefix="p")
    h.engine.replies.extend([httpx.Response(503), echo_reply([3])])
    run(post(h.transport, renderer_body()))
    assert [p["rid"] for p in h.engine.payloads()] == ["p-0", "p-0_1"]


def test_retries_are_bounded_and_the_last_5xx_is_raised(make_harness) -> None:
    h = make_harness()
    h.engine.replies.extend([httpx.Response(500, text="down")] * 3)
    with pytest.raises(openai.InternalServerError, match="HTTP 500: down"):
        run(post(h.transport, renderer_body()))
    assert len(h.engine.requests) == 3
    assert h.sleeps == [0.5, 1.0]


def test_a_bare_500_is_retried_a_bounded_number_of_times_and_names_the_sampling_keys(
    make_harness,
) -> None:
    # SGLang 0.5.16 answers a bare 500 when it cannot build SamplingParams from the request.
    h = make_harness()
    h.engine.replies.extend([httpx.Response(500, text="Internal Server Error")] * 3)
    with pytest.raises(openai.InternalServerError) as caught:
        run(post(h.transport, renderer_body(top_k=5)))
    assert len(h.engine.requests) == 3
    assert "top_k" in str(caught.value) and "max_new_tokens" in str(caught.value)


def test_a_4xx_is_never_retried(make_harness) -> None:
    h = make_harness()
    h.engine.replies.append(
        httpx.Response(400, json={"error": {"message": "top_p must be in (0, 1]"}})
    )
    with pytest.raises(openai.BadRequestError, match="top_p"):
        run(post(h.transport, renderer_body()))
    assert len(h.engine.requests) == 1
    assert h.sleeps == []


def test_a_router_422_is_not_retried_and_names_the_field(make_harness) -> None:
    h = make_harness()
    text = (
        "Failed to deserialize the JSON body into the target type: sampling_params.top_k: "
        "invalid type: floating point `2.5`, expected i32 at line 1 column 80"
    )
    h.engine.replies.append(httpx.Response(422, text=text))
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        run(post(h.transport, renderer_body()))
    assert "field 'sampling_params.top_k'" in str(caught.value)
    assert "not retried" in str(caught.value)
    assert len(h.engine.requests) == 1
    assert h.sleeps == []


def test_a_context_length_400_is_an_overlong_prompt(make_harness) -> None:
    h = make_harness()
    message = "The input (300 tokens) is longer than the model's context length (256 tokens)."
    h.engine.replies.append(httpx.Response(400, json={"error": {"message": message}}))
    with pytest.raises(OverlongPromptError, match="context length"):
        run(post(h.transport, renderer_body()))


def test_connection_errors_are_retried_then_raised_as_connection_errors(make_harness) -> None:
    h = make_harness()
    h.engine.replies.extend([httpx.ConnectError("refused")] * 3)
    with pytest.raises(openai.APIConnectionError) as caught:
        run(post(h.transport, renderer_body()))
    assert not isinstance(caught.value, openai.APITimeoutError)
    assert len(h.engine.requests) == 3


def test_a_read_timeout_is_not_retried(make_harness) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.ReadTimeout("slow"))
    with pytest.raises(openai.APITimeoutError):
        run(post(h.transport, renderer_body()))
    assert len(h.engine.requests) == 1


def test_an_engine_abort_raises_and_is_not_retried(make_harness, sglang_answer) -> None:
    h = make_harness()
    aborted = sglang_answer(
        [5, 6], finish={"type": "abort", "message": "Aborted", "status_code": None}
    )
    h.engine.replies.append(httpx.Response(200, json=aborted))
    with pytest.raises(EngineAbortedError, match="after 2 token"):
        run(post(h.transport, renderer_body()))
    assert len(h.engine.requests) == 1


def test_a_non_json_answer_is_malformed(make_harness) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(MalformedEngineResponseError, match="not JSON"):
        run(post(h.transport, renderer_body()))


def test_inconsistent_token_metadata_is_malformed(make_harness, sglang_answer) -> None:
    h = make_harness()
    answer = sglang_answer([5, 6])
    answer["output_ids"] = [5, 7]
    h.engine.replies.append(httpx.Response(200, json=answer))
    with pytest.raises(MalformedEngineResponseError, match="differs"):
        run(post(h.transport, renderer_body()))


def test_a_contract_breaking_answer_names_the_engine_url_and_field(
    make_harness, sglang_answer
) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.Response(200, json=sglang_answer([5, 6], [-0.1, 0.7])))
    with pytest.raises(MalformedEngineResponseError) as caught:
        run(post(h.transport, renderer_body()))
    message = str(caught.value)
    assert "http://engine.test:30000/generate broke the /generate contract" in message
    assert "output_token_logprobs[1]" in message


def test_an_answer_longer_than_the_sent_max_new_tokens_is_refused(
    make_harness, sglang_answer
) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.Response(200, json=sglang_answer(list(range(1, 6)))))
    with pytest.raises(MalformedEngineResponseError, match="max_new_tokens=4"):
        run(post(h.transport, renderer_body(max_tokens=4)))


def test_an_answer_with_an_id_beyond_the_configured_vocabulary_is_refused(
    make_harness, sglang_answer
) -> None:
    h = make_harness(vocab_size=1000)
    h.engine.replies.append(httpx.Response(200, json=sglang_answer([5, 1000])))
    with pytest.raises(MalformedEngineResponseError, match=r"output_ids\[1\]=1000"):
        run(post(h.transport, renderer_body()))


def test_a_contract_breaking_answer_is_not_resent(make_harness, sglang_answer) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.Response(200, json=sglang_answer([5], [3.0])))
    with pytest.raises(MalformedEngineResponseError):
        run(post(h.transport, renderer_body()))
    assert len(h.engine.requests) == 1


def test_multimodal_requests_are_refused_as_bad_requests_and_not_sent(make_harness) -> None:
    h = make_harness()
    body = renderer_body() | {"features": {"mm_hashes": {"image": ["h"]}}}
    with pytest.raises(openai.BadRequestError, match="multimodal"):
        run(post(h.transport, body))
    assert h.engine.requests == []


def test_only_the_generate_endpoint_is_served(make_harness) -> None:
    h = make_harness()
    with pytest.raises(ValueError, match=r"only serves POST \.\.\./inference/v1/generate"):
        run(h.transport.post("http://engine.test:30000/v1/chat/completions", body={}))


def test_streaming_is_refused(make_harness) -> None:
    h = make_harness()
    with pytest.raises(ValueError, match="does not stream"):
        run(h.transport.post(GENERATE, body=renderer_body(), stream=True))


def test_models_probe_reports_the_context_length(make_harness) -> None:
    h = make_harness(context_len=4096, served_model_names=("Qwen/Qwen3-0.6B", "miles_lora"))
    listing = run(h.transport.get("/models", cast_to=dict))
    assert [(c["id"], c["max_model_len"]) for c in listing["data"]] == [
        ("Qwen/Qwen3-0.6B", 4096),
        ("miles_lora", 4096),
    ]


def test_models_probe_is_empty_without_a_context_length(make_harness) -> None:
    h = make_harness(context_len=None, served_model_names=("Qwen/Qwen3-0.6B",))
    assert run(h.transport.get("/models"))["data"] == []


def test_other_get_paths_are_refused(make_harness) -> None:
    h = make_harness()
    with pytest.raises(ValueError, match="only answers GET /models"):
        run(h.transport.get("/health"))


def test_base_url_and_target_follow_the_address_callable(make_harness, echo_reply) -> None:
    address = {"url": None}

    def router() -> str:
        if address["url"] is None:
            raise KeyError("sglang_router_ip")
        return address["url"]

    h = make_harness(engine_url=router)
    with pytest.raises(EngineAddressError, match="not set yet"):
        _ = h.transport.base_url
    address["url"] = "http://10.0.0.7:31000"
    assert str(h.transport.base_url) == "http://10.0.0.7:31000/v1"
    h.engine.replies.append(echo_reply([1]))
    run(post(h.transport, renderer_body()))
    assert str(h.engine.requests[0].url) == "http://10.0.0.7:31000/generate"


def test_close_releases_the_client_and_a_later_request_reopens_it(make_harness, echo_reply) -> None:
    h = make_harness()
    h.engine.replies.extend([echo_reply([1]), echo_reply([2])])

    async def scenario() -> None:
        await post(h.transport, renderer_body())
        await h.transport.close()
        await h.transport.close()  # idempotent
        data = await post(h.transport, renderer_body())
        assert data["choices"][0]["token_ids"] == [2]
        await h.transport.close()

    run(scenario())


def test_concurrent_turns_each_get_their_own_answer(make_harness) -> None:
    h = make_harness()

    async def engine(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        await asyncio.sleep(0)
        token = payload["input_ids"][0]
        answer = {
            "output_ids": [token],
            "meta_info": {
                "id": payload["rid"],
                "finish_reason": {"type": "stop", "matched": token},
                "output_token_logprobs": [[-0.5, token, None]],
                "completion_tokens": 1,
            },
        }
        return httpx.Response(200, json=answer)

    transport = SGLangTransport(h.transport.settings, http_transport=httpx.MockTransport(engine))

    async def many() -> list[dict[str, Any]]:
        bodies = [{"token_ids": [n], "sampling_params": {}} for n in range(30)]
        return await asyncio.gather(
            *(post(transport, body, session=f"s{n}") for n, body in enumerate(bodies))
        )

    results = run(many())
    assert [r["choices"][0]["token_ids"] for r in results] == [[n] for n in range(30)]
    assert len({r["request_id"] for r in results}) == 30
    assert transport.in_flight_rids == frozenset()


def test_dropped_keys_are_logged_once_at_debug(make_harness, echo_reply, caplog) -> None:
    h = make_harness()
    h.engine.replies.extend([echo_reply([1]), echo_reply([1])])
    caplog.set_level(logging.DEBUG, logger="miles_verifiers.episodes.transport.transport")

    async def two() -> None:
        await post(h.transport, renderer_body(routed_experts_prompt_start=3))
        await post(h.transport, renderer_body(routed_experts_prompt_start=9))

    run(two())
    messages = [r.getMessage() for r in caplog.records if "not forwarding" in r.getMessage()]
    assert len(messages) == 1
    assert "routed_experts_prompt_start" in messages[0]
    assert all(
        r.levelno == logging.DEBUG for r in caplog.records if "not forwarding" in r.getMessage()
    )


def test_keys_the_rust_router_drops_are_warned_about_once(make_harness, echo_reply, caplog) -> None:
    h = make_harness(router="sglang-router")
    h.engine.replies.extend([echo_reply([1]), echo_reply([1])])
    caplog.set_level(logging.WARNING, logger="miles_verifiers.episodes.transport.transport")

    async def two() -> None:
        await post(h.transport, renderer_body(logit_bias={"7": 1.0}))
        await post(h.transport, renderer_body(logit_bias={"7": 2.0}))

    run(two())
    warnings = [r.getMessage() for r in caplog.records if "drops sampling param" in r.getMessage()]
    assert len(warnings) == 1
    assert "logit_bias" in warnings[0]


def _router_drop_warnings(make_harness, echo_reply, caplog, shared: set[str] | None) -> int:
    """Dropped-key warnings from two transports (two calls), each posting logit_bias once."""
    caplog.set_level(logging.WARNING, logger="miles_verifiers.episodes.transport.transport")
    for _ in range(2):
        h = make_harness(router="sglang-router", router_drops_warned=shared)
        h.engine.replies.append(echo_reply([1]))
        run(post(h.transport, renderer_body(logit_bias={"7": 1.0})))
    return len([r for r in caplog.records if "drops sampling param" in r.getMessage()])


def test_transports_sharing_a_warned_set_warn_about_a_dropped_key_once(
    make_harness, echo_reply, caplog
) -> None:
    shared: set[str] = set()

    assert _router_drop_warnings(make_harness, echo_reply, caplog, shared) == 1
    assert shared == {"logit_bias"}


def test_transports_of_different_owners_each_warn_about_a_dropped_key(
    make_harness, echo_reply, caplog
) -> None:
    assert _router_drop_warnings(make_harness, echo_reply, caplog, None) == 2


def test_a_pass_through_router_gives_no_dropped_key_warning(make_harness, echo_reply, caplog):
    h = make_harness(router="pass-through")
    h.engine.replies.append(echo_reply([1]))
    caplog.set_level(logging.WARNING, logger="miles_verifiers.episodes.transport.transport")
    run(post(h.transport, renderer_body(logit_bias={"7": 1.0})))
    assert not [r for r in caplog.records if "drops sampling param" in r.getMessage()]
