"""Which model the engine serves: the /model_info check made before a call's first request."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from miles_verifiers.engine.identity import EngineModelMismatchError, check_served_model, model_key

URL = "http://engine.test:30000"


def info(model_path: str, tokenizer_path: str | None = None) -> dict[str, object]:
    return {"model_path": model_path, "tokenizer_path": tokenizer_path or model_path}


def test_the_same_model_id_is_accepted() -> None:
    check_served_model("Qwen/Qwen3-0.6B", info("Qwen/Qwen3-0.6B"), URL)


def test_a_local_copy_of_the_hub_model_is_accepted() -> None:
    check_served_model("Qwen/Qwen3-0.6B", info("/models/Qwen3-0.6B/"), URL)


def test_an_hf_cache_snapshot_of_the_model_is_accepted() -> None:
    snapshot = "/root/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B/snapshots/abc123"
    assert model_key(snapshot) == model_key("Qwen/Qwen3-0.6B")
    check_served_model("Qwen/Qwen3-0.6B", info(snapshot), URL)


def test_a_checkpoint_matching_only_the_tokenizer_path_is_accepted() -> None:
    check_served_model("/ckpt/policy", info("/tmp/converted/hf", "/ckpt/policy"), URL)


def test_an_engine_serving_the_run_s_tokenizer_path_is_accepted() -> None:
    # --hf-checkpoint /ckpt/my-policy with --sglang-tokenizer-path Qwen/Qwen3-0.6B, and an
    # engine launched on that tokenizer path.
    check_served_model(
        "/ckpt/my-policy", info("Qwen/Qwen3-0.6B"), URL, aliases=("Qwen/Qwen3-0.6B",)
    )


def test_an_answer_that_names_no_model_is_not_refused() -> None:
    check_served_model("Qwen/Qwen3-0.6B", {"is_generation": True}, URL)


def test_another_model_is_refused_naming_both_models_and_the_fix() -> None:
    with pytest.raises(EngineModelMismatchError) as caught:
        check_served_model("Qwen/Qwen3-0.6B", info("meta-llama/Llama-3.2-1B-Instruct"), URL)
    message = str(caught.value)
    assert "'meta-llama/Llama-3.2-1B-Instruct'" in message
    assert "'Qwen/Qwen3-0.6B' (--hf-checkpoint)" in message
    assert URL in message and "Fix: start the engine with --model-path Qwen/Qwen3-0.6B" in message


# --- the transport asks the engine -----------------------------------------------------------


def test_the_engine_is_asked_once_per_transport(make_harness) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.Response(200, json=info("Qwen/Qwen3-0.6B")))

    async def twice() -> None:
        await h.transport.verify_served_model("Qwen/Qwen3-0.6B")
        await h.transport.verify_served_model("Qwen/Qwen3-0.6B")

    asyncio.run(twice())
    assert [str(r.url) for r in h.engine.requests] == [f"{URL}/model_info"]


def test_an_engine_serving_another_model_is_refused(make_harness) -> None:
    h = make_harness()
    h.engine.replies.append(httpx.Response(200, json=info("meta-llama/Llama-3.2-1B-Instruct")))
    with pytest.raises(EngineModelMismatchError, match="Llama-3.2-1B-Instruct"):
        asyncio.run(h.transport.verify_served_model("Qwen/Qwen3-0.6B"))


def test_a_router_that_forwards_only_get_model_info_is_asked_there(make_harness) -> None:
    h = make_harness()
    h.engine.replies.extend(
        [httpx.Response(404), httpx.Response(200, json=info("meta-llama/Llama-3.2-1B-Instruct"))]
    )
    with pytest.raises(EngineModelMismatchError):
        asyncio.run(h.transport.verify_served_model("Qwen/Qwen3-0.6B"))
    assert [r.url.path for r in h.engine.requests] == ["/model_info", "/get_model_info"]


def test_a_router_without_model_info_is_not_refused(make_harness, caplog) -> None:
    h = make_harness()
    h.engine.replies.extend([httpx.Response(404), httpx.Response(404)])
    with caplog.at_level("DEBUG", logger="miles_verifiers.engine.client"):
        asyncio.run(h.transport.verify_served_model("Qwen/Qwen3-0.6B"))
    assert "serves no /model_info" in caplog.text
