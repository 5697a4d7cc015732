"""Building the SGLang /generate call from a Renderers generate request body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from verifiers.v1.errors import OverlongPromptError

from miles_verifiers.engine.errors import InvalidPrompt, MultimodalNotSupported, RequestRejected
from miles_verifiers.engine.settings import RoutingPolicy, TransportSettings
from miles_verifiers.episodes.transport.request import build_generate_call, is_known_continuation

MakeSettings = Callable[..., TransportSettings]


def renderer_body(**overrides: Any) -> dict[str, Any]:
    """The body renderers 0.1.10 posts (renderers/client.py generate())."""
    body: dict[str, Any] = {
        "model": "Qwen/Qwen3-0.6B",
        "token_ids": [151644, 872, 198, 9707],
        "sampling_params": {
            "temperature": 1.0,
            "max_tokens": 32,
            "stop_token_ids": [151645],
            "logprobs": 1,
            "skip_special_tokens": False,
        },
    }
    body.update(overrides)
    return body


def build(settings: TransportSettings, body: dict[str, Any] | None = None, **kw: Any):
    kw.setdefault("rid", "mv_test-0")
    kw.setdefault("session_id", "a" * 32)
    kw.setdefault("first_prompt", True)
    return build_generate_call(
        body if body is not None else renderer_body(), settings=settings, **kw
    )


def test_payload_is_sglang_native(make_settings: MakeSettings) -> None:
    call = build(make_settings())
    assert call.payload == {
        "rid": "mv_test-0",
        "input_ids": [151644, 872, 198, 9707],
        "sampling_params": {
            "temperature": 1.0,
            "max_new_tokens": 32,
            "stop_token_ids": [151645],
            "n": 1,
            "no_stop_trim": True,
            "skip_special_tokens": False,
        },
        "return_logprob": True,
    }


def test_model_name_is_not_sent(make_settings: MakeSettings) -> None:
    assert "model" not in build(make_settings()).payload


def test_lora_path_comes_from_settings(make_settings: MakeSettings) -> None:
    call = build(make_settings(lora_path="miles_lora"))
    assert call.payload["lora_path"] == "miles_lora"


def test_extra_key_comes_from_settings(make_settings: MakeSettings) -> None:
    assert build(make_settings(extra_key="adapter:v3")).payload["extra_key"] == "adapter:v3"


def test_cache_salt_extends_the_configured_extra_key(make_settings: MakeSettings) -> None:
    call = build(make_settings(extra_key="adapter:v3"), renderer_body(cache_salt="salt"))
    assert call.payload["extra_key"] == "adapter:v3:salt"


def test_cache_salt_alone_becomes_the_extra_key(make_settings: MakeSettings) -> None:
    assert build(make_settings(), renderer_body(cache_salt="salt")).payload["extra_key"] == "salt"


def test_priority_comes_from_settings(make_settings: MakeSettings) -> None:
    assert build(make_settings(priority=3)).payload["priority"] == 3


def test_request_priority_wins_over_settings(make_settings: MakeSettings) -> None:
    assert build(make_settings(priority=3), renderer_body(priority=-1)).payload["priority"] == -1


def test_no_optional_fields_when_unset(make_settings: MakeSettings) -> None:
    payload = build(make_settings()).payload
    assert not {"lora_path", "extra_key", "priority"} & payload.keys()


@pytest.mark.parametrize("policy", [RoutingPolicy.CONSISTENT_HASHING, RoutingPolicy.MANUAL])
def test_key_based_routing_sends_the_session_id_as_routing_key(
    policy: RoutingPolicy, make_settings: MakeSettings
) -> None:
    call = build(make_settings(routing=policy), session_id="s" * 32)
    assert call.headers == {"X-SMG-Routing-Key": "s" * 32}


def test_routing_header_name_is_configurable(make_settings: MakeSettings) -> None:
    call = build(make_settings(routing="manual", routing_header="X-Route"), session_id="abc")
    assert call.headers == {"X-Route": "abc"}


def test_no_routing_header_without_a_key_based_policy(make_settings: MakeSettings) -> None:
    assert build(make_settings(), session_id="abc").headers == {}


def test_no_routing_header_without_a_session(make_settings: MakeSettings) -> None:
    assert build(make_settings(routing="manual"), session_id=None).headers == {}


@pytest.mark.parametrize(
    "key", ["features", "multi_modal_data", "image_data", "video_data", "audio_data"]
)
def test_multimodal_input_is_rejected(key: str, make_settings: MakeSettings) -> None:
    with pytest.raises(MultimodalNotSupported, match=f"multimodal input \\({key}\\)"):
        build(make_settings(), renderer_body(**{key: {"image": ["..."]}}))


def test_empty_multimodal_fields_are_harmless(make_settings: MakeSettings) -> None:
    assert build(make_settings(), renderer_body(features=None)).payload["input_ids"]


@pytest.mark.parametrize("token_ids", [None, [], "1 2 3", [1, "2"], [1, -2], [True]])
def test_prompt_ids_must_be_a_non_empty_list_of_token_ids(
    token_ids: Any, make_settings: MakeSettings
) -> None:
    with pytest.raises(InvalidPrompt, match="token_ids"):
        build(make_settings(), renderer_body(token_ids=token_ids))


def test_first_prompt_over_the_prompt_limit_is_overlong(make_settings: MakeSettings) -> None:
    settings = make_settings(max_prompt_len=3)
    with pytest.raises(OverlongPromptError, match="first prompt of the rollout has 4 tokens"):
        build(settings, first_prompt=True)


def test_later_prompts_ignore_the_prompt_limit(make_settings: MakeSettings) -> None:
    settings = make_settings(max_prompt_len=3)
    assert build(settings, first_prompt=False).payload["input_ids"]


def test_prompt_exactly_at_the_prompt_limit_is_accepted(make_settings: MakeSettings) -> None:
    assert build(make_settings(max_prompt_len=4), first_prompt=True).payload["input_ids"]


def test_prompt_leaving_no_room_is_overlong_on_any_turn(make_settings: MakeSettings) -> None:
    settings = make_settings(context_len=4, max_prompt_len=None)
    with pytest.raises(OverlongPromptError, match="no room to generate"):
        build(settings, first_prompt=False)


def test_bridged_turns_are_known_continuations() -> None:
    body = renderer_body()
    body["sampling_params"]["routed_experts_prompt_start"] = 41
    assert is_known_continuation(body)
    assert not is_known_continuation(renderer_body())


def test_unknown_top_level_keys_are_reported_not_sent(make_settings: MakeSettings) -> None:
    call = build(make_settings(), renderer_body(content_parts=[{"type": "text"}]))
    assert "content_parts" not in call.payload
    assert "body.content_parts" in call.dropped_keys


def test_body_must_be_an_object(make_settings: MakeSettings) -> None:
    with pytest.raises(RequestRejected, match="JSON object"):
        build(make_settings(), [1, 2, 3])  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "value"), [("cache_salt", 3), ("priority", "high")])
def test_mistyped_optional_fields_are_rejected(
    key: str, value: Any, make_settings: MakeSettings
) -> None:
    with pytest.raises(RequestRejected, match=key):
        build(make_settings(), renderer_body(**{key: value}))
