"""Every place the adapter relies on a non-public piece of an upstream package, in one module.

No other adapter module reads or writes a private upstream attribute, overrides a private
upstream method or leans on an upstream call convention that is not documented as API: they call
the functions and use the classes below. ``tests/adapter/test_upstream.py`` has one test per entry,
named after the symbol, that checks the installed package still has it in the shape used here,
so after an upgrade the first failing test names what moved.

Upstream imports happen inside the functions, so importing this module stays cheap.

verifiers 0.2.0
---------------
1. ``Rollout.ctx`` (assigned after ``Environment.episode()``): ``episode()`` gives every rollout
   of a group the same ``ModelContext``; ``Rollout.run`` reads ``self.ctx`` when it starts.
   Needed for per-rollout sampling seeds (``--deterministic-inference``). Without it every
   rollout of a group samples with the same seed. -> :func:`set_rollout_context`
2. ``Environment._interception``: the ``InterceptionPool`` that ``Environment.serving()`` holds
   while it is open. Needed to reach the aiohttp servers at call end (entry 4). Without it the
   shutdown is not hurried (each cancelled user-simulator rollout can cost a minute).
   -> :func:`interception_runners`
3. ``InterceptionPool._servers`` (``verifiers.v1.interception.pool``), a list of ``PooledServer``
   whose ``.server`` is an ``InterceptionServer`` with an aiohttp ``.runner``: the same path as 2.
   -> :func:`interception_runners`
4. ``TrainClient._renderer_pool(model, *, chat_template_kwargs=None)``: the private hook
   ``TrainClient.get_response`` calls for the renderer of every turn. Overridden to return the
   process-wide pool built from Miles' flags, so each rollout call's client does not load its own
   tokenizers. Without it every client builds a new pool on its first turn.
   -> :class:`FixedRendererPool`
5. ``TrainClient._pool``: the slot the base hook caches its pool in (``None`` after
   construction). Filled with the shared pool, so even the base hook would return it.
   -> :meth:`FixedRendererPool.use_renderer_pool`

renderers 0.1.10
----------------
6. ``renderers.client._maybe_offload``: runs render/parse work on a worker thread only when the
   renderer ``isinstance(renderer, RendererPool)``. Our growing pool subclasses ``RendererPool``
   for that reason alone. Without it renders run on the event loop and a pool checkout blocks
   it. The flip side is relied on too: any other renderer object runs inline, which is how a
   short prompt renders on the loop (:class:`miles_verifiers.episodes.inline_render.InlineRenderer`).
   If that changed, short prompts would go to a thread again (slower, still correct).
   -> :func:`renderer_pool_base`, :func:`offloads_to_thread`
7. ``RendererPool`` private fields ``_factory``, ``_size``, ``_sole``, ``_lock``, ``_pool`` and
   ``_renderer_cls``, set by its constructor. The growing pool skips that constructor (it would
   build every renderer up front) and sets them itself, so the base properties (``size``,
   ``renderer_cls``) and ``checkout`` stay consistent. -> :func:`adopt_renderer_pool_fields`
8. ``RendererPool`` snapshot attributes ``supports_tools``, ``is_multimodal`` and (multimodal
   only) ``mm_token_type_id_map``: the constructor copies them from a renderer, and
   ``renderers.client.generate`` and verifiers read them from the pool. Without them a
   tool-calling request is refused or a multimodal check fails.
   -> :func:`adopt_renderer_pool_fields`
9. ``renderers.client.generate``'s use of its ``client`` argument, which ``TrainClient`` fills
   with what it got as ``AsyncOpenAI`` (our transport): ``str(client.base_url)``,
   ``await client.get("/models", cast_to=...)`` for the context-length probe,
   ``await client.post("<base_url without /v1>/inference/v1/generate", cast_to=httpx.Response,
   body=..., options={"headers": {"X-Session-ID": ...}})`` whose result's ``.content`` is JSON,
   and (``TrainClient.close``) ``await client.close()``. The transport implements exactly this
   surface. -> :class:`RenderersClient`, :data:`GENERATE_SUFFIX`, :data:`MODELS_PATHS`,
   :data:`SESSION_HEADER`, :func:`session_id_from_options`
10. The wording of ``renderers.client.generate``'s refusal of tools on a renderer without tool
    support (a plain ``ValueError`` saying "does not support tools"). Recognised to turn it into
    a setup error that names the flag to change. Without it the refusal is an ordinary episode
    failure. -> :func:`is_tools_refusal`

aiohttp 3.x (under verifiers' interception server)
--------------------------------------------------
11. ``BaseRunner._shutdown_timeout``: how long ``runner.cleanup()`` waits for request handlers
    still running (60 s by default, no public setter). Shortened at call end, when whatever
    handler still runs belongs to a cancelled rollout. Without it a cancelled user-simulator
    rollout holds the call's shutdown for a minute. -> :func:`set_shutdown_timeout`

13. ``Renderer._tokenizer`` (each renderer's tokenizer; no public accessor). Its length is the
    vocabulary the transport checks sampled ids against. Without it that check is off.
    -> :func:`renderer_vocab_size`

argparse (standard library)
---------------------------
12. ``ArgumentParser._option_string_actions``: every option string a parser knows (no public
    accessor). Read to suggest the nearest real flag for a misspelled one. Without it the
    command line still refuses unknown flags, but suggests only Miles' own flag names.
    -> :func:`known_option_strings`
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = [
    "GENERATE_SUFFIX",
    "MODELS_PATHS",
    "RENDERER_POOL_FIELDS",
    "SESSION_HEADER",
    "TOOLS_REFUSAL_PHRASE",
    "FixedRendererPool",
    "RenderersClient",
    "adopt_renderer_pool_fields",
    "interception_runners",
    "is_tools_refusal",
    "offloads_to_thread",
    "renderer_pool_base",
    "session_id_from_options",
    "set_rollout_context",
    "set_shutdown_timeout",
]


# -- verifiers: rollouts and the interception servers (entries 1-3, 11) --------------------------


def set_rollout_context(rollout: Any, ctx: Any) -> None:
    """Give one rollout of an episode its own model context (before the episode runs)."""
    rollout.ctx = ctx


def interception_runners(environment: Any) -> list[Any]:
    """The aiohttp runners of the interception servers ``environment.serving()`` holds now.

    Empty outside ``serving()``, before the first rollout brought a server up, or when the
    private path is gone (then nothing is hurried; see :func:`set_shutdown_timeout`).
    """
    pool = getattr(environment, "_interception", None)
    runners = []
    for entry in list(getattr(pool, "_servers", None) or ()):
        runner = getattr(getattr(entry, "server", None), "runner", None)
        if runner is not None:
            runners.append(runner)
    return runners


def set_shutdown_timeout(runner: Any, seconds: float) -> bool:
    """Make ``runner.cleanup()`` wait at most ``seconds`` for running handlers.

    False (and nothing changed) when the runner has no such setting.
    """
    if not hasattr(runner, "_shutdown_timeout"):
        return False
    runner._shutdown_timeout = seconds
    return True


def renderer_vocab_size(renderer: Any) -> int | None:
    """How many token ids the renderer's tokenizer knows (``len(tokenizer)``), or None."""
    tokenizer = getattr(renderer, "_tokenizer", None) or getattr(renderer, "tokenizer", None)
    try:
        size = len(tokenizer) if tokenizer is not None else 0
    except TypeError:
        return None
    return size or None


