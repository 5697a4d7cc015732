"""The ``/generate`` contract gate: this project's tables against SGLang's own schema."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import EngineConfig, LoopbackEngine, ModelProfile, serve_engine
from miles_verifiers_testkit.engine.schema_gate import (
    ContractViolation,
    PureGate,
    SGLangGate,
    default_gate,
    gate_status,
    load_sglang_api_types,
    sglang_gate,
)
from tests.engine.engine_support import QWEN, SKIP_WITHOUT_SGLANG

MILES_PAYLOAD = {
    "input_ids": [1, 2, 3],
    "sampling_params": {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_new_tokens": 64,
        "stop": None,
        "stop_token_ids": [151645],
        "skip_special_tokens": False,
        "no_stop_trim": True,
        "spaces_between_special_tokens": False,
        "sampling_seed": 42,
    },
    "return_logprob": True,
    "logprob_start_len": -1,
    "top_logprobs_num": 2,
    "lora_path": "adapter",
    "rid": "r-1",
    "extra_key": "adapter:v3",
    "priority": 0,
    "return_routed_experts": False,
}

# Bodies both gates must judge alike: (body, accepted?).
CORPUS: list[tuple[Any, bool]] = [
    (MILES_PAYLOAD, True),
    ({"input_ids": [[1, 2], [3]], "sampling_params": [{"n": 1}, {"n": 1}]}, True),
    ({"text": ["a", "b"], "rid": ["x", "y"], "return_logprob": [True, False]}, True),
    (
        {"input_ids": [1], "sampling_params": {"top_k": 0}},
        True,
    ),  # a verify() matter, not the gate's
    ({"sampling_params": {}}, True),  # no prompt is a ValueError later, not a contract violation
    ({"input_ids": [1], "unknown_top_level": {"anything": [1, None]}}, True),
    ({"input_ids": [1], "sampling_params": {"temperature": 1}}, True),  # an int where a float goes
    ({"input_ids": [1], "sampling_params": {"logit_bias": {"5": 1.5}}}, True),
    ({"input_ids": [1], "sampling_params": {"watermark": {"enabled": True, "key": "k"}}}, True),
    ({"input_ids": [1], "lora_path": ["a", None]}, True),
    ({"input_ids": [1], "sampling_params": {"foo": 1}}, False),
    ({"input_ids": [1], "sampling_params": [{"max_new_tokens": 1}, {"bar": 2}]}, False),
    ({"input_ids": [1], "sampling_params": {"temperature": "0.5"}}, False),
    ({"input_ids": [1], "sampling_params": {"max_new_tokens": 1.5}}, False),
    ({"input_ids": [1], "sampling_params": {"stop_token_ids": [None]}}, False),
    ({"input_ids": [1], "sampling_params": {"sampling_seed": "7"}}, False),
    ({"input_ids": [1], "sampling_params": {"ignore_eos": 1}}, False),
    ({"input_ids": [1], "sampling_params": {"stop": 5}}, False),
    ({"input_ids": [1], "sampling_params": {"watermark": {"strength": 1}}}, False),
    ({"input_ids": [1, "a"]}, False),
    ({"input_ids": [1], "return_logprob": 1}, False),
    ({"input_ids": [1], "return_prompt_token_ids": None}, False),
    ({"input_ids": [1], "routed_experts_start_len": None}, False),
    ({"input_ids": [1], "rid": 5}, False),
    ({"input_ids": [1], "extra_key": 3}, False),
    ({"input_ids": [1], "max_thinking_tokens": -1}, False),
    ({"input_ids": [1], "custom_labels": {"a": 1}}, False),
    ([{"input_ids": [1]}], False),
]


def _accepts(gate: Any, body: Any) -> bool:
    try:
        gate.check(body)
    except ContractViolation:
        return False
    return True


@pytest.mark.parametrize(("body", "accepted"), CORPUS)
def test_the_pure_gate_judges_the_corpus_as_sglang_0_5_23_does(body: Any, accepted: bool) -> None:
    assert _accepts(PureGate("0.5.23"), body) is accepted


@pytest.mark.parametrize(("body", "accepted"), CORPUS)
def test_sglangs_own_schema_judges_the_corpus_as_recorded(body: Any, accepted: bool) -> None:
    gate = sglang_gate()
    if gate is None:
        pytest.skip(SKIP_WITHOUT_SGLANG)
    assert _accepts(gate, body) is accepted


def test_the_pure_gate_names_the_unknown_sampling_key() -> None:
    with pytest.raises(ContractViolation, match="foo") as caught:
        PureGate("0.5.23").check({"input_ids": [1], "sampling_params": {"foo": 1}})
    assert caught.value.in_sampling_params


def test_0_5_15_knows_no_0_5_23_sampling_keys() -> None:
    body = {"input_ids": [1], "sampling_params": {"beam_width": 2}}
    assert _accepts(PureGate("0.5.23"), body)
    assert not _accepts(PureGate("0.5.15"), body)


def test_loading_sglangs_schema_does_not_import_the_sglang_package() -> None:
    if load_sglang_api_types() is None:
        pytest.skip(SKIP_WITHOUT_SGLANG)
    assert "sglang" not in sys.modules


def test_the_gate_status_says_whether_the_cross_check_runs() -> None:
    status = gate_status()
    if sglang_gate() is None:
        assert "skipped" in status and "pip install --no-deps sglang" in status
    else:
        assert "sglang" in status and "api_types" in status


def test_a_0_5_23_engine_uses_sglangs_schema_when_installed() -> None:
    gate = default_gate("0.5.23")
    assert isinstance(gate, SGLangGate if sglang_gate() is not None else PureGate)
    assert isinstance(default_gate("0.5.15"), PureGate)


@pytest.fixture(scope="module")
def pure_gate_engine(qwen: ModelProfile) -> Any:
    engine = LoopbackEngine(
        EngineConfig(model=QWEN, sglang_version="0.5.23"), model=qwen, gate=PureGate("0.5.23")
    )
    with serve_engine(engine=engine) as running:
        yield running


@pytest.mark.parametrize(
    ("sampling", "phrase"),
    [({"max_tokens": 8}, "max_tokens"), ({"temperature": "hot"}, "temperature")],
)
def test_without_sglang_the_engine_refuses_bad_sampling_params_with_its_own_tables(
    pure_gate_engine: Any, sampling: dict[str, Any], phrase: str
) -> None:
    with httpx.Client(base_url=pure_gate_engine.base_url) as http:
        response = http.post("/generate", json={"input_ids": [1, 2], "sampling_params": sampling})
    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["error"] and phrase in body["error"]
