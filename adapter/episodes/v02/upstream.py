"""Every non-public piece of an upstream package the adapter relies on, in one module.

No other adapter module touches a private upstream attribute or undocumented convention;
``tests/adapter/test_upstream.py`` checks each entry against the installed package, so after an
upgrade the first failing test names what moved. Upstream imports stay inside the functions.

verifiers 0.2.0
1. ``Rollout.ctx``, read when the rollout starts (per-rollout seeds). -> :func:`set_rollout_context`
2-3. ``Environment._interception`` and its ``_servers`` (``.server.runner``, aiohttp), the way
   to the servers at call end. -> :func:`interception_runners`
4-5. ``TrainClient._renderer_pool(model, *, chat_template_kwargs=None)``, the per-turn renderer
   hook, and ``TrainClient._pool``, its cache slot. -> :class:`FixedRendererPool`

renderers 0.1.10
6. ``renderers.client._maybe_offload`` moves work to a thread only for a ``RendererPool``
   (other renderers run inline). -> :func:`renderer_pool_base`
7-8. ``RendererPool``'s private fields and its ``supports_tools``, ``is_multimodal``,
   ``mm_token_type_id_map``, set by a pool that skips the constructor.
   -> :func:`adopt_renderer_pool_fields`
9. How ``generate`` and ``TrainClient.close`` use the ``AsyncOpenAI`` given (our transport):
   ``base_url``, ``get("/models")``, ``post(<base>/inference/v1/generate, ...)`` with an
   ``X-Session-ID`` header option, ``close()``. -> :data:`GENERATE_SUFFIX`, :data:`MODELS_PATHS`,
   :func:`session_id_from_options`
10. generate()'s refusal of tools ("does not support tools"). -> :func:`is_tools_refusal`
13. ``Renderer._tokenizer``, whose length bounds sampled ids. -> :func:`renderer_vocab_size`

aiohttp 3.x
11. ``BaseRunner._shutdown_timeout`` (60 s, no setter). -> :func:`set_shutdown_timeout`

argparse
12. ``ArgumentParser._option_string_actions``, to suggest the nearest flag for a misspelled one.
    -> :func:`known_option_strings`
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def set_rollout_context(rollout: Any, ctx: Any) -> None:
    """Give one rollout of an episode its own model context (before the episode runs)."""
    rollout.ctx = ctx


def interception_runners(environment: Any) -> list[Any]:
    """The aiohttp runners of the interception servers ``environment.serving()`` holds now
    (none outside ``serving()``, before the first rollout, or when the private path is gone)."""
    servers = getattr(getattr(environment, "_interception", None), "_servers", None) or ()
    runners = (getattr(getattr(entry, "server", None), "runner", None) for entry in list(servers))
    return [runner for runner in runners if runner is not None]


def set_shutdown_timeout(runner: Any, seconds: float) -> bool:
    """Make ``runner.cleanup()`` wait at most ``seconds`` for running handlers (False: no
    such setting, nothing changed)."""
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


class FixedRendererPool:
    """Mixin before ``TrainClient`` in a subclass's bases: render with one given pool (set by
    :meth:`use_renderer_pool` after ``TrainClient.__init__``, which empties the slot)."""

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


# The fields RendererPool's constructor sets that the pool's own methods and properties read.
RENDERER_POOL_FIELDS = ("_factory", "_size", "_sole", "_lock", "_pool", "_renderer_cls")


def renderer_pool_base() -> type:
    """``renderers.base.RendererPool``: a pool must be one to have its work moved off the loop."""
    from renderers.base import RendererPool

    return RendererPool


def adopt_renderer_pool_fields(
    pool: Any, factory: Callable[[], Any], sample: Any, size: int
) -> None:
    """Set what ``RendererPool.__init__`` would, for a subclass that skips that constructor
    and keeps its renderers itself (``sample``'s class and capabilities stand for all)."""
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


# generate() posts to "<base_url without /v1>" + this (an absolute URL).
GENERATE_SUFFIX = "/inference/v1/generate"
# The context-length probe's path (with or without the /v1 that base_url already ends in).
MODELS_PATHS = frozenset({"models", "v1/models"})
# Verifiers' session-id header, passed as options={"headers": {...}} on every turn of a rollout.
SESSION_HEADER = "X-Session-ID"
TOOLS_REFUSAL_PHRASE = "does not support tools"


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
