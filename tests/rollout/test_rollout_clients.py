"""The model client: renderer identity, the shared growing pool, and explicit refusals."""

from __future__ import annotations

import asyncio
import threading
from argparse import Namespace
from typing import Any

import pytest
from verifiers.v1.errors import ProviderError

from miles_verifiers.episodes.v02.clients import (
    MilesTrainClient,
    UnsupportedRequestError,
    growing_pool_class,
    renderer_identity,
    shared_renderer_pool,
)
from miles_verifiers.errors import is_unsupported_request
from miles_verifiers.protocol.messages import RendererSpecModel
from miles_verifiers.trainer.engine_settings import EngineAddressUnsetError, engine_url_from_args
from tests.rollout.rollout_support import MODEL


@pytest.mark.parametrize(
    ("checkpoint", "identity"),
    [
        ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
        ("/data/hf/models--Qwen--Qwen3-0.6B/snapshots/abc123", "Qwen/Qwen3-0.6B"),
        ("/models/Qwen3-8B/", "Qwen/Qwen3-8B"),
        ("/models/Qwen3-0.6B", None),  # Qwen/ and PrimeIntellect/ differ: ambiguous
        ("/models/my-policy", None),
        (None, None),
    ],
)
def test_the_renderer_identity_of_a_checkpoint(
    checkpoint: str | None, identity: str | None
) -> None:
    assert renderer_identity(checkpoint) == identity


def test_matches_mapping_to_one_renderer_resolve_to_the_first_id() -> None:
    model_map = {"org-a/Tiny": "tiny", "org-b/Tiny": "tiny", "org-c/Other": "other"}

    assert renderer_identity("/ckpt/Tiny", model_map) == "org-a/Tiny"


def test_the_engine_address_comes_from_the_default_model_router_first() -> None:
    args = Namespace(
        sglang_router_ip="10.0.0.1",
        sglang_router_port=1,
        sglang_model_routers={"default": ("10.0.0.2", 2)},
    )

    assert engine_url_from_args(args) == "http://10.0.0.2:2"


def test_the_engine_address_falls_back_to_the_router_ip_and_port() -> None:
    assert (
        engine_url_from_args(Namespace(sglang_router_ip="10.0.0.1", sglang_router_port=30000))
        == "http://10.0.0.1:30000"
    )


def test_an_unset_engine_address_is_an_error_saying_when_miles_sets_it() -> None:
    with pytest.raises(EngineAddressUnsetError, match="after building"):
        engine_url_from_args(Namespace(sglang_router_ip=None, sglang_router_port=None))


@pytest.fixture(scope="module")
def pool() -> Any:
    return shared_renderer_pool(
        RendererSpecModel(
            tokenizer_source=MODEL,
            identity=MODEL,
            chat_template_kwargs_json='{"enable_thinking": false}',
            pool_size=2,
        )
    )


def test_the_pool_is_built_once_per_spec(pool: Any) -> None:
    assert (
        shared_renderer_pool(
            RendererSpecModel(
                tokenizer_source=MODEL,
                identity=MODEL,
                chat_template_kwargs_json='{"enable_thinking": false}',
                pool_size=2,
            )
        )
        is pool
    )
    assert isinstance(pool, growing_pool_class())


