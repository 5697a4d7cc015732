"""What ``/generate`` refuses, with SGLang's status codes and error body shapes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import EngineConfig, LoopbackEngine, ModelProfile, serve_engine
from tests.engine.engine_support import QWEN, ServeFactory

PROMPT = [9707, 11, 1879, 0]


def post(client: httpx.Client, body: Any) -> httpx.Response:
    return client.post("/generate", json=body)


def assert_value_error(response: httpx.Response, *phrases: str) -> None:
    """SGLang's handler-side ValueError: 400 ``{"error": {"message": ...}}``."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert list(body) == ["error"] and list(body["error"]) == ["message"]
    message = body["error"]["message"]
    for phrase in phrases:
        assert phrase in message, message


def assert_contract_error(response: httpx.Response, *phrases: str) -> None:
    """The 0.5.23 schema gate: 400 ``{"error": "<text>"}``."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert list(body) == ["error"] and isinstance(body["error"], str)
    for phrase in phrases:
        assert phrase in body["error"], body["error"]


def assert_parse_error(response: httpx.Response, *phrases: str) -> None:
    """FastAPI's remapped request-validation error."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert set(body) == {"object", "message", "type", "param", "code"}
    assert (body["object"], body["type"], body["param"], body["code"]) == (
        "error",
        "Bad Request",
        None,
        400,
    )
    for phrase in phrases:
        assert phrase in body["message"], body["message"]


@pytest.mark.parametrize(
    ("sampling", "phrases"),
    [
        ({"temperature": -0.5}, ["temperature"]),
        ({"temperature": float("inf")}, ["temperature"]),
        ({"top_p": 0.0}, ["top_p"]),
        ({"top_p": 1.5}, ["top_p"]),
        ({"min_p": 1.5}, ["min_p"]),
        ({"min_p": -0.1}, ["min_p"]),
        ({"top_k": 0}, ["top_k"]),
        ({"top_k": -2}, ["top_k"]),
        ({"frequency_penalty": 2.5}, ["frequency_penalty"]),
        ({"presence_penalty": -2.5}, ["presence_penalty"]),
        ({"repetition_penalty": 0.0}, ["repetition_penalty"]),
        ({"repetition_penalty": 2.5}, ["repetition_penalty"]),
        ({"min_new_tokens": -1}, ["min_new_tokens"]),
        ({"max_new_tokens": -1}, ["max_new_tokens"]),
        ({"max_new_tokens": 2, "min_new_tokens": 3}, ["min_new_tokens", "max_new_tokens"]),
        ({"logit_bias": {"999999999": 1.0}}, ["logit_bias"]),
        ({"sampling_seed": 2**63}, ["sampling_seed"]),
        ({"regex": "a+", "json_schema": "{}"}, ["json_schema", "regex"]),
        ({"ebnf": "root ::= 'a'", "structural_tag": "{}"}, ["ebnf", "structural_tag"]),
        ({"beam_width": 0}, ["beam_width"]),
        ({"stop": ["x"] * 33}, ["stop", "32"]),
        ({"stop_regex": ["a" * 300]}, ["stop_regex", "256"]),
    ],
)
def test_each_sampling_range_rule_is_a_400_naming_the_parameter(
    client: httpx.Client, sampling: dict[str, Any], phrases: list[str]
) -> None:
    body = {"input_ids": PROMPT, "sampling_params": sampling}
    if sampling.get("temperature") == float("inf"):
        # JSON has no infinity; a huge number overflows to it when parsed as a float.
        response = client.post(
            "/generate",
            content=b'{"input_ids": [9707], "sampling_params": {"temperature": 1e999}}',
            headers={"content-type": "application/json"},
        )
    else:
        response = post(client, body)
    assert_value_error(response, *phrases)


@pytest.mark.parametrize(
    "sampling",
    [
        {"temperature": 0},
        {"temperature": 0.0000001, "top_k": 50},
        {"top_k": -1},
        {"top_k": None, "temperature": None, "top_p": None},
        {"n": 0},
        {"min_new_tokens": 2, "max_new_tokens": 2},
        {"max_new_tokens": None},
        {"regex": "", "json_schema": "{}"},
    ],
)
def test_values_sglang_accepts_are_served(client: httpx.Client, sampling: dict[str, Any]) -> None:
    response = post(client, {"input_ids": PROMPT, "sampling_params": sampling})
    assert response.status_code == 200, response.text