def known_option_strings(parser: Any) -> list[str]:
    """The ``--long`` option strings ``parser`` accepts (empty when argparse hides them)."""
    actions = getattr(parser, "_option_string_actions", None) or {}
    return [option for option in actions if option.startswith("--")]


# -- verifiers: TrainClient's renderer hook (entries 4-5) -----------------------------------------


class FixedRendererPool:
    """Mixin, listed before ``TrainClient`` in a subclass's bases: render with one given pool.

    Call :meth:`use_renderer_pool` after ``TrainClient.__init__`` (which empties the slot).
    """

    _pool: Any

    def use_renderer_pool(self, pool: Any) -> None:
        self._pool = pool

    def renderer_for_request(self) -> Any:
        """What the current request renders with: the pool (a subclass may choose per request)."""
        return self._pool

    def _renderer_pool(
        self, model: str, *, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        # The pool is built from --apply-chat-template-kwargs; per-request template switches
        # would need another pool, so none are taken from the request.
        return self.renderer_for_request()


# -- renderers: the pool (entries 6-8) ------------------------------------------------------------

# The fields RendererPool's constructor sets that the pool's own methods and properties read.
RENDERER_POOL_FIELDS = ("_factory", "_size", "_sole", "_lock", "_pool", "_renderer_cls")


def renderer_pool_base() -> type:
    """``renderers.base.RendererPool``: a pool must be one to have its work moved off the loop."""
    from renderers.base import RendererPool

    return RendererPool


def offloads_to_thread(renderer: Any) -> bool:
    """True when Renderers would run ``renderer``'s work on a worker thread (entry 6)."""
    return isinstance(renderer, renderer_pool_base())


def adopt_renderer_pool_fields(
    pool: Any, factory: Callable[[], Any], sample: Any, size: int
) -> None:
    """Set what ``RendererPool.__init__`` would, for a subclass that skips that constructor.

    ``sample`` is one built renderer (its class and capabilities stand for all of them). The
    base's own renderer storage (``_sole``/``_lock``/``_pool``) is left empty: the subclass
    keeps its renderers itself and overrides ``checkout``.
    """
    from renderers.base import MultimodalRenderer, is_multimodal

    pool._factory = factory
    pool._size = size
    pool._sole = None
    pool._lock = None
    pool._pool = None
    pool._renderer_cls = type(sample)
    pool.supports_tools = getattr(sample, "supports_tools", True)
    pool.is_multimodal = is_multimodal(sample)
    if isinstance(sample, MultimodalRenderer):
        pool.mm_token_type_id_map = sample.mm_token_type_id_map


# -- renderers: the client surface generate() uses (entries 9-10) ----------------------------------

# generate() posts to "<base_url without /v1>" + this (an absolute URL).
GENERATE_SUFFIX = "/inference/v1/generate"
# The context-length probe's path (with or without the /v1 that base_url already ends in).
MODELS_PATHS = frozenset({"models", "v1/models"})
# Verifiers' session-id header, passed as options={"headers": {...}} on every turn of a rollout.
SESSION_HEADER = "X-Session-ID"
TOOLS_REFUSAL_PHRASE = "does not support tools"


class RenderersClient(Protocol):
    """The part of ``AsyncOpenAI`` that ``renderers.client.generate`` and ``TrainClient`` use."""

    @property
    def base_url(self) -> Any: ...

    async def get(self, path: str, *, cast_to: object = ...) -> Any: ...

    async def post(
        self,
        path: str,
        *,
        cast_to: object = ...,
        body: Mapping[str, Any] | None = ...,
        options: Mapping[str, Any] | None = ...,
    ) -> Any: ...

    async def close(self) -> None: ...


def session_id_from_options(options: Mapping[str, Any] | None) -> str | None:
    """The session id in a ``post(..., options={"headers": {...}})`` call, if any."""
    headers = (options or {}).get("headers") or {}
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if name.lower() == SESSION_HEADER.lower() and value:
            return str(value)
    return None


def is_tools_refusal(error: BaseException) -> bool:
    """True for generate()'s refusal of tools on a renderer without tool support."""
    return isinstance(error, ValueError) and TOOLS_REFUSAL_PHRASE in str(error)