def test_the_pool_adds_a_renderer_only_when_two_renders_overlap() -> None:
    pool = growing_pool_class()(_qwen_renderer, 2)
    assert pool.built == 1

    with pool.checkout():
        pass
    assert pool.built == 1

    release = threading.Event()
    holding = threading.Event()

    def hold() -> None:
        with pool.checkout():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(30)
    assert pool.render_ids([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    release.set()
    holder.join(30)
    assert pool.built == 2


def test_warming_up_fills_the_pool_to_its_size() -> None:
    pool = growing_pool_class()(_qwen_renderer, 2)

    pool.warm_up()

    assert pool.built == 2


def _qwen_renderer() -> Any:
    from renderers.base import create_renderer, load_tokenizer

    return create_renderer(load_tokenizer(MODEL))


def client_for(pool: Any) -> MilesTrainClient:
    return MilesTrainClient(
        object(), pool, RendererSpecModel(tokenizer_source=MODEL, identity=MODEL, pool_size=2)
    )


@pytest.mark.parametrize("method", ["relay", "relay_aux"])
def test_streaming_and_auxiliary_routes_are_refused_with_a_fix(pool: Any, method: str) -> None:
    client = client_for(pool)

    with pytest.raises(ProviderError) as caught:
        asyncio.run(getattr(client, method)(None, "/v1/messages/count_tokens", {}))

    assert caught.value.status_code == 400
    assert is_unsupported_request(caught.value)
    assert "Fix:" in str(caught.value)


def test_a_non_chat_dialect_is_refused_with_a_fix(pool: Any) -> None:
    from verifiers.v1.dialects import DIALECTS, ChatDialect

    other = next(d for d in DIALECTS if not isinstance(d, ChatDialect))
    client = client_for(pool)

    with pytest.raises(ProviderError) as caught:
        asyncio.run(client.get_response(other, {}, MODEL, None))

    assert isinstance(caught.value, UnsupportedRequestError)
    assert is_unsupported_request(caught.value)
    assert "chat/completions" in str(caught.value)


def test_an_ended_client_refuses_requests_without_sending_them(pool: Any) -> None:
    from verifiers.v1.dialects import ChatDialect

    client = client_for(pool)  # its transport is not a transport: sending would fail differently
    client.end()

    with pytest.raises(ProviderError, match="has ended"):
        asyncio.run(client.get_response(ChatDialect(), {"messages": []}, MODEL, None))


RENDERED_MODELS = ["Qwen/Qwen3-0.6B", "meta-llama/Llama-3.2-1B-Instruct", "openai/gpt-oss-20b"]
TEXT_PARTS = [{"type": "text", "text": "What is "}, {"type": "text", "text": "2 + 3?"}]
IMAGE_PART = {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}


def model_pool(model: str) -> Any:
    from miles_verifiers_testkit.tokenizers import build_all

    build_all()
    return shared_renderer_pool(
        RendererSpecModel(tokenizer_source=model, identity=model, pool_size=1)
    )


@pytest.mark.parametrize("model", RENDERED_MODELS)
def test_text_content_parts_render_as_their_concatenated_text(model: str) -> None:
    pool = model_pool(model)
    as_parts = [{"role": "user", "content": TEXT_PARTS}]
    as_text = [{"role": "user", "content": "What is 2 + 3?"}]

    assert (
        pool.render(as_parts, add_generation_prompt=True).token_ids
        == pool.render(as_text, add_generation_prompt=True).token_ids
    )


@pytest.mark.parametrize("model", RENDERED_MODELS)
def test_a_non_text_content_part_is_refused_before_rendering_naming_its_type(model: str) -> None:
    from miles_verifiers.episodes.content import NonTextContentError

    pool = model_pool(model)

    with pytest.raises(NonTextContentError, match="'image_url'"):
        pool.render(
            [{"role": "user", "content": [*TEXT_PARTS, IMAGE_PART]}], add_generation_prompt=True
        )


def test_text_content_parts_of_a_bridged_tool_result_render_as_their_text() -> None:
    pool = model_pool(MODEL)
    user = [{"role": "user", "content": "hi"}]
    prompt = pool.render_ids(user, add_generation_prompt=True)
    turn = pool.render_ids([*user, {"role": "assistant", "content": "hello"}])
    completion = turn[len(prompt) : -1]  # up to and including the end-of-turn token
    parts = [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]

    as_parts = pool.bridge_to_next_turn(prompt, completion, [{"role": "tool", "content": parts}])
    as_text = pool.bridge_to_next_turn(prompt, completion, [{"role": "tool", "content": "42"}])

    assert as_parts is not None and as_text is not None
    assert as_parts.token_ids == as_text.token_ids


def test_a_request_with_a_non_text_part_is_refused_as_unsupported_without_sending_it(
    pool: Any,
) -> None:
    from verifiers.v1.dialects import ChatDialect
    from verifiers.v1.types import SamplingConfig

    client = client_for(pool)  # its transport is not a transport: sending would fail differently
    body = {"model": MODEL, "messages": [{"role": "user", "content": [*TEXT_PARTS, IMAGE_PART]}]}

    with pytest.raises(ProviderError) as caught:
        asyncio.run(client.get_response(ChatDialect(), body, MODEL, SamplingConfig()))

    assert is_unsupported_request(caught.value)
    assert "'image_url'" in str(caught.value)
