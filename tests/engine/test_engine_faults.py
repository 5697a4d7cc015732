"""Fault injection on ``/generate``: each kind as a client sees it, seeded and switchable."""

from __future__ import annotations

import json
import math
from collections import Counter

import httpx
import pytest

from miles_verifiers_testkit.engine import FaultKind, FaultPlan, LatencyModel, VirtualClock
from miles_verifiers_testkit.engine.faults import FaultInjector
from tests.engine.engine_support import ServeFactory, assert_generate_response

PROMPT = [9707, 11, 1879, 0]
BODY = {
    "input_ids": PROMPT,
    "sampling_params": {"ignore_eos": True, "max_new_tokens": 50},
    "return_logprob": True,
}


def _response_under(serve: ServeFactory, kind: FaultKind) -> httpx.Response:
    """The engine's response to BODY when every request gets ``kind``."""
    with (
        serve(faults=FaultPlan.always(kind)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        return http.post("/generate", json=BODY)


def test_a_server_error_fault_is_a_bare_500(serve: ServeFactory) -> None:
    response = _response_under(serve, FaultKind.SERVER_ERROR)
    assert response.status_code == 500
    assert response.text == "Internal Server Error"


def test_a_server_error_fault_can_use_another_5xx(serve: ServeFactory) -> None:
    plan = FaultPlan.always(FaultKind.SERVER_ERROR, error_status=503)
    with serve(faults=plan) as running, httpx.Client(base_url=running.base_url) as http:
        assert http.post("/generate", json=BODY).status_code == 503


def test_an_abort_fault_answers_200_with_an_abort_and_a_cut_output(serve: ServeFactory) -> None:
    with (
        serve(faults=FaultPlan.always(FaultKind.ABORT)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        outs = [http.post("/generate", json=BODY).json() for _ in range(5)]
    for out in outs:
        assert_generate_response(out)
        assert out["meta_info"]["finish_reason"]["type"] == "abort"
        assert len(out["output_ids"]) < 50
    assert len({len(out["output_ids"]) for out in outs}) > 1


def _sampled(out: dict) -> tuple[list[int], list[float], list[int]]:
    entries = out["meta_info"]["output_token_logprobs"]
    return out["output_ids"], [e[0] for e in entries], [e[1] for e in entries]


def _answer_under(serve: ServeFactory, kind: FaultKind) -> tuple[dict, int]:
    """The engine's answer to BODY when every request gets ``kind``, and its vocabulary size.

    Parsed with the json module, which reads the bare NaN literal a NaN fault sends."""
    with (
        serve(faults=FaultPlan.always(kind)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        response = http.post("/generate", json=BODY)
        return json.loads(response.text), running.engine.model.vocab_size


def test_a_positive_logprob_fault_gives_the_last_token_logprob_above_zero(
    serve: ServeFactory,
) -> None:
    out, _ = _answer_under(serve, FaultKind.POSITIVE_LOGPROB)
    _, logprobs, _ = _sampled(out)
    assert logprobs[-1] > 0 and all(lp <= 0 for lp in logprobs[:-1])


def test_a_nan_logprob_fault_sends_a_bare_nan_literal(serve: ServeFactory) -> None:
    out, _ = _answer_under(serve, FaultKind.NAN_LOGPROB)
    _, logprobs, _ = _sampled(out)
    assert math.isnan(logprobs[-1])


def test_a_too_many_tokens_fault_answers_one_token_past_max_new_tokens(
    serve: ServeFactory,
) -> None:
    out, _ = _answer_under(serve, FaultKind.TOO_MANY_TOKENS)
    ids, logprobs, _ = _sampled(out)
    assert len(ids) == len(logprobs) == out["meta_info"]["completion_tokens"] == 51


def test_an_out_of_vocab_fault_answers_an_id_past_the_embedding_table(
    serve: ServeFactory,
) -> None:
    out, vocab_size = _answer_under(serve, FaultKind.OUT_OF_VOCAB)
    ids, _, logprob_ids = _sampled(out)
    assert ids[-1] == logprob_ids[-1] == vocab_size


def test_a_misaligned_logprobs_fault_leaves_the_last_output_id_without_logprob(
    serve: ServeFactory,
) -> None:
    out, _ = _answer_under(serve, FaultKind.MISALIGNED_LOGPROBS)
    ids, logprobs, _ = _sampled(out)
    assert len(logprobs) == len(ids) - 1


def test_a_delay_fault_holds_the_call_then_serves_it(
    serve: ServeFactory, early_clock: VirtualClock
) -> None:
    plan = FaultPlan.always(FaultKind.DELAY, delay_s=0.3)
    with (
        serve(faults=plan, clock=early_clock) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        before = early_clock.now()  # virtual: it moves only while the engine waits
        response = http.post("/generate", json=BODY)
        held = early_clock.now() - before
    assert response.status_code == 200
    assert held == pytest.approx(0.3)
    assert response.json()["meta_info"]["finish_reason"] == {"type": "length", "length": 50}


def test_a_dropped_connection_fault_closes_the_connection_mid_response(serve: ServeFactory) -> None:
    with serve(faults=FaultPlan.always(FaultKind.DROP_CONNECTION)) as running:
        with (
            httpx.Client(base_url=running.base_url) as http,
            pytest.raises(httpx.RemoteProtocolError),
        ):
            http.post("/generate", json=BODY)
        with httpx.Client(base_url=running.base_url) as http:
            assert http.get("/health").status_code == 200


def test_a_malformed_body_fault_sends_json_that_does_not_parse(serve: ServeFactory) -> None:
    response = _response_under(serve, FaultKind.MALFORMED_BODY)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.content)


def test_faults_can_be_switched_on_and_off_while_serving(serve: ServeFactory) -> None:
    with serve() as running, httpx.Client(base_url=running.base_url) as http:
        clean = http.post("/generate", json=BODY).status_code
        running.engine.set_faults(FaultPlan.always(FaultKind.SERVER_ERROR))
        faulty = http.post("/generate", json=BODY).status_code
        running.engine.set_faults(FaultPlan())
        healed = http.post("/generate", json=BODY).status_code
        counts = running.engine.stats().faults
    assert (clean, faulty, healed) == (200, 500, 200)
    assert counts["server_error"] == 0  # a new plan restarts the counters


def test_faults_do_not_touch_the_other_routes(serve: ServeFactory) -> None:
    with (
        serve(faults=FaultPlan.always(FaultKind.SERVER_ERROR)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        assert http.get("/health").status_code == 200
        assert http.get("/v1/models").status_code == 200
        assert http.post("/abort_request", json={"abort_all": True}).status_code == 200


def test_an_abort_fault_under_latency_still_answers(serve: ServeFactory) -> None:
    plan = FaultPlan.always(FaultKind.ABORT, seed=3)
    latency = LatencyModel(decode_s_per_token=0.001)
    with (
        serve(faults=plan, latency=latency) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        out = http.post("/generate", json=BODY).json()
    assert out["meta_info"]["finish_reason"]["type"] == "abort"


def test_the_same_seed_draws_the_same_faults() -> None:
    plan = FaultPlan(
        server_error=0.2, abort=0.2, delay=0.1, drop_connection=0.1, malformed_body=0.1, seed=9
    )
    one, two = FaultInjector(plan), FaultInjector(plan)
    first = [one.draw() for _ in range(200)]
    assert first == [two.draw() for _ in range(200)]
    other = FaultInjector(
        FaultPlan(
            server_error=0.2, abort=0.2, delay=0.1, drop_connection=0.1, malformed_body=0.1, seed=10
        )
    )
    assert first != [other.draw() for _ in range(200)]


def test_fault_rates_follow_the_plan() -> None:
    injector = FaultInjector(FaultPlan(server_error=0.25, malformed_body=0.25, seed=1))
    counts = Counter(injector.draw() for _ in range(2000))
    assert 0.2 <= counts[FaultKind.SERVER_ERROR] / 2000 <= 0.3
    assert 0.2 <= counts[FaultKind.MALFORMED_BODY] / 2000 <= 0.3
    assert 0.45 <= counts[None] / 2000 <= 0.55
    assert counts[FaultKind.ABORT] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"server_error": 0.6, "abort": 0.6},
        {"abort": -0.1},
        {"delay": 1.5},
        {"error_status": 404},
        {"delay_s": -1.0},
    ],
)
def test_a_fault_plan_refuses_impossible_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        FaultPlan(**kwargs)  # type: ignore[arg-type]
