"""The non-public upstream pieces the adapter relies on, checked against the installed packages.

One test per entry of ``miles_verifiers.episodes.v02.upstream``'s list, named after the symbol: after an
upgrade of verifiers, renderers or aiohttp, the failing test here names what moved. The last
tests keep every such touch inside ``miles_verifiers.episodes.v02.upstream``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import threading
import tomllib
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import verifiers.v1 as vf

from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers.episodes.v02 import upstream
from miles_verifiers.episodes.v02.clients import growing_pool_class

REPO = Path(__file__).resolve().parents[2]
ADAPTER = REPO / "adapter"
ARITH_CONFIG = REPO / "fixtures" / "configs" / "mv_arith.toml"


def arith_environment() -> vf.Environment:
    return vf.Environment(vf.EnvConfig.model_validate(tomllib.loads(ARITH_CONFIG.read_text())))


def model_context() -> vf.ModelContext:
    return vf.ModelContext(model="m", client=object(), sampling=vf.SamplingConfig())


class FakeRenderer:
    """Just enough of a renderer for RendererPool and renderers.client.generate."""

    def __init__(self, *, supports_tools: bool = True) -> None:
        self.supports_tools = supports_tools

    def render(self, messages: Any, *, tools: Any = None, add_generation_prompt: bool = False):
        return SimpleNamespace(token_ids=[1, 2, 3], multi_modal_data=None)

    def get_stop_token_ids(self) -> list[int]:
        return [0]

    def parse_response(self, completion_ids: Any, *, tools: Any = None) -> Any:
        return SimpleNamespace(content="ok", reasoning_content=None, tool_calls=[])


class RecordingClient:
    """Records every call renderers/verifiers make on what they take for an AsyncOpenAI."""

    def __init__(self) -> None:
        self.base_url = httpx.URL(f"http://{uuid.uuid4().hex[:12]}.invalid:1/v1")
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    async def get(self, path: str, **kwargs: Any) -> Any:
        self.calls.append(("get", (path,), kwargs))
        return {"data": []}

    async def post(self, path: str, **kwargs: Any) -> Any:
        self.calls.append(("post", (path,), kwargs))
        choice = {
            "token_ids": [7],
            "logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5}]},
            "finish_reason": "stop",
        }
        return httpx.Response(200, json={"request_id": "r", "choices": [choice]})

    async def close(self) -> None:
        self.calls.append(("close", (), {}))


async def generate_with(client: RecordingClient, renderer: Any, **kwargs: Any) -> Any:
    from renderers.client import generate

    return await generate(
        client=client,
        renderer=renderer,
        messages=[{"role": "user", "content": "hi"}],
        model="m",
        **kwargs,
    )


# -- verifiers 0.2.0 ------------------------------------------------------------------------------


def test_verifiers_rollout_ctx_is_set_by_episode_and_read_by_run() -> None:
    environment = arith_environment()
    ctx = model_context()
    task = environment.taskset.load()[0]

    episode = environment.episode(task, ctx, n=2)

    assert [rollout.ctx for rollout in episode.rollouts] == [ctx, ctx], (
        "verifiers' Rollout no longer keeps its ModelContext in .ctx (set_rollout_context)"
    )
    assert "self.ctx" in inspect.getsource(type(episode.rollouts[0]).run), (
        "verifiers' Rollout.run no longer reads self.ctx: per-rollout seeds would be ignored"
    )


def test_set_rollout_context_replaces_the_context_a_rollout_runs_with() -> None:
    environment = arith_environment()
    episode = environment.episode(environment.taskset.load()[0], model_context(), n=2)
    own = model_context()

    upstream.set_rollout_context(episode.rollouts[1], own)

    assert episode.rollouts[1].ctx is own


def test_verifiers_environment_has_private_interception_pool() -> None:
    from verifiers.v1.interception.pool import InterceptionPool

    async def pool_while_serving(environment: vf.Environment) -> Any:
        async with environment.serving():
            return environment._interception

    environment = arith_environment()

    assert environment._interception is None
    assert isinstance(asyncio.run(pool_while_serving(environment)), InterceptionPool), (
        "verifiers' Environment no longer holds its InterceptionPool in ._interception"
    )


def test_verifiers_interception_pool_private_servers_lead_to_aiohttp_runners() -> None:
    from aiohttp import web

    async def runners_with_one_rollout(environment: vf.Environment) -> list[Any]:
        async with environment.serving():
            async with environment._interception.acquire(object()):
                return upstream.interception_runners(environment)

    runners = asyncio.run(runners_with_one_rollout(arith_environment()))

    assert len(runners) == 1, (
        "InterceptionPool._servers[i].server.runner no longer reaches the interception "
        "server's aiohttp runner"
    )
    assert isinstance(runners[0], web.AppRunner)


def test_interception_runners_is_empty_outside_serving() -> None:
    assert upstream.interception_runners(arith_environment()) == []


def test_verifiers_train_client_has_private_renderer_pool_hook() -> None:
    from verifiers.v1.clients.train import TrainClient

    hook = inspect.signature(TrainClient._renderer_pool)

    assert list(hook.parameters) == ["self", "model", "chat_template_kwargs"]
    assert hook.parameters["chat_template_kwargs"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "self._renderer_pool(" in inspect.getsource(TrainClient.get_response), (
        "TrainClient.get_response no longer asks self._renderer_pool for its renderer"
    )


def test_verifiers_train_client_caches_its_pool_in_private_pool_slot() -> None:
    from verifiers.v1.clients.train import TrainClient

    client = TrainClient(RecordingClient())
    assert client._pool is None
    pool = object()
    client._pool = pool

    assert client._renderer_pool("any-model") is pool, (
        "TrainClient._renderer_pool no longer returns the pool cached in ._pool"
    )


def test_fixed_renderer_pool_overrides_the_train_client_hook() -> None:
    from verifiers.v1.clients.train import TrainClient

    class Client(upstream.FixedRendererPool, TrainClient):
        pass

    client = Client(RecordingClient())
    pool = object()
    client.use_renderer_pool(pool)

    assert client._renderer_pool("any-model", chat_template_kwargs={"x": 1}) is pool
    assert client._pool is pool


def test_verifiers_session_id_header_is_the_one_the_transport_reads() -> None:
    from verifiers.v1.clients.client import SESSION_ID_HEADER

    assert SESSION_ID_HEADER == upstream.SESSION_HEADER


def test_verifiers_train_client_close_closes_its_openai_client() -> None:
    from verifiers.v1.clients.train import TrainClient

    transport = RecordingClient()
    asyncio.run(TrainClient(transport).close())

    assert [name for name, _, _ in transport.calls] == ["close"]


# -- renderers 0.1.10 ----------------------------------------------------------------------------


def test_renderers_maybe_offload_moves_only_renderer_pool_work_to_a_thread() -> None:
    from renderers.client import _maybe_offload

    base = upstream.renderer_pool_base()
    pool = base.__new__(base)
    here = threading.get_ident()

    assert asyncio.run(_maybe_offload(pool, threading.get_ident)) != here
    assert asyncio.run(_maybe_offload(FakeRenderer(), threading.get_ident)) == here


def test_renderers_maybe_offload_runs_the_loop_renderer_inline_and_the_pool_on_a_thread() -> None:
    from renderers.client import _maybe_offload

    from miles_verifiers.episodes.inline_render import InlineRenderer

    pool = growing_pool_class()(FakeRenderer, 1)
    inline = InlineRenderer(FakeRenderer(), pool)
    here = threading.get_ident()

    assert asyncio.run(_maybe_offload(inline, threading.get_ident)) == here
    assert asyncio.run(_maybe_offload(pool, threading.get_ident)) != here


@pytest.mark.parametrize("size", [1, 2])
def test_renderers_renderer_pool_private_fields_are_the_ones_we_adopt(size: int) -> None:
    base = upstream.renderer_pool_base()
    built = base(FakeRenderer, size)
    adopted = base.__new__(base)

    upstream.adopt_renderer_pool_fields(adopted, FakeRenderer, FakeRenderer(), size)

    assert set(upstream.RENDERER_POOL_FIELDS) <= set(vars(built)), (
        "RendererPool's constructor no longer sets every field in RENDERER_POOL_FIELDS"
    )
    assert set(vars(adopted)) == set(vars(built)), (
        "RendererPool's constructor sets different fields from adopt_renderer_pool_fields"
    )


def test_renderers_renderer_keeps_its_tokenizer_in_private_tokenizer() -> None:
    from renderers import create_renderer
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
    renderer = create_renderer(tokenizer)

    assert upstream.renderer_vocab_size(renderer) == len(tokenizer), (
        "renderers no longer keeps the tokenizer in Renderer._tokenizer"
    )


def test_renderers_renderer_pool_properties_read_the_adopted_private_fields() -> None:
    base = upstream.renderer_pool_base()
    pool = base.__new__(base)

    upstream.adopt_renderer_pool_fields(pool, FakeRenderer, FakeRenderer(), 3)

    assert pool.size == 3
    assert pool.renderer_cls is FakeRenderer


@pytest.mark.parametrize("supports_tools", [True, False])
def test_renderers_renderer_pool_snapshots_supports_tools_and_is_multimodal(
    supports_tools: bool,
) -> None:
    base = upstream.renderer_pool_base()
    built = base(lambda: FakeRenderer(supports_tools=supports_tools), 1)
    adopted = base.__new__(base)

    upstream.adopt_renderer_pool_fields(
        adopted, FakeRenderer, FakeRenderer(supports_tools=supports_tools), 1
    )

    assert (built.supports_tools, built.is_multimodal) == (supports_tools, False)
    assert (adopted.supports_tools, adopted.is_multimodal) == (supports_tools, False)


def test_growing_pool_own_fields_do_not_collide_with_renderer_pool_fields() -> None:
    base = upstream.renderer_pool_base()
    base_fields = set(vars(base(FakeRenderer, 1))) | set(vars(base(FakeRenderer, 2)))
    growing = growing_pool_class()(FakeRenderer, 2)

    own = set(vars(growing)) - base_fields

    assert own == {
        "_make_renderer",
        "_capacity",
        "_idle",
        "built",
        "_grow_lock",
        "inline_renderer",
        "_inline_started",
        "vocab_size",
    }
    assert not own & set(dir(base))


def test_renderers_generate_uses_base_url_models_probe_and_generate_post_on_its_client() -> None:
    client = RecordingClient()

    asyncio.run(generate_with(client, FakeRenderer(), extra_headers={"X-Session-ID": "s1"}))

    (get_name, (get_path,), get_kwargs), (post_name, (post_path,), post_kwargs) = client.calls
    base = str(client.base_url).removesuffix("/v1")
    assert (get_name, get_path.strip("/") in upstream.MODELS_PATHS) == ("get", True)
    assert set(get_kwargs) == {"cast_to"}
    assert (post_name, post_path) == ("post", base + upstream.GENERATE_SUFFIX)
    assert post_kwargs["cast_to"] is httpx.Response
    assert set(post_kwargs) == {"cast_to", "body", "options"}
    assert upstream.session_id_from_options(post_kwargs["options"]) == "s1"


def test_sglang_transport_accepts_every_keyword_renderers_passes() -> None:
    post = inspect.signature(SGLangTransport.post).parameters
    get = inspect.signature(SGLangTransport.get).parameters

    assert {"cast_to", "body", "options"} <= set(post)
    assert "cast_to" in get
    assert isinstance(inspect.getattr_static(SGLangTransport, "base_url"), property)
    assert inspect.iscoroutinefunction(SGLangTransport.close)


def test_renderers_generate_refuses_tools_with_the_wording_we_recognise() -> None:
    tools = [{"name": "add", "description": "add", "parameters": {"type": "object"}}]

    renderer = FakeRenderer(supports_tools=False)

    with pytest.raises(ValueError) as caught:
        asyncio.run(generate_with(RecordingClient(), renderer, tools=tools))

    assert upstream.is_tools_refusal(caught.value), (
        f"renderers' tools refusal no longer says {upstream.TOOLS_REFUSAL_PHRASE!r}: {caught.value}"
    )


# -- aiohttp (under verifiers' interception server) -----------------------------------------------


def test_aiohttp_runner_has_private_shutdown_timeout_that_cleanup_uses() -> None:
    from aiohttp import web
    from aiohttp.web_runner import BaseRunner

    runner = web.AppRunner(web.Application())

    assert upstream.set_shutdown_timeout(runner, 0.5) is True
    assert runner._shutdown_timeout == 0.5
    assert "self._shutdown_timeout" in inspect.getsource(BaseRunner.cleanup), (
        "aiohttp's runner.cleanup() no longer waits by BaseRunner._shutdown_timeout"
    )


def test_argparse_parser_keeps_its_option_strings_in_a_private_mapping() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--rollout-batch-size")

    assert "--rollout-batch-size" in upstream.known_option_strings(parser), (
        "argparse no longer keeps ArgumentParser._option_string_actions"
    )


def test_set_shutdown_timeout_leaves_a_runner_without_one_alone() -> None:
    runner = SimpleNamespace()

    assert upstream.set_shutdown_timeout(runner, 0.5) is False
    assert vars(runner) == {}


# -- the room is the only place ------------------------------------------------------------------

# Private names of the standard library the adapter may use (argparse: type annotations only).
# os._exit is documented stdlib (a worker process ends without waiting on stray threads).
ALLOWED_PRIVATE = {"argparse._SubParsersAction", "os._exit"}
# Public-looking attributes of upstream objects that only upstream code is meant to assign.
UPSTREAM_OWNED = {"ctx", "supports_tools", "is_multimodal", "mm_token_type_id_map"}
UPSTREAM_PACKAGES = ("verifiers", "renderers", "aiohttp", "openai", "transformers")
# Private upstream names a subclass of an upstream class would define or set on ``self``.
UPSTREAM_PRIVATE = {
    "_renderer_pool",
    "_maybe_offload",
    "_interception",
    "_servers",
    "_shutdown_timeout",
    *upstream.RENDERER_POOL_FIELDS,
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def upstream_touches(path: Path) -> list[str]:
    """Each private attribute of another object, private upstream import, or private upstream
    name a subclass defines or sets, in ``path``."""
    found = []
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{shown}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute):
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            text = ast.unparse(node)
            if _private(node.attr) and not on_self and text not in ALLOWED_PRIVATE:
                found.append(f"{where} {text}")
            if node.attr in UPSTREAM_OWNED and isinstance(node.ctx, ast.Store):
                found.append(f"{where} assigns {text}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if (
                node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(args) > 1
                and isinstance(args[1], ast.Constant)
                and isinstance(args[1].value, str)
                and _private(args[1].value)
            ):
                found.append(f"{where} {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(UPSTREAM_PACKAGES):
            parts = (node.module or "").split(".") + [alias.name for alias in node.names]
            if any(_private(part) for part in parts):
                found.append(f"{where} from {node.module} import ...")
    for cls in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(cls, ast.ClassDef) or not cls.bases:
            continue
        for node in ast.walk(cls):
            where = f"{shown}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name in UPSTREAM_PRIVATE:
                    found.append(f"{where} {cls.name} defines {node.name}")
            elif isinstance(node, ast.Attribute) and node.attr in UPSTREAM_PRIVATE:
                found.append(f"{where} {cls.name} uses {ast.unparse(node)}")
    return found


def test_no_adapter_module_but_upstream_touches_a_private_upstream_symbol() -> None:
    modules = [
        p
        for p in sorted(ADAPTER.rglob("*.py"))
        if p != ADAPTER / "episodes" / "v02" / "upstream.py"
    ]

    touches = [touch for path in modules for touch in upstream_touches(path)]

    assert len(modules) > 10
    assert touches == [], "move these into miles_verifiers.episodes.v02.upstream:\n" + "\n".join(
        touches
    )


def test_the_private_touch_scan_finds_each_kind_of_touch(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from renderers.client import _maybe_offload\n"
        "pool = getattr(env, '_interception', None)\n"
        "runner._shutdown_timeout = 1\n"
        "rollout.ctx = ctx\n"
        "self._mine = 1\n"
        "class Client(TrainClient):\n"
        "    def _renderer_pool(self, model):\n"
        "        return self._pool\n"
    )

    touches = upstream_touches(sample)

    assert len(touches) == 6
