"""Listing workers from a router and aborting this transport's requests on them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from miles_verifiers.engine.workers import (
    WorkerListError,
    abort_on_workers,
    list_workers,
    worker_base_url,
)
from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers.episodes.transport.errors import EngineAbortedError

ROUTER = "http://router.test:8000"


def routed(routes: dict[tuple[str, str], Any]) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A MockTransport answering (method, url) from ``routes``; anything else is a 404."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        url = str(request.url.copy_with(query=None))
        answer = routes.get((request.method, url))
        if answer is None:
            return httpx.Response(404, text="not found")
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler), seen


def run_with(transport: httpx.MockTransport, fn) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(transport=transport) as client:
            return await fn(client)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("listed", "base"),
    [
        ("http://10.0.0.1:30000", "http://10.0.0.1:30000"),
        ("http://10.0.0.1:30000/", "http://10.0.0.1:30000"),
        ("http://10.0.0.1:30000@3", "http://10.0.0.1:30000"),
    ],
)
def test_worker_urls_lose_dp_rank_suffixes(listed: str, base: str) -> None:
    assert worker_base_url(listed) == base


def test_workers_are_listed_from_sgl_router() -> None:
    body = {
        "workers": [
            {"id": "w1", "url": "http://10.0.0.1:30000@0", "is_healthy": True},
            {"id": "w2", "url": "http://10.0.0.1:30000@1", "is_healthy": True},
            {"id": "w3", "url": "http://10.0.0.2:30000", "is_healthy": True},
        ],
        "total": 3,
    }
    transport, _ = routed({("GET", f"{ROUTER}/workers"): httpx.Response(200, json=body)})
    urls = run_with(transport, lambda c: list_workers(c, ROUTER))
    assert urls == ("http://10.0.0.1:30000", "http://10.0.0.2:30000")


def test_old_routers_are_listed_through_list_workers() -> None:
    body = {"urls": ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]}
    transport, seen = routed({("GET", f"{ROUTER}/list_workers"): httpx.Response(200, json=body)})
    urls = run_with(transport, lambda c: list_workers(c, ROUTER))
    assert urls == ("http://10.0.0.1:30000", "http://10.0.0.2:30000")
    assert [r.url.path for r in seen] == ["/workers", "/list_workers"]


def test_unlistable_router_is_a_clear_error() -> None:
    # Neither listing route and no /model_info: not a router, not an SGLang worker.
    transport, _ = routed({})
    with pytest.raises(WorkerListError, match="could not list the workers of router"):
        run_with(transport, lambda c: list_workers(c, ROUTER))


def test_a_direct_worker_without_listing_routes_is_its_own_single_worker() -> None:
    info = httpx.Response(200, json={"model_path": "Qwen/Qwen3-0.6B", "is_generation": True})
    transport, seen = routed({("GET", f"{ROUTER}/model_info"): info})
    urls = run_with(transport, lambda c: list_workers(c, ROUTER))
    assert urls == (ROUTER,)
    assert [r.url.path for r in seen] == ["/workers", "/list_workers", "/model_info"]


def test_a_direct_worker_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    url = "http://direct-once.test:30000"
    info = httpx.Response(200, json={"model_path": "m"})
    transport, _ = routed({("GET", f"{url}/model_info"): info})
    with caplog.at_level("INFO", logger="miles_verifiers.engine.workers"):
        run_with(transport, lambda c: list_workers(c, url))
        run_with(transport, lambda c: list_workers(c, url))
    notes = [r for r in caplog.records if "single SGLang worker" in r.getMessage()]
    assert len(notes) == 1


def test_unexpected_worker_list_body_is_an_error() -> None:
    transport, _ = routed({("GET", f"{ROUTER}/workers"): httpx.Response(200, json={"urls": 3})})
    with pytest.raises(WorkerListError, match="unexpected body"):
        run_with(transport, lambda c: list_workers(c, ROUTER))


def test_abort_posts_every_rid_to_every_worker() -> None:
    ok = httpx.Response(200)
    workers = ["http://w1:1", "http://w2:2"]
    transport, seen = routed({("POST", f"{w}/abort_request"): ok for w in workers})
    report = run_with(transport, lambda c: abort_on_workers(c, workers, ["p-", "p-4"]))
    sent = sorted((str(r.url), json.loads(r.content)["rid"]) for r in seen)
    assert sent == [
        ("http://w1:1/abort_request", "p-"),
        ("http://w1:1/abort_request", "p-4"),
        ("http://w2:2/abort_request", "p-"),
        ("http://w2:2/abort_request", "p-4"),
    ]
    assert report.ok and report.posted == 4


def test_abort_never_sends_abort_all() -> None:
    transport, seen = routed({("POST", "http://w1:1/abort_request"): httpx.Response(200)})
    run_with(transport, lambda c: abort_on_workers(c, ["http://w1:1"], ["p-"]))
    assert json.loads(seen[0].content) == {"rid": "p-"}


def test_unreachable_workers_are_reported_not_raised() -> None:
    transport, _ = routed(
        {
            ("POST", "http://w1:1/abort_request"): httpx.Response(200),
            ("POST", "http://w2:2/abort_request"): httpx.ConnectError("refused"),
        }
    )
    report = run_with(
        transport, lambda c: abort_on_workers(c, ["http://w1:1", "http://w2:2"], ["p-"])
    )
    assert not report.ok
    assert report.failures == (("http://w2:2", "p-", "ConnectError: refused"),)


def test_empty_abort_rid_is_refused() -> None:
    transport, seen = routed({})
    with pytest.raises(ValueError, match="non-empty"):
        run_with(transport, lambda c: abort_on_workers(c, ["http://w1:1"], [""]))
    assert seen == []


def test_transport_abort_cancels_its_in_flight_request(make_settings) -> None:
    """A generate waits until its exact rid is aborted, then ends as SGLang reports an abort."""
    aborted: set[str] = set()
    events: dict[str, asyncio.Event] = {}

    async def engine(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/generate":
            rid = json.loads(request.content)["rid"]
            events["started"].set()
            await events["aborted"].wait()
            assert rid in aborted
            answer = {
                "output_ids": [9],
                "meta_info": {
                    "id": rid,
                    "finish_reason": {"type": "abort", "message": "Aborted", "status_code": None},
                    "output_token_logprobs": [[-0.1, 9, None]],
                },
            }
            return httpx.Response(200, json=answer)
        if request.url.path == "/workers":
            return httpx.Response(200, json={"workers": [{"url": "http://worker.test:1"}]})
        if request.url.path == "/abort_request":
            assert request.url.host == "worker.test"
            rid = json.loads(request.content)["rid"]
            aborted.add(rid)
            if rid == "job-0":
                events["aborted"].set()
            return httpx.Response(200)
        return httpx.Response(404)

    transport = SGLangTransport(
        make_settings(engine_url="http://router.test:8000", rid_prefix="job"),
        http_transport=httpx.MockTransport(engine),
    )

    async def scenario() -> tuple[BaseException | None, Any]:
        events["started"], events["aborted"] = asyncio.Event(), asyncio.Event()
        turn = asyncio.create_task(
            transport.post(
                "http://router.test:8000/inference/v1/generate",
                body={"token_ids": [1, 2], "sampling_params": {}},
            )
        )
        await asyncio.wait_for(events["started"].wait(), timeout=5)
        assert transport.in_flight_rids == {"job-0"}
        report = await transport.abort()
        try:
            await asyncio.wait_for(turn, timeout=5)
        except EngineAbortedError as exc:
            return exc, report
        return None, report

    error, report = asyncio.run(scenario())
    assert isinstance(error, EngineAbortedError)
    assert report.workers == ("http://worker.test:1",)
    assert set(report.rids) == {"job-", "job-0"}
    assert transport.in_flight_rids == frozenset()


def _abort_answers(*answers: Any) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A worker whose abort posts get ``answers`` in turn (an exception is raised)."""
    pending = list(answers)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = pending.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler), seen


def test_an_abort_post_whose_connection_drops_is_tried_once_more() -> None:
    transport, seen = _abort_answers(httpx.ReadError("closed"), httpx.Response(200))
    report = run_with(transport, lambda c: abort_on_workers(c, ["http://w1:1"], ["p-"]))
    assert report.ok and len(seen) == 2


def test_an_abort_post_that_keeps_failing_is_reported_after_two_tries() -> None:
    transport, seen = _abort_answers(httpx.ReadError("closed"), httpx.ReadError("closed"))
    report = run_with(transport, lambda c: abort_on_workers(c, ["http://w1:1"], ["p-"]))
    assert not report.ok and len(seen) == 2
    assert "ReadError" in report.failures[0][2]


def test_an_abort_post_that_times_out_is_not_tried_again() -> None:
    transport, seen = _abort_answers(httpx.ReadTimeout("slow"))
    report = run_with(transport, lambda c: abort_on_workers(c, ["http://w1:1"], ["p-"]))
    assert not report.ok and len(seen) == 1
