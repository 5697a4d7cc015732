"""Shared pieces for the SGLang transport tests.

``sglang_answer`` builds SGLang /generate answers field by field as sglang 0.5.15/0.5.23 send
them for a single non-streaming request with ``return_logprob: true`` (``text``, ``output_ids``,
``meta_info`` with ``[logprob, token_id, null]`` triples). ``FakeSGLang`` is an
``httpx.MockTransport`` handler standing in for an engine where no real one can run; it records
every request and answers from a queue of scripted replies.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers_testkit.tokenizers import build_all, offline_environ

# The repository conftest puts the offline tokenizer environment in place for the whole run;
# these defaults only matter when this folder runs on its own before that exists. They must be
# set before anything imports huggingface_hub/transformers.
for _name, _value in offline_environ().items():
    os.environ.setdefault(_name, _value)

Reply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


def make_sglang_answer(
    ids: Sequence[int],
    logprobs: Sequence[float] | None = None,
    *,
    finish: dict[str, Any] | None = None,
    rid: str = "rid-0",
    prompt_tokens: int = 3,
) -> dict[str, Any]:
    """An SGLang /generate answer for a request that sampled ``ids``."""
    if logprobs is None:
        logprobs = [-0.5 - 0.25 * i for i in range(len(ids))]
    if finish is None:
        finish = {"type": "stop", "matched": ids[-1]} if ids else {"type": "length", "length": 0}
    return {
        "text": "decoded text",
        "output_ids": list(ids),
        "meta_info": {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": prompt_tokens,
            "weight_version": "default",
            "input_token_logprobs": [],
            "output_token_logprobs": [[lp, t, None] for lp, t in zip(logprobs, ids, strict=True)],
            "output_token_logprobs_length": len(ids),
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "e2e_latency": 0.01,
        },
    }


@dataclass
class FakeSGLang:
    """Scripted stand-in for SGLang's HTTP API (see module docstring)."""

    replies: list[Reply] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply) and not isinstance(reply, httpx.Response):
            return reply(request)
        return reply

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.content]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def generate_reply(ids: Sequence[int], **kwargs: Any) -> Callable[[httpx.Request], httpx.Response]:
    """A reply that echoes the request's rid in meta_info.id, as SGLang does."""

    def reply(request: httpx.Request) -> httpx.Response:
        rid = json.loads(request.content)["rid"]
        return httpx.Response(200, json=make_sglang_answer(ids, rid=rid, **kwargs))

    return reply


def settings_for(**overrides: Any) -> TransportSettings:
    values: dict[str, Any] = {
        "engine_url": "http://engine.test:30000",
        "max_response_len": 64,
        "context_len": 256,
        "retry": {"max_retries": 2, "initial_backoff_s": 0.5, "max_backoff_s": 4.0},
    }
    values.update(overrides)
    return TransportSettings(**values)


@dataclass
class Harness:
    """A transport wired to a FakeSGLang, with the backoff sleeps recorded instead of waited."""

    engine: FakeSGLang
    transport: SGLangTransport
    sleeps: list[float]


@pytest.fixture
def make_harness() -> Callable[..., Harness]:
    def build(*, router_drops_warned: set[str] | None = None, **overrides: Any) -> Harness:
        engine = FakeSGLang()
        sleeps: list[float] = []

        async def record_sleep(seconds: float) -> None:
            sleeps.append(seconds)

        transport = SGLangTransport(
            settings_for(**overrides),
            http_transport=engine.transport(),
            sleep=record_sleep,
            router_drops_warned=router_drops_warned,
        )
        return Harness(engine=engine, transport=transport, sleeps=sleeps)

    return build


@pytest.fixture
def sglang_answer() -> Callable[..., dict[str, Any]]:
    return make_sglang_answer


@pytest.fixture
def echo_reply() -> Callable[..., Callable[[httpx.Request], httpx.Response]]:
    return generate_reply


@pytest.fixture
def make_settings() -> Callable[..., TransportSettings]:
    return settings_for


@pytest.fixture(scope="session")
def offline_tokenizers() -> Iterator[None]:
    """Exact tokenizers rebuilt offline (idempotent; fast once cached)."""
    build_all()
    yield
