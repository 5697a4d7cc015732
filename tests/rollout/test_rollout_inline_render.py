"""Short prompts render on the event loop, long ones on Renderers' worker threads, and both
paths give the same tokens."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import ChatDialect

from miles_verifiers.episodes.inline_render import (
    INLINE_MAX_CHARS,
    INLINE_MAX_MESSAGES,
    InlineRenderer,
    prompt_size,
    renders_inline,
)
from miles_verifiers.episodes.v02.clients import (
    MilesTrainClient,
    growing_pool_class,
    shared_renderer_pool,
)
from miles_verifiers.protocol.messages import RendererSpecModel
from miles_verifiers_conformance.render_corpus import (
    CASES,
    IDENTITIES,
    Identity,
    RendererFactory,
    cases_for,
)
from miles_verifiers_testkit.tokenizers import build_all
from tests.rollout.rollout_support import MODEL


@pytest.fixture(scope="module", autouse=True)
def _tokenizers() -> None:
    build_all()


class ThreadRecordingRenderer:
    """A real Qwen3 renderer that notes the thread each render and parse ran on."""

    def __init__(self, threads: list[tuple[str, int]]) -> None:
        from renderers.base import create_renderer, load_tokenizer

        self._inner = create_renderer(
            load_tokenizer(MODEL), chat_template_kwargs={"enable_thinking": False}
        )
        self._threads = threads
        self.supports_tools = True

    def render(self, *args: Any, **kwargs: Any) -> Any:
        self._threads.append(("render", threading.get_ident()))
        return self._inner.render(*args, **kwargs)

    def parse_response(self, *args: Any, **kwargs: Any) -> Any:
        self._threads.append(("parse", threading.get_ident()))
        return self._inner.parse_response(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class EngineStub:
    """Answers every /generate with one token and keeps the prompt ids it was sent."""

    base_url = httpx.URL("http://engine.invalid:1/v1")

    def __init__(self) -> None:
        self.prompts: list[list[int]] = []

    async def get(self, path: str, **kwargs: Any) -> Any:
        return {"data": []}

    async def post(self, path: str, **kwargs: Any) -> Any:
        self.prompts.append(list(kwargs["body"]["token_ids"]))
        choice = {
            "token_ids": [9],
            "logprobs": {"content": [{"token": "token_id:9", "logprob": -0.1}]},
            "finish_reason": "stop",
        }
        return httpx.Response(200, json={"request_id": "r", "choices": [choice]})

    async def close(self) -> None:
        pass


def _pool(threads: list[tuple[str, int]], *, inline: bool) -> Any:
    pool = growing_pool_class()(lambda: ThreadRecordingRenderer(threads), 1)
    if inline:
        pool.warm_up()
    return pool


def _conversation(messages: int) -> list[dict[str, str]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": f"What is {i} + 1?"} for i in range(messages - 1)] + [
        {"role": "user", "content": "And 2 + 2?"}
    ]


def _ask(pool: Any, messages: list[dict[str, str]]) -> tuple[int, EngineStub]:
    """One chat request through the adapter's client; returns the event loop's thread."""
    engine = EngineStub()
    client = MilesTrainClient(
        engine, pool, RendererSpecModel(tokenizer_source=MODEL, identity=MODEL, pool_size=1)
    )

    async def ask() -> int:
        await client.get_response(
            ChatDialect(),
            {"model": "m", "messages": messages},
            "m",
            vf.SamplingConfig(max_tokens=8),
        )
        return threading.get_ident()

    return asyncio.run(ask()), engine


def test_a_short_prompt_renders_and_parses_on_the_event_loop() -> None:
    threads: list[tuple[str, int]] = []
    pool = _pool(threads, inline=True)
    threads.clear()

    loop_thread, _ = _ask(pool, _conversation(3))

    assert [step for step, _ in threads] == ["render", "parse"]
    assert {thread for _, thread in threads} == {loop_thread}


def test_a_prompt_with_too_many_messages_renders_on_a_worker_thread() -> None:
    threads: list[tuple[str, int]] = []
    pool = _pool(threads, inline=True)
    threads.clear()

    loop_thread, _ = _ask(pool, _conversation(INLINE_MAX_MESSAGES + 1))

    assert threads and all(thread != loop_thread for _, thread in threads)


def test_a_prompt_with_too_much_text_renders_on_a_worker_thread() -> None:
    threads: list[tuple[str, int]] = []
    pool = _pool(threads, inline=True)
    threads.clear()

    loop_thread, _ = _ask(pool, [{"role": "user", "content": "x " * INLINE_MAX_CHARS}])

    assert threads and all(thread != loop_thread for _, thread in threads)


def test_until_the_loop_renderer_is_built_every_prompt_takes_a_worker_thread() -> None:
    threads: list[tuple[str, int]] = []
    pool = _pool(threads, inline=False)
    threads.clear()

    loop_thread, _ = _ask(pool, _conversation(1))

    assert pool.inline_renderer is None
    assert threads and all(thread != loop_thread for _, thread in threads)


def _loop_renderer_of(pool: Any) -> Any:
    deadline = time.monotonic() + 120
    while pool.inline_renderer is None and time.monotonic() < deadline:
        time.sleep(0.05)  # built on the pool's warm-up thread
    return pool.inline_renderer


def test_a_shared_pool_of_two_keeps_one_renderer_for_the_loop_and_one_for_threads() -> None:
    pool = shared_renderer_pool(
        RendererSpecModel(
            tokenizer_source=MODEL,
            identity=MODEL,
            chat_template_kwargs_json='{"enable_thinking": false}',
            pool_size=2,
        )
    )

    assert _loop_renderer_of(pool) is not None
    pool.warm_up()
    assert pool.built == 1


def test_a_shared_pool_of_one_renders_every_prompt_on_a_worker_thread() -> None:
    pool = shared_renderer_pool(
        RendererSpecModel(
            tokenizer_source=MODEL,
            identity=MODEL,
            chat_template_kwargs_json='{"enable_thinking": false}',
            pool_size=1,
        )
    )

    pool.warm_up()

    assert pool.inline_renderer is None and pool.built == 1


def test_inline_and_threaded_requests_send_the_same_prompt_ids() -> None:
    threads: list[tuple[str, int]] = []
    conversation = _conversation(5)

    _, inline = _ask(_pool(threads, inline=True), conversation)
    _, threaded = _ask(_pool(threads, inline=False), conversation)

    assert inline.prompts == threaded.prompts and inline.prompts[0]


def test_prompt_size_counts_messages_text_tool_calls_and_tools() -> None:
    messages = [
        {"role": "user", "content": "abc"},
        vf.AssistantMessage(
            content="de", tool_calls=[vf.ToolCall(id="c", name="add", arguments='{"a":1}')]
        ),
        {"role": "user", "content": [{"type": "text", "text": "fgh"}]},
    ]

    size = prompt_size(messages, tools=[{"t": 1}])

    assert size.messages == 3
    assert size.chars == 3 + 2 + len("add") + len('{"a":1}') + 3 + len(str({"t": 1}))


def test_the_inline_limits_are_inclusive() -> None:
    at_limit = prompt_size([{"role": "user", "content": "x" * INLINE_MAX_CHARS}])
    over = prompt_size([{"role": "user", "content": "x" * (INLINE_MAX_CHARS + 1)}])

    assert renders_inline(at_limit) and not renders_inline(over)


# -- the render corpus, through the pool (thread path) and the loop's renderer ----------------


class PoolFactory(RendererFactory):
    """Builds what the adapter renders with: the pool, or the loop's renderer beside it."""

    def __init__(self, identity: Identity, tokenizer: Any, *, inline: bool) -> None:
        super().__init__(identity, tokenizer)
        self.inline = inline

    def create(self, extra_kwargs: Any = None) -> tuple[Any, dict[str, Any]]:
        import renderers

        kwargs = {**self.identity.base_kwargs, **(extra_kwargs or {})}

        def make() -> Any:
            return renderers.create_renderer(self.tokenizer, chat_template_kwargs=kwargs or None)

        pool = growing_pool_class()(make, 1)
        return (InlineRenderer(make(), pool) if self.inline else pool), kwargs


@pytest.mark.parametrize("identity", IDENTITIES, ids=[i.slug for i in IDENTITIES])
def test_the_render_corpus_is_identical_inline_and_through_the_pool(identity: Identity) -> None:
    from renderers.base import load_tokenizer

    tokenizer = load_tokenizer(identity.model_id)
    for case in cases_for(identity):
        inline = CASES[case](PoolFactory(identity, tokenizer, inline=True))
        pooled = CASES[case](PoolFactory(identity, tokenizer, inline=False))
        assert inline.rejected == pooled.rejected, case
        assert inline.steps == pooled.steps, case
