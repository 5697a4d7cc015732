"""Sampling translation: renames, whitelist, settings-owned keys, stop merging, token limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from miles_verifiers.engine.errors import InvalidSamplingParams, PromptTooLongError
from miles_verifiers.engine.limits import EngineLimits
from miles_verifiers.engine.sampling import (
    RENAMED_KEYS,
    SGLANG_SAMPLING_KEYS,
    merge_stop_token_ids,
    new_token_budget,
    translate_sampling,
)
from miles_verifiers.engine.settings import TransportSettings

MakeSettings = Callable[..., TransportSettings]

# What renderers 0.1.10 + verifiers 0.2.0 put on the wire (verifiers-v1.md §3.2, observed), on a
# bridged turn.
OBSERVED_BRIDGED = {
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_tokens": 256,
    "top_k": -1,
    "min_tokens": 0,
    "stop_token_ids": [2],
    "logprobs": 1,
    "skip_special_tokens": False,
    "routed_experts_prompt_start": 41,
}

# SGLang 0.5.15 SamplingParams API fields, read from sglang/srt/sampling/sampling_params.py.
SGLANG_0_5_15_FIELDS = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k",
    "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n",
    "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "custom_params", "stream_interval",
    "logit_bias", "sampling_seed",
}  # fmt: skip


def test_accepted_keys_are_exactly_sglangs_sampling_fields() -> None:
    assert SGLANG_SAMPLING_KEYS == SGLANG_0_5_15_FIELDS


def test_openai_names_are_renamed_to_sglang_names(make_settings: MakeSettings) -> None:
    out = translate_sampling(
        {"max_tokens": 10, "min_tokens": 2, "seed": 7}, settings=make_settings(), prompt_len=5
    )
    assert out.params["max_new_tokens"] == 10
    assert out.params["min_new_tokens"] == 2
    assert out.params["sampling_seed"] == 7
    assert not {"max_tokens", "min_tokens", "seed"} & out.params.keys()


def test_max_completion_tokens_is_an_alias_of_max_tokens(make_settings: MakeSettings) -> None:
    out = translate_sampling({"max_completion_tokens": 9}, settings=make_settings(), prompt_len=5)
    assert out.params["max_new_tokens"] == 9


def test_every_rename_targets_an_accepted_key() -> None:
    assert set(RENAMED_KEYS.values()) <= SGLANG_SAMPLING_KEYS


def test_routed_experts_prompt_start_is_never_forwarded(make_settings: MakeSettings) -> None:
    out = translate_sampling(OBSERVED_BRIDGED, settings=make_settings(), prompt_len=50)
    assert "routed_experts_prompt_start" not in out.params
    assert "routed_experts_prompt_start" in out.dropped


def test_observed_bridged_request_translates_to_accepted_keys_only(
    make_settings: MakeSettings,
) -> None:
    out = translate_sampling(OBSERVED_BRIDGED, settings=make_settings(), prompt_len=50)
    assert out.params == {
        "repetition_penalty": 1.0,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_new_tokens": 64,
        "top_k": -1,
        "min_new_tokens": 0,
        "stop_token_ids": [2],
        "n": 1,
        "no_stop_trim": True,
        "skip_special_tokens": False,
    }
    assert set(out.dropped) == {"logprobs", "routed_experts_prompt_start"}


@pytest.mark.parametrize("key", ["reasoning_effort", "logprobs", "top_logprobs", "best_of", "foo"])
def test_keys_sglang_does_not_accept_are_dropped_and_reported(
    key: str, make_settings: MakeSettings
) -> None:
    out = translate_sampling({key: 1}, settings=make_settings(), prompt_len=5)
    assert key not in out.params
    assert out.dropped == (key,)


def test_none_values_are_left_out_silently(make_settings: MakeSettings) -> None:
    out = translate_sampling(
        {"temperature": None, "reasoning_effort": None}, settings=make_settings(), prompt_len=5
    )
    assert "temperature" not in out.params
    assert out.dropped == ()


def test_n_is_always_one(make_settings: MakeSettings) -> None:
    out = translate_sampling({"n": 4}, settings=make_settings(), prompt_len=5)
    assert out.params["n"] == 1
    assert out.overridden == ("n",)


def test_skip_special_tokens_and_no_stop_trim_come_from_settings(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(skip_special_tokens=True, no_stop_trim=False)
    out = translate_sampling(
        {"skip_special_tokens": False, "no_stop_trim": True}, settings=settings, prompt_len=5
    )
    assert out.params["skip_special_tokens"] is True
    assert out.params["no_stop_trim"] is False
    assert set(out.overridden) == {"skip_special_tokens", "no_stop_trim"}


def test_a_caller_value_equal_to_the_setting_is_not_reported(make_settings: MakeSettings) -> None:
    out = translate_sampling({"skip_special_tokens": False}, settings=make_settings(), prompt_len=5)
    assert out.overridden == ()


def test_renderer_stop_ids_are_merged_with_configured_ones(make_settings: MakeSettings) -> None:
    settings = make_settings(stop_token_ids=(7, 2, 9))
    out = translate_sampling({"stop_token_ids": [2, 5]}, settings=settings, prompt_len=5)
    assert out.params["stop_token_ids"] == [2, 5, 7, 9]


def test_no_stop_ids_at_all_sends_none(make_settings: MakeSettings) -> None:
    out = translate_sampling({}, settings=make_settings(), prompt_len=5)
    assert "stop_token_ids" not in out.params


@pytest.mark.parametrize("bad", [["2"], [True], [-1], "2", {"a": 1}])
def test_malformed_stop_ids_are_rejected(bad: Any) -> None:
    with pytest.raises(InvalidSamplingParams, match="stop_token_ids"):
        merge_stop_token_ids(bad, ())


def test_configured_stop_strings_apply_when_the_request_has_none(
    make_settings: MakeSettings,
) -> None:
    out = translate_sampling({}, settings=make_settings(stop=("</answer>",)), prompt_len=5)
    assert out.params["stop"] == ["</answer>"]


def test_a_request_stop_string_wins_over_configured_ones(make_settings: MakeSettings) -> None:
    out = translate_sampling(
        {"stop": ["END"]}, settings=make_settings(stop=("</answer>",)), prompt_len=5
    )
    assert out.params["stop"] == ["END"]


def test_conflicting_alias_and_native_names_are_an_error(make_settings: MakeSettings) -> None:
    with pytest.raises(InvalidSamplingParams, match="'max_tokens'=10 and 'max_new_tokens'=20"):
        translate_sampling(
            {"max_tokens": 10, "max_new_tokens": 20}, settings=make_settings(), prompt_len=5
        )


def test_agreeing_alias_and_native_names_are_fine(make_settings: MakeSettings) -> None:
    out = translate_sampling(
        {"max_tokens": 10, "max_new_tokens": 10}, settings=make_settings(), prompt_len=5
    )
    assert out.params["max_new_tokens"] == 10


def test_missing_max_tokens_uses_the_response_limit(make_settings: MakeSettings) -> None:
    out = translate_sampling({}, settings=make_settings(max_response_len=33), prompt_len=5)
    assert out.params["max_new_tokens"] == 33


def test_max_tokens_is_capped_by_the_response_limit(make_settings: MakeSettings) -> None:
    out = translate_sampling(
        {"max_tokens": 1000}, settings=make_settings(max_response_len=33), prompt_len=5
    )
    assert out.params["max_new_tokens"] == 33


def test_max_tokens_is_capped_by_the_room_left_in_the_context(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(max_response_len=64, context_len=100)
    out = translate_sampling({"max_tokens": 50}, settings=settings, prompt_len=90)
    assert out.params["max_new_tokens"] == 10


def test_min_tokens_is_clamped_to_the_clamped_max(make_settings: MakeSettings) -> None:
    settings = make_settings(max_response_len=64, context_len=100)
    out = translate_sampling({"min_tokens": 30}, settings=settings, prompt_len=90)
    assert out.params["min_new_tokens"] == 10


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8", True])
def test_max_tokens_must_be_a_positive_integer(bad: Any, make_settings: MakeSettings) -> None:
    with pytest.raises(InvalidSamplingParams, match="max_tokens"):
        translate_sampling({"max_tokens": bad}, settings=make_settings(), prompt_len=5)


def test_negative_min_tokens_is_rejected(make_settings: MakeSettings) -> None:
    with pytest.raises(InvalidSamplingParams, match="min_tokens"):
        translate_sampling({"min_tokens": -1}, settings=make_settings(), prompt_len=5)


@pytest.mark.parametrize("prompt_len", [100, 101, 5000])
def test_a_prompt_filling_the_context_is_overlong(prompt_len: int) -> None:
    with pytest.raises(PromptTooLongError, match="no room to generate"):
        new_token_budget(None, prompt_len=prompt_len, max_response_len=8, context_len=100)


def test_one_token_of_room_is_enough() -> None:
    assert new_token_budget(None, prompt_len=99, max_response_len=8, context_len=100) == 1


def test_without_a_context_limit_only_the_response_limit_applies() -> None:
    assert new_token_budget(None, prompt_len=10**6, max_response_len=8, context_len=None) == 8


def test_new_tokens_are_capped_at_what_the_engine_will_generate() -> None:
    # max_req_input_len 506 means max_req_len 511: a 500-token prompt gets 511 - 500 - 1 = 10.
    limits = EngineLimits(max_req_input_len=506, context_length=512)
    budget = new_token_budget(
        None, prompt_len=500, max_response_len=64, context_len=512, engine_limits=limits
    )
    assert budget == 10


def test_a_prompt_at_the_engines_input_limit_is_overlong() -> None:
    limits = EngineLimits(max_req_input_len=506, context_length=512)
    with pytest.raises(PromptTooLongError, match="max_req_input_len"):
        new_token_budget(
            None, prompt_len=506, max_response_len=64, context_len=512, engine_limits=limits
        )


def test_sampling_params_must_be_an_object(make_settings: MakeSettings) -> None:
    with pytest.raises(InvalidSamplingParams, match="must be an object"):
        pairs: Any = [("temperature", 1.0)]
        translate_sampling(pairs, settings=make_settings(), prompt_len=5)


# --- properties -----------------------------------------------------------------------------

_values = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3)
)
_keys = st.one_of(
    st.sampled_from(sorted(SGLANG_SAMPLING_KEYS | set(RENAMED_KEYS) | set(OBSERVED_BRIDGED))),
    st.text(min_size=1, max_size=12),
)


@hypothesis_settings(deadline=None)
@given(raw=st.dictionaries(_keys, _values, max_size=12))
def test_only_accepted_keys_are_ever_forwarded(raw: dict[str, Any]) -> None:
    settings = TransportSettings(engine_url="http://h:1", max_response_len=16, context_len=64)
    try:
        out = translate_sampling(raw, settings=settings, prompt_len=8)
    except InvalidSamplingParams:
        return
    assert set(out.params) <= SGLANG_SAMPLING_KEYS
    assert set(raw) - {k for k, v in raw.items() if v is None} <= (
        set(out.params)
        | set(out.dropped)
        | set(out.overridden)
        | set(RENAMED_KEYS)
        | {"stop_token_ids", "n", "skip_special_tokens", "no_stop_trim"}
    )


@hypothesis_settings(deadline=None)
@given(
    requested=st.none() | st.integers(1, 10_000),
    minimum=st.none() | st.integers(0, 10_000),
    prompt_len=st.integers(1, 5_000),
    max_response_len=st.integers(1, 4_096),
    context_len=st.none() | st.integers(2, 8_192),
)
def test_token_limits_always_hold(
    requested: int | None,
    minimum: int | None,
    prompt_len: int,
    max_response_len: int,
    context_len: int | None,
) -> None:
    settings = TransportSettings(
        engine_url="http://h:1", max_response_len=max_response_len, context_len=context_len
    )
    raw = {"max_tokens": requested, "min_tokens": minimum}
    if context_len is not None and prompt_len >= context_len:
        with pytest.raises(PromptTooLongError):
            translate_sampling(raw, settings=settings, prompt_len=prompt_len)
        return
    params = translate_sampling(raw, settings=settings, prompt_len=prompt_len).params
    budget = params["max_new_tokens"]
    assert 1 <= budget <= max_response_len
    if requested is not None:
        assert budget <= requested
    if context_len is not None:
        assert prompt_len + budget <= context_len
    if minimum is not None:
        assert 0 <= params["min_new_tokens"] <= budget
