"""TransportSettings: validation with clear messages, lazy address, retry schedule."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from miles_verifiers.engine.settings import (
    EngineAddressError,
    RetryPolicy,
    RoutingPolicy,
    TimeoutPolicy,
    TransportSettings,
    resolve_engine_url,
)


def test_minimal_settings_need_only_url_and_response_limit() -> None:
    settings = TransportSettings(engine_url="http://127.0.0.1:30000", max_response_len=128)
    assert settings.context_len is None
    assert settings.no_stop_trim is True
    assert settings.skip_special_tokens is False
    assert settings.routing is RoutingPolicy.NONE


def test_response_limit_is_required() -> None:
    with pytest.raises(ValidationError, match="max_response_len"):
        TransportSettings(engine_url="http://127.0.0.1:30000")  # type: ignore[call-arg]


@pytest.mark.parametrize("field", ["max_response_len", "context_len", "max_prompt_len"])
def test_limits_must_be_positive(field: str) -> None:
    values = {"engine_url": "http://h:1", "max_response_len": 8, field: 0}
    with pytest.raises(ValidationError, match=field):
        TransportSettings(**values)


def test_prompt_limit_must_leave_room_in_the_context() -> None:
    with pytest.raises(
        ValidationError, match=r"max_prompt_len=100 must be at most context_len - 1 = 99"
    ):
        TransportSettings(
            engine_url="http://h:1", max_response_len=8, context_len=100, max_prompt_len=100
        )


@pytest.mark.parametrize("url", ["ftp://h:1", "not a url", "http://", "http://h:1/?x=1"])
def test_static_url_must_be_an_http_base_url(url: str) -> None:
    with pytest.raises(ValidationError, match="engine_url"):
        TransportSettings(engine_url=url, max_response_len=8)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="max_tokens"):
        TransportSettings(engine_url="http://h:1", max_response_len=8, max_tokens=3)


def test_settings_are_frozen() -> None:
    settings = TransportSettings(engine_url="http://h:1", max_response_len=8)
    with pytest.raises(ValidationError):
        settings.max_response_len = 9  # type: ignore[misc]


def test_rid_prefix_may_not_contain_a_dash() -> None:
    with pytest.raises(ValidationError, match="no '-'"):
        TransportSettings(engine_url="http://h:1", max_response_len=8, rid_prefix="train-1")


def test_empty_lora_path_is_refused() -> None:
    with pytest.raises(ValidationError, match="lora_path"):
        TransportSettings(engine_url="http://h:1", max_response_len=8, lora_path="")


def test_more_than_32_stop_strings_are_refused() -> None:
    with pytest.raises(ValidationError, match="at most 32 stop strings"):
        TransportSettings(
            engine_url="http://h:1", max_response_len=8, stop=tuple(f"s{i}" for i in range(33))
        )


def test_callable_url_is_evaluated_at_every_resolution() -> None:
    address = {"url": "http://first:1"}
    settings = TransportSettings(engine_url=lambda: address["url"], max_response_len=8)
    assert resolve_engine_url(settings) == "http://first:1"
    address["url"] = "http://second:2/"
    assert resolve_engine_url(settings) == "http://second:2"


def test_callable_url_failure_names_the_router_address() -> None:
    def not_ready() -> str:
        raise KeyError("sglang_router_ip")

    settings = TransportSettings(engine_url=not_ready, max_response_len=8)
    with pytest.raises(EngineAddressError, match="router address is probably not set"):
        resolve_engine_url(settings)


def test_callable_url_returning_garbage_is_an_address_error() -> None:
    settings = TransportSettings(engine_url=lambda: "http://None:None", max_response_len=8)
    with pytest.raises(
        EngineAddressError, match=r"engine_url 'http://None:None' is not a valid URL"
    ):
        resolve_engine_url(settings)


def test_retry_delays_double_and_are_capped() -> None:
    policy = RetryPolicy(max_retries=5, initial_backoff_s=0.5, max_backoff_s=3.0)
    assert policy.delays() == (0.5, 1.0, 2.0, 3.0, 3.0)


def test_zero_retries_means_no_delays() -> None:
    assert RetryPolicy(max_retries=0).delays() == ()


def test_backoff_cap_below_initial_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_backoff_s"):
        RetryPolicy(initial_backoff_s=2.0, max_backoff_s=1.0)


def test_timeouts_must_be_finite() -> None:
    with pytest.raises(ValidationError, match="finite"):
        TimeoutPolicy(read_s=float("inf"))


def test_timeouts_map_to_every_httpx_phase() -> None:
    timeout = TimeoutPolicy(connect_s=1, read_s=2, write_s=3, pool_s=4).to_httpx()
    assert timeout == httpx.Timeout(connect=1, read=2, write=3, pool=4)