def test_an_unknown_sampling_key_is_a_400_from_the_schema_gate(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "sampling_params": {"max_tokens": 8}})
    assert_contract_error(response, "max_tokens")


def test_an_unknown_sampling_key_crashes_the_handler_under_0_5_15(serve: ServeFactory) -> None:
    with serve(sglang_version="0.5.15") as running, httpx.Client(base_url=running.base_url) as http:
        response = post(http, {"input_ids": PROMPT, "sampling_params": {"max_tokens": 8}})
    assert response.status_code == 500
    assert response.text == "Internal Server Error"


def test_an_unchecked_0_5_15_sampling_seed_is_accepted(serve: ServeFactory) -> None:
    with serve(sglang_version="0.5.15") as running, httpx.Client(base_url=running.base_url) as http:
        response = post(http, {"input_ids": PROMPT, "sampling_params": {"sampling_seed": "abc"}})
    assert response.status_code == 200


def test_null_stop_token_ids_are_dropped_under_0_5_15_and_refused_under_0_5_23(
    serve: ServeFactory, client: httpx.Client
) -> None:
    body = {"input_ids": PROMPT, "sampling_params": {"stop_token_ids": [None, 151645]}}
    with serve(sglang_version="0.5.15") as running, httpx.Client(base_url=running.base_url) as http:
        assert post(http, body).status_code == 200
    assert_contract_error(post(client, body), "null")


