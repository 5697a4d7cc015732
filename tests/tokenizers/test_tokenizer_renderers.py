"""renderers 0.1.10 on the rebuilt tokenizers: auto-resolution, upstream goldens, bridging."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from miles_verifiers_testkit.tokenizers import MODEL_IDS

EXPECTED_RENDERER = {
    "Qwen/Qwen3-0.6B": "Qwen3Renderer",
    "meta-llama/Llama-3.2-1B-Instruct": "Llama3Renderer",
    "openai/gpt-oss-20b": "GptOssRenderer",
}

# renderers' golden corpus (PrimeIntellect-ai/renderers tests/golden_renderer_outputs.json
# @08c9d78), recorded with the real hub tokenizers: (token count, sha256 prefix) per render.
GOLDEN_MODEL = {
    "qwen3": "Qwen/Qwen3-0.6B",
    "llama-3": "meta-llama/Llama-3.2-1B-Instruct",
    "gpt-oss": "openai/gpt-oss-20b",
}
GOLDEN_CONFIG = {"gpt-oss": {"conversation_start_date": "2025-01-15"}}
GOLDEN_BRIDGE_CONFIG = {"gpt-oss": {"auto_drop_analysis": False}}
GOLDENS: dict[str, dict[str, tuple[int, str]]] = {
    "qwen3": {
        "generation_prompt": (158, "080aab54d0ee370f"),
        "completed_turn": (172, "0a3b9ecf2923febb"),
        "parser_input": (13, "ae59d3cb1f34a68b"),
        "bridge": (47, "ae61a84d8b9ad2ce"),
        "extension": (15, "cf39a84fd7c4c25c"),
    },
    "llama-3": {
        "generation_prompt": (184, "bf6e3613f5731ec8"),
        "completed_turn": (187, "a62739bb8f585566"),
        "parser_input": (3, "7b3902220739646e"),
        "bridge": (65, "192ae0293aba2c5f"),
        "extension": (15, "c5c629c5dec69f2e"),
    },
    "gpt-oss": {
        "generation_prompt": (137, "2b3451835637d6aa"),
        "completed_turn": (140, "e1d61a4419e80253"),
        "parser_input": (8, "595367d24916debf"),
        "bridge": (107, "99ee782584e8f2bb"),
        "extension": (15, "226e613ad7f518ed"),
    },
}
GOLDEN_CASES = [(name, part) for name, parts in GOLDENS.items() for part in parts]

SYSTEM_AND_USER = [
    {"role": "system", "content": "You are concise."},
    {"role": "user", "content": "What is 2+2?"},
]
ANSWER = {"role": "assistant", "reasoning_content": "Two plus two equals four.", "content": "Four."}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Return the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def digest(ids: list[int]) -> tuple[int, str]:
    encoded = json.dumps(ids, separators=(",", ":")).encode()
    return len(ids), hashlib.sha256(encoded).hexdigest()[:16]


def renderer_for(tokenizer: Any, name: str, *, bridge: bool) -> Any:
    from renderers import config_from_name, create_renderer

    default = config_from_name(name)
    settings = default.model_dump(mode="python") | GOLDEN_CONFIG.get(name, {})
    if bridge:
        settings |= {"thinking_retention": "all", **GOLDEN_BRIDGE_CONFIG.get(name, {})}
    return create_renderer(tokenizer, type(default).model_validate(settings))


def render_golden_cases(tokenizer: Any, name: str) -> dict[str, list[int]]:
    """Reproduce the corpus' five renders for one renderer."""
    from renderers.base import trim_to_turn_close

    renderer = renderer_for(tokenizer, name, bridge=False)
    tools = [WEATHER_TOOL]
    prompt = renderer.render(SYSTEM_AND_USER, tools=tools, add_generation_prompt=True).token_ids
    completed = renderer.render([*SYSTEM_AND_USER, ANSWER], tools=tools)
    if name == "gpt-oss":
        history = renderer.render(SYSTEM_AND_USER, tools=tools).token_ids
        parser_input = completed.token_ids[len(history) :]
    else:
        parser_input = [
            t for t, s in zip(completed.token_ids, completed.sampled_mask, strict=False) if s
        ]

    bridging = renderer_for(tokenizer, name, bridge=True)
    previous_prompt = bridging.render(SYSTEM_AND_USER, add_generation_prompt=True).token_ids
    prior = [*SYSTEM_AND_USER, {"role": "assistant", "content": "Prior answer."}]
    completion = bridging.render(prior).token_ids[len(previous_prompt) :]
    trimmed = trim_to_turn_close(previous_prompt, completion, set(bridging.get_stop_token_ids()))
    if trimmed is not None:
        completion = trimmed[len(previous_prompt) :]
    bridged = bridging.bridge_to_next_turn(
        previous_prompt, completion, [{"role": "user", "content": "And 3+3?"}]
    )
    assert bridged is not None, f"{name} declined to bridge the golden case"
    return {
        "generation_prompt": prompt,
        "completed_turn": completed.token_ids,
        "parser_input": parser_input,
        "bridge": bridged.token_ids,
        "extension": bridged.token_ids[len(previous_prompt) + len(completion) :],
    }


