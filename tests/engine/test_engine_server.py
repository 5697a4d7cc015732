"""Starting and stopping the engine in-process, and its command line."""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import (
    EngineConfig,
    FaultKind,
    FaultPlan,
    LatencyModel,
    LoopbackEngine,
    ModelProfile,
    serve_engine,
    serve_engine_async,
)
from miles_verifiers_testkit.engine.cli import config_from_args, register, run_serve
from tests.engine.engine_support import QWEN, ServeFactory, in_background, wait_in_flight


def test_the_engine_listens_on_loopback_only_and_stops_on_exit(serve: ServeFactory) -> None:
    with serve() as running:
        assert running.base_url == f"http://127.0.0.1:{running.port}"
        assert httpx.get(f"{running.base_url}/health").status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{running.base_url}/health", timeout=2.0)


def test_two_engines_get_different_free_ports(serve: ServeFactory) -> None:
    with serve() as first, serve() as second:
        assert first.port != second.port


def test_the_async_context_manager_serves_from_async_code(qwen: ModelProfile) -> None:
    async def scenario() -> int:
        engine = LoopbackEngine(EngineConfig(model=QWEN), model=qwen)
        async with (
            serve_engine_async(engine=engine) as running,
            httpx.AsyncClient(base_url=running.base_url) as http,
        ):
            response = await http.post("/generate", json={"input_ids": [9707, 11]})
        return response.status_code

    assert asyncio.run(scenario()) == 200


def test_stopping_the_engine_answers_requests_in_flight_with_an_abort(serve: ServeFactory) -> None:
    body = {
        "input_ids": [9707, 11],
        "sampling_params": {"ignore_eos": True, "max_new_tokens": 5000},
    }
    with serve(latency=LatencyModel(decode_s_per_token=0.01)) as running:
        thread, answers = in_background(running.base_url, body)
        wait_in_flight(running)
    thread.join(10)  # a guard against hanging, not a speed check
    assert not thread.is_alive(), "the request in flight was never answered"
    assert answers[0].status_code == 200
    assert answers[0].json()["meta_info"]["finish_reason"]["type"] == "abort"


HELD_BODY = {"input_ids": [9707, 11], "sampling_params": {"max_new_tokens": 8}}


def _wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.005)


def _answer_after_stop(thread: threading.Thread, answers: list[httpx.Response]) -> Any:
    thread.join(10)  # a guard against hanging, not a speed check
    assert not thread.is_alive(), "the held call was never answered"
    assert answers[0].status_code == 200
    return answers[0].json()


def test_stopping_the_engine_answers_a_call_held_by_a_delay_fault_with_an_abort(
    serve: ServeFactory,
) -> None:
    plan = FaultPlan.always(FaultKind.DELAY, delay_s=600.0)
    with serve(faults=plan) as running:
        thread, answers = in_background(running.base_url, HELD_BODY)
        _wait_until(lambda: running.engine.stats().faults["delay"] == 1, "the delay")
    body = _answer_after_stop(thread, answers)
    assert body["meta_info"]["finish_reason"]["type"] == "abort"
    assert body["output_ids"] == []


def test_stopping_the_engine_answers_a_call_held_by_the_completion_gate_with_an_abort(
    serve: ServeFactory,
) -> None:
    plan = FaultPlan(completion_order="reversed", order_quiet_s=600.0)
    with serve(faults=plan) as running:
        thread, answers = in_background(running.base_url, HELD_BODY)
        _wait_until(lambda: running.engine.held_calls == 1, "the hold")
    body = _answer_after_stop(thread, answers)
    assert body["meta_info"]["finish_reason"]["type"] == "abort"


def test_serve_engine_builds_the_engine_from_a_config(qwen: ModelProfile) -> None:
    with serve_engine(EngineConfig(model=QWEN, weight_version="w1")) as running:
        assert running.engine.weight_version == "w1"
        assert running.engine.model.tokenizer is qwen.tokenizer  # loaded once per process


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="miles-verifiers")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["engine", "serve", *argv])


def test_the_cli_flags_describe_the_engine() -> None:
    args = _parse(
        "--tokenizer",
        "meta-llama/Llama-3.2-1B-Instruct",
        "--port",
        "31000",
        "--context-length",
        "8192",
        "--sglang-version",
        "0.5.15",
        "--lora-adapter",
        "a",
        "--lora-adapter",
        "b",
        "--accuracy",
        "0.25",
        "--thinking",
        "--decode-s-per-token",
        "0.01",
        "--max-running-requests",
        "4",
        "--fault-abort",
        "0.1",
        "--fault-drop-connection",
        "0.2",
        "--fault-seed",
        "5",
    )
    config = config_from_args(args)
    assert (config.model, config.context_length, config.sglang_version) == (
        "meta-llama/Llama-3.2-1B-Instruct",
        8192,
        "0.5.15",
    )
    assert config.lora_adapters == ("a", "b")
    assert (config.policy.accuracy, config.policy.thinking) == (0.25, True)
    assert config.latency == LatencyModel(decode_s_per_token=0.01, max_running_requests=4)
    assert config.faults == FaultPlan(abort=0.1, drop_connection=0.2, seed=5)
    assert args.handler is run_serve and args.port == 31000


def test_the_cli_defaults_match_sglangs() -> None:
    # The default version is the 0.5.16 fork production Miles runs.
    args = _parse()
    config = config_from_args(args)
    assert (args.port, config.model, config.sglang_version) == (30000, QWEN, "0.5.16-fork")
    assert config.latency.is_instant and config.faults.is_clean


def test_the_cli_serves_a_bare_worker_with_a_small_kv_pool_on_request() -> None:
    config = config_from_args(_parse("--bare-worker", "--kv-capacity", "4096"))
    assert (config.router, config.kv_capacity) == (False, 4096)


def test_the_cli_refuses_a_probability_outside_0_and_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("--fault-abort", "1.5")
    assert "--fault-abort" in capsys.readouterr().err


def test_the_cli_refuses_fault_rates_that_add_up_past_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_serve(_parse("--fault-abort", "0.7", "--fault-delay", "0.7")) == 2
    assert "at most 1" in capsys.readouterr().err


def test_the_cli_refuses_an_impossible_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_serve(_parse("--port", "70000")) == 2
    assert "--port" in capsys.readouterr().err


def test_the_cli_reports_a_tokenizer_it_cannot_load(
    capsys: pytest.CaptureFixture[str], offline_tokenizers: None
) -> None:
    assert run_serve(_parse("--tokenizer", "nobody/no-such-model", "--port", "31999")) == 1
    assert "nobody/no-such-model" in capsys.readouterr().err