def test_unknown_top_level_keys_are_ignored(client: httpx.Client) -> None:
    response = post(
        client, {"input_ids": PROMPT, "model": "anything", "return_routed_experts": False}
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("body", "phrase"),
    [
        ({"input_ids": PROMPT, "sampling_params": {"temperature": "0.5"}}, "temperature"),
        ({"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 1.5}}, "max_new_tokens"),
        ({"input_ids": PROMPT, "return_logprob": 1}, "return_logprob"),
        ({"input_ids": PROMPT, "return_prompt_token_ids": None}, "return_prompt_token_ids"),
        ({"input_ids": PROMPT, "sampling_params": {"ignore_eos": "yes"}}, "ignore_eos"),
    ],
)
def test_ill_typed_fields_are_refused_by_the_schema_gate(
    client: httpx.Client, body: dict[str, Any], phrase: str
) -> None:
    response = post(client, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert isinstance(error, str)


@pytest.mark.parametrize(
    ("raw", "phrase"),
    [
        (b"{not json", "JSON"),
        (b"", "empty"),
        (b"[1, 2, 3]", "object"),
        (b'{"input_ids": [1, "a"]}', "input_ids"),
        (b'{"input_ids": "hello"}', "input_ids"),
        (b'{"input_ids": [1], "sampling_params": 5}', "sampling_params"),
        (b'{"input_ids": [1], "rid": 5}', "rid"),
    ],
)
def test_bodies_that_do_not_parse_get_the_request_validation_error(
    client: httpx.Client, raw: bytes, phrase: str
) -> None:
    response = client.post("/generate", content=raw, headers={"content-type": "application/json"})
    assert_parse_error(response, phrase)


def test_empty_input_ids_are_refused(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": []}), "input_ids")


def test_a_batch_with_an_empty_prompt_is_refused(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": [PROMPT, []]}), "input_ids")


def test_a_request_without_a_prompt_is_refused(client: httpx.Client) -> None:
    assert_value_error(post(client, {"sampling_params": {}}), "input_ids", "text")


def test_token_ids_outside_the_vocabulary_are_refused(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": [1, 10**9]}), "input_ids", str(10**9))


def test_a_prompt_filling_the_context_is_refused_as_too_long(serve: ServeFactory) -> None:
    with serve(context_length=32) as running, httpx.Client(base_url=running.base_url) as http:
        response = post(http, {"input_ids": [9707] * 32})
    assert_value_error(response, "context length", "32")


def test_a_prompt_plus_max_new_tokens_over_the_context_is_refused(serve: ServeFactory) -> None:
    with serve(context_length=32) as running, httpx.Client(base_url=running.base_url) as http:
        response = post(http, {"input_ids": [9707] * 20, "sampling_params": {"max_new_tokens": 13}})
        fits = post(http, {"input_ids": [9707] * 20, "sampling_params": {"max_new_tokens": 12}})
    assert_value_error(response, "maximum context length", "max_new_tokens")
    assert fits.status_code == 200


def test_logprob_start_len_past_the_prompt_is_refused(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "return_logprob": True, "logprob_start_len": 5})
    assert_value_error(response, "logprob_start_len")


def test_logprob_start_len_at_the_prompt_end_is_accepted(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "return_logprob": True, "logprob_start_len": 4})
    assert response.status_code == 200
    assert response.json()["meta_info"]["input_token_logprobs"] == []


def test_a_rid_list_must_match_the_batch(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": [PROMPT, PROMPT], "rid": ["a"]}), "rid")


def test_a_batch_may_not_repeat_a_rid(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": [PROMPT, PROMPT], "rid": ["a", "a"]}), "rid", "a")


def test_sampling_params_of_a_batch_must_agree_on_n(client: httpx.Client) -> None:
    body = {"input_ids": [PROMPT, PROMPT], "sampling_params": [{"n": 1}, {"n": 2}]}
    assert_value_error(post(client, body), "n")


def test_list_parameters_are_refused_with_n_above_one(client: httpx.Client) -> None:
    body = {"input_ids": [PROMPT], "sampling_params": {"n": 2}, "return_logprob": [True]}
    assert_value_error(post(client, body), "return_logprob", "n")


def test_a_single_request_needs_a_string_extra_key(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": PROMPT, "extra_key": ["a"]}), "extra_key")


def test_lora_path_without_lora_enabled_is_refused(client: httpx.Client) -> None:
    assert_value_error(
        post(client, {"input_ids": PROMPT, "lora_path": "adapter-a"}), "LoRA", "adapter-a"
    )


def test_an_adapter_that_is_not_loaded_is_refused(serve: ServeFactory) -> None:
    with serve(lora_adapters=("a",)) as running, httpx.Client(base_url=running.base_url) as http:
        response = post(http, {"input_ids": PROMPT, "lora_path": "b"})
    assert_value_error(response, "b", "not loaded")


def test_streaming_is_refused_clearly(client: httpx.Client) -> None:
    assert_value_error(post(client, {"input_ids": PROMPT, "stream": True}), "stream")


def test_hidden_states_are_refused_as_sglang_does_without_its_flag(client: httpx.Client) -> None:
    assert_value_error(
        post(client, {"input_ids": PROMPT, "return_hidden_states": True}), "return_hidden_states"
    )


def test_a_refused_request_changes_nothing(serve: ServeFactory) -> None:
    with serve() as running, httpx.Client(base_url=running.base_url) as http:
        post(http, {"input_ids": PROMPT})
        before = running.engine.stats()
        assert post(http, {"input_ids": PROMPT, "sampling_params": {"top_p": 0}}).status_code == 400
        after = running.engine.stats()
        again = post(http, {"input_ids": PROMPT}).json()
    assert (after.items, after.prompt_tokens) == (before.items, before.prompt_tokens)
    assert after.rejected_calls == before.rejected_calls + 1
    assert again["meta_info"]["cached_tokens"] == len(PROMPT) - 1


def test_by_default_the_engine_is_the_0_5_16_fork_that_500s_on_an_unknown_sampling_key(
    qwen: ModelProfile,
) -> None:
    # Production Miles runs a fork of SGLang 0.5.16: no schema gate, an uncaught error.
    engine = LoopbackEngine(EngineConfig(model=QWEN), model=qwen)
    with serve_engine(engine=engine) as running:
        response = httpx.post(
            f"{running.base_url}/generate",
            json={"input_ids": [9707, 1], "sampling_params": {"no_such_key": 1}},
            timeout=30,
        )
    assert engine.config.sglang_version == "0.5.16-fork"
    assert (response.status_code, response.text) == (500, "Internal Server Error")


def test_the_0_5_16_fork_sends_no_weight_versions(qwen: ModelProfile) -> None:
    engine = LoopbackEngine(EngineConfig(model=QWEN, sglang_version="0.5.16-fork"), model=qwen)
    with serve_engine(engine=engine) as running:
        out = httpx.post(
            f"{running.base_url}/generate",
            json={"input_ids": [9707, 1], "sampling_params": {"max_new_tokens": 2}},
            timeout=30,
        ).json()
    assert "weight_versions" not in out["meta_info"]
