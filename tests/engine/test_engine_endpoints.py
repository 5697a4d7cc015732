"""SGLang's other native routes, and the router's worker lists."""

from __future__ import annotations

import time

import httpx
import pytest

from miles_verifiers_testkit.engine import LatencyModel, RunningEngine
from miles_verifiers_testkit.engine.schema_gate import load_sglang_api_types
from tests.engine.engine_support import QWEN, ServeFactory, in_background, wait_in_flight

PROMPT = [9707, 11, 1879, 0]


@pytest.mark.parametrize("path", ["/health", "/health_generate", "/ready"])
def test_health_routes_answer_200_with_an_empty_body(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    assert (response.status_code, response.content) == (200, b"")


def test_the_0_5_15_contract_has_no_ready_route(serve: ServeFactory) -> None:
    with serve(sglang_version="0.5.15") as running, httpx.Client(base_url=running.base_url) as http:
        assert http.get("/ready").status_code == 404
        assert http.get("/health").status_code == 200


@pytest.mark.parametrize("path", ["/model_info", "/get_model_info"])
def test_model_info_describes_the_served_model(client: httpx.Client, path: str) -> None:
    info = client.get(path).json()
    assert (info["model_path"], info["tokenizer_path"], info["is_generation"]) == (QWEN, QWEN, True)
    assert info["weight_version"] == "default"
    api = load_sglang_api_types()
    if api is not None:
        assert api.GetModelInfoResponse.from_json_value(info).model_path == QWEN


def test_an_engine_claiming_another_model_reports_it_in_both_info_routes(
    serve: ServeFactory,
) -> None:
    other = "meta-llama/Llama-3.2-1B-Instruct"
    with serve(claimed_model=other) as running, httpx.Client(base_url=running.base_url) as http:
        model_info = http.get("/model_info").json()
        server_info = http.get("/server_info").json()
    assert (model_info["model_path"], model_info["tokenizer_path"]) == (other, other)
    assert (server_info["model_path"], server_info["tokenizer_path"]) == (other, other)


@pytest.mark.parametrize("path", ["/server_info", "/get_server_info"])
def test_server_info_reports_the_launch_settings(
    client: httpx.Client, path: str, shared_engine: RunningEngine
) -> None:
    info = client.get(path).json()
    assert info["context_length"] == shared_engine.engine.model.context_length == 40960
    assert info["port"] == shared_engine.port and info["host"] == "127.0.0.1"
    assert info["version"] == "0.5.23"
    assert isinstance(info["internal_states"][0]["last_gen_throughput"], float)
    assert info["loopback_engine"]["schema_gate"] in ("sglang-api-types", "pure-python")
    api = load_sglang_api_types()
    if api is not None:
        assert api.GetServerInfoResponse.from_json_value(info).port == shared_engine.port


def test_v1_models_lists_the_model_with_its_context_length(client: httpx.Client) -> None:
    listing = client.get("/v1/models").json()
    assert listing["object"] == "list"
    (card,) = listing["data"]
    assert (card["id"], card["object"], card["owned_by"], card["max_model_len"]) == (
        QWEN,
        "model",
        "sglang",
        40960,
    )
    api = load_sglang_api_types()
    if api is not None:
        assert api.ModelCard.from_json_value(card).max_model_len == 40960


def test_v1_models_lists_loaded_lora_adapters_under_the_base_model(serve: ServeFactory) -> None:
    with (
        serve(lora_adapters=("a1",), context_length=4096) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        cards = http.get("/v1/models").json()["data"]
        single = http.get("/v1/models/a1")
        missing = http.get("/v1/models/nope")
    assert [(c["id"], c["parent"], c["max_model_len"]) for c in cards] == [
        (QWEN, None, 4096),
        ("a1", QWEN, None),
    ]
    assert single.status_code == 200 and single.json()["id"] == "a1"
    assert missing.status_code == 404 and "nope" in missing.json()["message"]


def test_one_model_can_be_fetched_by_its_id(client: httpx.Client) -> None:
    assert client.get(f"/v1/models/{QWEN}").json()["max_model_len"] == 40960


def test_the_router_worker_list_names_this_engine(
    client: httpx.Client, shared_engine: RunningEngine
) -> None:
    listing = client.get("/workers").json()
    (worker,) = listing["workers"]
    assert worker["url"] == shared_engine.base_url
    assert (worker["worker_type"], worker["is_healthy"], listing["total"]) == ("regular", True, 1)
    assert listing["stats"] == {"prefill_count": 0, "decode_count": 0, "regular_count": 1}


def test_the_old_router_worker_list_names_this_engine(
    client: httpx.Client, shared_engine: RunningEngine
) -> None:
    assert client.get("/list_workers").json() == {"urls": [shared_engine.base_url]}


def test_a_direct_worker_has_no_worker_list_routes(serve: ServeFactory) -> None:
    with serve(router=False) as running:
        statuses = [
            httpx.get(f"{running.base_url}{path}", timeout=10).status_code
            for path in ("/workers", "/list_workers")
        ]
        model_info = httpx.get(f"{running.base_url}/model_info", timeout=10)
    assert statuses == [404, 404]
    assert model_info.status_code == 200


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_flush_cache_answers_200_text_when_idle(client: httpx.Client, method: str) -> None:
    response = client.request(method, "/flush_cache")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("Cache flushed.")


def test_flush_cache_is_refused_while_a_request_runs(serve: ServeFactory) -> None:
    with serve(latency=LatencyModel(decode_s_per_token=0.02)) as running:
        thread, _ = in_background(
            running.base_url,
            {"input_ids": PROMPT, "sampling_params": {"ignore_eos": True, "max_new_tokens": 500}},
        )
        wait_in_flight(running)
        with httpx.Client(base_url=running.base_url) as http:
            busy = http.post("/flush_cache")
            http.post("/abort_request", json={"abort_all": True})
            thread.join(10)
            idle = http.post("/flush_cache")
    assert busy.status_code == 400 and "running" in busy.text
    assert idle.status_code == 200


def test_flush_cache_with_a_timeout_waits_for_running_requests(serve: ServeFactory) -> None:
    body = {"input_ids": PROMPT, "sampling_params": {"ignore_eos": True, "max_new_tokens": 20}}
    with serve(latency=LatencyModel(decode_s_per_token=0.01)) as running:
        thread, _ = in_background(running.base_url, body)
        wait_in_flight(running)
        with httpx.Client(base_url=running.base_url) as http:
            response = http.post("/flush_cache", params={"timeout": 30})
        thread.join(10)
    assert response.status_code == 200


def test_flush_cache_refuses_a_timeout_that_is_not_a_duration(client: httpx.Client) -> None:
    response = client.get("/flush_cache", params={"timeout": "soon"})
    assert response.status_code == 400 and "timeout" in response.json()["message"]


def test_update_weight_version_is_reported_by_later_responses(serve: ServeFactory) -> None:
    with serve() as running, httpx.Client(base_url=running.base_url) as http:
        update = http.post("/update_weight_version", json={"new_version": "v7"})
        answer = http.post("/generate", json={"input_ids": PROMPT}).json()
        info = http.get("/model_info").json()
    assert update.status_code == 200
    assert update.json() == {
        "success": True,
        "message": "weight version is now v7",
        "new_version": "v7",
    }
    assert answer["meta_info"]["weight_version"] == "v7" == info["weight_version"]
    assert answer["meta_info"]["weight_versions"] == [
        {"version": "v7", "start": 0, "end": len(answer["output_ids"])}
    ]


def test_a_weight_update_during_generation_splits_the_version_spans(serve: ServeFactory) -> None:
    with serve(latency=LatencyModel(decode_s_per_token=0.01)) as running:
        body = {
            "input_ids": PROMPT,
            "sampling_params": {"ignore_eos": True, "max_new_tokens": 5000},
        }
        thread, answers = in_background(running.base_url, body)
        wait_in_flight(running)
        time.sleep(0.2)
        running.engine.set_weight_version("v2")
        time.sleep(0.2)
        running.engine.abort_threadsafe(abort_all=True)
        thread.join(10)
    out = answers[0].json()
    first, second = out["meta_info"]["weight_versions"]
    assert (first["version"], first["start"], second["version"]) == ("default", 0, "v2")
    assert 0 < first["end"] == second["start"] < second["end"] == len(out["output_ids"])
    assert out["meta_info"]["weight_version"] == "v2"


def test_update_weight_version_needs_a_version(client: httpx.Client) -> None:
    response = client.post("/update_weight_version", json={})
    assert response.status_code == 400 and "new_version" in response.json()["message"]


def test_abort_request_answers_200_with_an_empty_body_even_for_unknown_rids(
    client: httpx.Client,
) -> None:
    for body in ({"rid": "nobody"}, {}, {"abort_all": False, "rid": ""}):
        response = client.post("/abort_request", json=body)
        assert (response.status_code, response.content) == (200, b"")


def test_abort_request_refuses_a_body_that_is_not_an_object(client: httpx.Client) -> None:
    response = client.post("/abort_request", json=["rid"])
    assert response.status_code == 400 and response.json()["object"] == "error"


def test_unknown_routes_are_404(client: httpx.Client) -> None:
    assert client.get("/no_such_route").status_code == 404


def test_dumper_control_is_recorded_and_answered_with_an_empty_result_list(
    client: httpx.Client, shared_engine: RunningEngine
) -> None:
    body = {"enable": True, "dir": "/tmp/dump", "exp_name": "engines/engine_0"}
    response = client.post("/dumper/configure", json=body)
    assert (response.status_code, response.json()) == (200, [])
    assert shared_engine.engine.dumper_requests[-1] == ("configure", body)


def test_a_dumper_body_that_is_not_an_object_is_rejected_with_400(client: httpx.Client) -> None:
    assert client.post("/dumper/configure", json=[1]).status_code == 400
