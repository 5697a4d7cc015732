"""Helpers shared by the loopback engine's tests (imported by file name, not a package)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import httpx

from miles_verifiers_testkit.engine import RunningEngine
from miles_verifiers_testkit.engine.schema_gate import load_sglang_api_types
from miles_verifiers_testkit.loopback_http import client

ServeFactory = Callable[..., AbstractContextManager[RunningEngine]]
"""The ``serve`` fixture: start an engine with the given ``EngineConfig`` fields."""

QWEN = "Qwen/Qwen3-0.6B"
LLAMA = "meta-llama/Llama-3.2-1B-Instruct"
GPT_OSS = "openai/gpt-oss-20b"
QWEN_IM_END = 151645
QWEN_ENDOFTEXT = 151643

CALCULATOR_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator_add",
        "description": "Add two integers and return their sum.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}

SKIP_WITHOUT_SGLANG = (
    "SGLang schema cross-check skipped: the sglang wheel is not installed "
    "(pip install --no-deps sglang==0.5.23)"
)


def chat_prompt(
    renderer: Any, question: str, *, tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """Token ids of a one-question chat, ending in the generation prompt."""
    messages = [
        {"role": "system", "content": "Answer inside <answer></answer>."},
        {"role": "user", "content": question},
    ]
    return list(renderer.render_ids(messages, tools=tools, add_generation_prompt=True))


def assert_logprob_entries(entries: Any, *, first_null: bool = False) -> None:
    assert isinstance(entries, list)
    for index, entry in enumerate(entries):
        assert isinstance(entry, list) and len(entry) == 3, entry
        logprob, token_id, text = entry
        assert isinstance(token_id, int) and not isinstance(token_id, bool)
        assert text is None or isinstance(text, str)
        if first_null and index == 0:
            assert logprob is None
        else:
            assert isinstance(logprob, float) and math.isfinite(logprob) and logprob < 0.0


def assert_generate_response(obj: Any) -> None:
    """``obj`` has the shape SGLang's /generate returns (and passes SGLang's schema if installed)."""
    assert isinstance(obj, dict)
    assert isinstance(obj["text"], str)
    assert isinstance(obj["output_ids"], list)
    meta = obj["meta_info"]
    assert isinstance(meta["id"], str) and meta["id"]
    reason = meta["finish_reason"]
    assert reason["type"] in ("stop", "length", "abort")
    if reason["type"] == "stop":
        assert set(reason) == {"type", "matched"}
    elif reason["type"] == "length":
        assert set(reason) == {"type", "length"}
    assert meta["completion_tokens"] == len(obj["output_ids"])
    assert isinstance(meta["e2e_latency"], float) and meta["e2e_latency"] >= 0
    assert isinstance(meta["weight_version"], str)
    if "output_token_logprobs" in meta:
        assert_logprob_entries(meta["output_token_logprobs"])
        assert [t for _, t, _ in meta["output_token_logprobs"]] == obj["output_ids"]
        assert meta["output_token_logprobs_length"] == len(obj["output_ids"])
        assert_logprob_entries(meta["input_token_logprobs"], first_null=True)
    api = load_sglang_api_types()
    if api is not None:
        parsed = api.GenerateResponse.from_json_value(obj)
        assert parsed.meta_info is not None and parsed.meta_info.id == meta["id"]


def in_background(
    base_url: str, body: dict[str, Any]
) -> tuple[threading.Thread, list[httpx.Response]]:
    """POST ``body`` to ``/generate`` from another thread; the answer lands in the list."""
    answers: list[httpx.Response] = []

    def run() -> None:
        with client(base_url, base_url=base_url, timeout=30.0) as http:
            answers.append(http.post("/generate", json=body))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, answers


def wait_in_flight(running: RunningEngine, count: int = 1, timeout: float = 10.0) -> None:
    """Block until the engine holds ``count`` items (bounded)."""
    deadline = time.monotonic() + timeout
    while running.engine.in_flight < count:
        assert time.monotonic() < deadline, f"{count} requests never reached the engine"
        time.sleep(0.005)