@pytest.fixture(scope="module")
def golden_renders(hub_tokenizer: Callable[[str], Any]) -> Callable[[str], dict[str, list[int]]]:
    return cache(lambda name: render_golden_cases(hub_tokenizer(GOLDEN_MODEL[name]), name))


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_hub_id_auto_resolves_to_the_model_specific_renderer(
    hub_tokenizer: Callable[[str], Any], model_id: str
) -> None:
    from renderers import create_renderer

    assert type(create_renderer(hub_tokenizer(model_id))).__name__ == EXPECTED_RENDERER[model_id]


@pytest.mark.parametrize(("name", "part"), GOLDEN_CASES)
def test_render_matches_the_upstream_golden(
    golden_renders: Callable[[str], dict[str, list[int]]], name: str, part: str
) -> None:
    assert digest(golden_renders(name)[part]) == GOLDENS[name][part]


# --- Qwen3: a two-turn tool conversation bridges to exactly what a full re-render gives.

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
QUESTION = {"role": "user", "content": "What's the weather in Paris?"}
TOOL_CALL = {
    "id": "call_0",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
}
SAMPLED_TOOL_TURN = (
    "<think>\nI should call the tool.\n</think>\n\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
)
TOOL_RESULT = {
    "role": "tool",
    "tool_call_id": "call_0",
    "content": '{"temp_c": 18, "sky": "cloudy"}',
}


@pytest.fixture(scope="module")
def qwen3_tool_turn(hub_tokenizer: Callable[[str], Any]) -> dict[str, Any]:
    from renderers import create_renderer

    tokenizer = hub_tokenizer("Qwen/Qwen3-0.6B")
    renderer = create_renderer(tokenizer)
    prompt = renderer.render([SYSTEM, QUESTION], tools=[WEATHER_TOOL], add_generation_prompt=True)
    completion = tokenizer.encode(SAMPLED_TOOL_TURN, add_special_tokens=False)
    bridged = renderer.bridge_to_next_turn(
        prompt.token_ids, completion, [TOOL_RESULT], tools=[WEATHER_TOOL]
    )
    return {
        "renderer": renderer,
        "prompt": prompt.token_ids,
        "completion": completion,
        "bridged": bridged,
    }


def test_qwen3_parses_the_sampled_tool_call(qwen3_tool_turn: dict[str, Any]) -> None:
    parsed = qwen3_tool_turn["renderer"].parse_response(
        qwen3_tool_turn["completion"], tools=[WEATHER_TOOL]
    )
    assert parsed.reasoning_content.strip() == "I should call the tool."
    assert [(c.name, c.arguments, c.status) for c in parsed.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "ok")
    ]


def test_qwen3_bridge_extends_the_previous_prompt_and_completion(
    qwen3_tool_turn: dict[str, Any],
) -> None:
    prefix = qwen3_tool_turn["prompt"] + qwen3_tool_turn["completion"]
    assert qwen3_tool_turn["bridged"].token_ids[: len(prefix)] == prefix


def test_qwen3_bridged_tool_turn_equals_a_full_rerender(qwen3_tool_turn: dict[str, Any]) -> None:
    history = [
        SYSTEM,
        QUESTION,
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "I should call the tool.",
            "tool_calls": [TOOL_CALL],
        },
        TOOL_RESULT,
    ]
    full = qwen3_tool_turn["renderer"].render_ids(
        history, tools=[WEATHER_TOOL], add_generation_prompt=True
    )
    assert qwen3_tool_turn["bridged"].token_ids == full
