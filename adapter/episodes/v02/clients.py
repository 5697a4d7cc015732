"""The model client Verifiers' rollouts talk to, and the one renderer pool behind it.

Verifiers' ``TrainClient`` renders each chat request to token ids with a Renderers renderer and
hands them to a transport (ours: :class:`~miles_verifiers.episodes.transport.SGLangTransport`). This
module adds what the Miles adapter needs on top:

* :func:`renderer_identity` finds the model id Renderers knows (``Qwen/Qwen3-0.6B``) behind a
  local checkpoint path, so the right renderer (with tool support) is picked even when Miles
  runs from ``/models/Qwen3-0.6B`` or an HF cache snapshot.
* :func:`shared_renderer_pool` builds ONE small pool per (tokenizer, identity, template
  switches, size) and process, shared by the training and the evaluation clients. It is
  usable after a single tokenizer load; the other renderers are loaded on a background
  thread (or on demand, when a render would otherwise wait for a free one). With two or more,
  one of them is kept for the event loop, which renders short prompts itself (see
  ``miles_verifiers.episodes.inline_render``); the others serve Renderers' worker threads.
* :class:`MilesTrainClient` refuses, with the fix in the message, what the token path cannot
  serve: streaming, auxiliary dialect routes, non-chat dialects, and tools on a renderer
  without tool support. It also stops serving the moment its rollout call ends.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from verifiers.v1.clients.train import TrainClient
from verifiers.v1.errors import ProviderError

from miles_verifiers.episodes.content import NonTextContentError, plain_text_messages
from miles_verifiers.episodes.inline_render import InlineRenderer, prompt_size, renders_inline
from miles_verifiers.episodes.v02.upstream import (
    FixedRendererPool,
    adopt_renderer_pool_fields,
    is_tools_refusal,
    renderer_pool_base,
    renderer_vocab_size,
)
from miles_verifiers.errors import (
    UNSUPPORTED_REQUEST_CODE,
    RendererSetupError,
    RolloutCallError,
    SetupError,
    tag_message,
)

logger = logging.getLogger(__name__)

IDENTITY_FLAGS = "--hf-checkpoint or --sglang-tokenizer-path"

# Status of the refusals: a 4xx, so no harness SDK retries them.
_REFUSED = 400


class UnsupportedRequestError(ProviderError, SetupError):
    """The harness asked for something the Miles token path cannot do (a setup problem).

    Its message is tagged, so the rollout function can tell "the setup is wrong" (stop the
    run) from "this episode failed" once Verifiers has recorded it on a trace.
    """

    trace_code = UNSUPPORTED_REQUEST_CODE

    def __init__(self, what: str, fix: str) -> None:
        message = tag_message(UnsupportedRequestError, f"{what} Fix: {fix}")
        ProviderError.__init__(self, message, status_code=_REFUSED)


class CallEndedError(ProviderError, RolloutCallError):
    """A model request arrived after the rollout call that owns it had ended."""

    trace_code = "call_ended"

    def __init__(self, message: str, *, status_code: int) -> None:
        ProviderError.__init__(self, message, status_code=status_code)


# -- which renderer --------------------------------------------------------------------------


def _model_renderer_map() -> Mapping[str, str]:
    from renderers.base import MODEL_RENDERER_MAP

    return MODEL_RENDERER_MAP


def renderer_identity(
    checkpoint: str | None, model_map: Mapping[str, str] | None = None
) -> str | None:
    """The Renderers model id behind ``checkpoint``, or None when there is none or it is ambiguous.

    A registered id is itself. Otherwise the candidates are the ``models--org--name`` parts of
    an HF cache path and every registered id whose last part equals the path's last component.
    When all candidates map to one renderer, the alphabetically first id is returned; when they
    disagree (``/models/Qwen3-0.6B`` could be ``Qwen/Qwen3-0.6B`` or ``PrimeIntellect/Qwen3-0.6B``,
    which use different templates) there is no safe answer and the result is None.
    """
    if not checkpoint:
        return None
    known = _model_renderer_map() if model_map is None else model_map
    if checkpoint in known:
        return checkpoint
    path = PurePath(checkpoint)
    candidates = {
        part.removeprefix("models--").replace("--", "/")
        for part in path.parts
        if part.startswith("models--")
    }
    candidates.update(key for key in known if key.rsplit("/", 1)[-1] == path.name)
    matches = sorted(candidates & set(known))
    if not matches or len({known[m] for m in matches}) != 1:
        return None
    return matches[0]


@dataclass(frozen=True)
class RendererSpec:
    """Everything that decides which renderers a pool holds (hashable: one pool per spec)."""

    tokenizer_source: str
    identity: str | None
    # JSON of --apply-chat-template-kwargs with sorted keys (hashable and order-free).
    chat_template_kwargs_json: str = "{}"
    pool_size: int = 2

    @staticmethod
    def build(
        tokenizer_source: str,
        identity: str | None,
        chat_template_kwargs: Mapping[str, Any] | None,
        pool_size: int,
    ) -> RendererSpec:
        if pool_size < 1:
            raise ValueError(f"the renderer pool needs at least one renderer, got {pool_size}")
        return RendererSpec(
            tokenizer_source=tokenizer_source,
            identity=identity,
            chat_template_kwargs_json=json.dumps(dict(chat_template_kwargs or {}), sort_keys=True),
            pool_size=pool_size,
        )

    @property
    def chat_template_kwargs(self) -> dict[str, Any]:
        return json.loads(self.chat_template_kwargs_json)

    @property
    def model_label(self) -> str:
        return self.identity or self.tokenizer_source


def identify_renderer(hf_checkpoint: str | None, tokenizer_source: str | None) -> str | None:
    """The identity to render with: from the checkpoint first, then the tokenizer source."""
    return renderer_identity(hf_checkpoint) or renderer_identity(tokenizer_source)


# -- the pool ----------------------------------------------------------------------------------


def _make_growing_pool_class() -> type:
    base = renderer_pool_base()

    class GrowingRendererPool(base):  # type: ignore[misc, valid-type]
        """A Renderers ``RendererPool`` that builds its renderers on demand, up to ``size``.

        It is a real ``RendererPool`` subclass because Renderers moves pool work onto worker
        threads only for ``RendererPool`` instances. Unlike the base class it starts with one
        renderer: each renderer loads its own tokenizer (about half a second for Qwen3), and
        the second one is only worth it once two renders actually overlap.
        """

        def __init__(
            self, factory: Callable[[], Any], size: int, *, loop_renderer: bool = True
        ) -> None:
            # The base constructor would build every slot up front; set its fields instead.
            first = factory()
            adopt_renderer_pool_fields(self, factory, first, size)
            # Our own fields, named apart from the base's (see RENDERER_POOL_FIELDS).
            self._make_renderer = factory
            self._capacity = size
            self._idle: queue.Queue[Any] = queue.Queue()
            self._idle.put(first)
            self._built = 1
            self._grow_lock = threading.Lock()
            self._inline: InlineRenderer | None = None
            # Without a loop renderer every render takes a worker thread.
            self._inline_started = not loop_renderer
            self.vocab_size = renderer_vocab_size(first)

        @property
        def inline_renderer(self) -> InlineRenderer | None:
            """The renderer short prompts use on the event loop; None until it is built."""
            return self._inline

        @property
        def built(self) -> int:
            """How many renderers exist so far."""
            return self._built

        @contextmanager
        def checkout(self) -> Iterator[Any]:
            try:
                renderer = self._idle.get_nowait()
            except queue.Empty:
                renderer = self._grow_or_wait()
            try:
                yield renderer
            finally:
                self._idle.put(renderer)

        # Every render passes through the pool, so content-part lists are made plain text here
        # (renderers disagree on them; see miles_verifiers.episodes.content), before any renderer runs.
        def render(self, messages: Any, **kwargs: Any) -> Any:
            return super().render(plain_text_messages(messages), **kwargs)

        def render_ids(self, messages: Any, **kwargs: Any) -> Any:
            return super().render_ids(plain_text_messages(messages), **kwargs)

        def bridge_to_next_turn(
            self,
            previous_prompt_ids: Any,
            previous_completion_ids: Any,
            new_messages: Any,
            **kwargs: Any,
        ) -> Any:
            return super().bridge_to_next_turn(
                previous_prompt_ids,
                previous_completion_ids,
                plain_text_messages(new_messages),
                **kwargs,
            )

        def warm_up(self) -> None:
            """Build the remaining renderers, then the loop's own (meant for a background thread)."""
            self._fill()
            self._build_inline()

        def _build_inline(self) -> None:
            # A renderer of its own, so a render on the loop never waits for one a worker
            # thread holds. Multimodal prompts always take the thread.
            with self._grow_lock:
                if self._inline_started or self.is_multimodal:
                    return
                self._inline_started = True
            try:
                renderer = self._make_renderer()
            except Exception as error:
                logger.warning("building the event loop's renderer failed: %s", error)
                return
            self._inline = InlineRenderer(renderer, self)

        def _fill(self) -> None:
            while True:
                with self._grow_lock:
                    if self._built >= self._capacity:
                        return
                    self._built += 1
                try:
                    renderer = self._make_renderer()
                except Exception as error:
                    with self._grow_lock:
                        self._built -= 1
                    logger.warning("building a spare renderer failed: %s", error)
                    return
                self._idle.put(renderer)

        def _grow_or_wait(self) -> Any:
            with self._grow_lock:
                grow = self._built < self._capacity
                if grow:
                    self._built += 1
            if not grow:
                # Renderers calls pool methods on worker threads, so blocking here is fine.
                return self._idle.get()
            try:
                return self._make_renderer()
            except BaseException:
                with self._grow_lock:
                    self._built -= 1
                raise

    return GrowingRendererPool


@functools.cache
def growing_pool_class() -> type:
    """The pool class (built lazily so that importing this module does not import Renderers)."""
    return _make_growing_pool_class()


def _renderer_factory(spec: RendererSpec) -> Callable[[], Any]:
    def factory() -> Any:
        from renderers.base import create_renderer

        from miles_verifiers.episodes.preloaded import load_tokenizer

        tokenizer = load_tokenizer(spec.tokenizer_source)
        if spec.identity is not None:
            # Renderers picks the renderer class from the tokenizer's name; a local path has
            # none it knows, so name it after the registered model it is.
            tokenizer.name_or_path = spec.identity
        return create_renderer(
            tokenizer, None, chat_template_kwargs=spec.chat_template_kwargs or None
        )

    return factory


def _build_pool(spec: RendererSpec) -> Any:
    # Import transformers (and AutoTokenizer) on this thread before any tokenizer is loaded:
    # two threads racing through transformers' lazy imports can fail with "cannot import name
    # 'AutoTokenizer'", and the pool may later load tokenizers on worker threads.
    import transformers  # noqa: F401
    from transformers import AutoTokenizer  # noqa: F401

    # With two or more renderers, one of them is the event loop's (short prompts); the rest
    # serve worker threads. A pool of one keeps it for the threads: every render takes one.
    loop_renderer = spec.pool_size > 1
    try:
        threads = spec.pool_size - 1 if loop_renderer else spec.pool_size
        pool = growing_pool_class()(_renderer_factory(spec), threads, loop_renderer=loop_renderer)
    except (OSError, ValueError, TypeError, ImportError) as error:
        raise _renderer_setup_error(spec, error) from error
    if spec.pool_size > 1:
        # The other renderers (the loop's last) load in the background: Miles starts SGLang
        # after building the rollout function, so they are normally ready before the first
        # request (until the loop's is, every render takes a thread).
        threading.Thread(target=pool.warm_up, name="renderer-pool-warm-up", daemon=True).start()
    return pool


def load_one_renderer(spec: RendererSpec) -> int | None:
    """Build one renderer for ``spec`` (the construction check that the tokenizer loads) and
    return its vocabulary size, which engine answers are checked against."""
    import transformers  # noqa: F401  (see _build_pool)

    try:
        renderer = _renderer_factory(spec)()
    except (OSError, ValueError, TypeError, ImportError) as error:
        raise _renderer_setup_error(spec, error) from error
    return renderer_vocab_size(renderer)


def _renderer_setup_error(spec: RendererSpec, error: BaseException) -> RendererSetupError:
    detail = f"{type(error).__name__}: {error}"
    if "chat_template_kwargs" in str(error):
        return RendererSetupError(
            f"the renderer for {spec.model_label!r} rejects --apply-chat-template-kwargs "
            f"{spec.chat_template_kwargs_json} ({detail}). Fix: pass only switches that model's "
            "chat template has (e.g. enable_thinking for Qwen3), and name a registered Renderers "
            f"model in {IDENTITY_FLAGS} so its renderer is known."
        )
    return RendererSetupError(
        f"could not load the tokenizer/renderer for {spec.tokenizer_source!r} ({detail}). Fix: "
        f"point {IDENTITY_FLAGS} at a tokenizer available on this machine (a local checkpoint "
        "directory, or a hub id already in the Hugging Face cache when running offline)."
    )


# One pool per spec and process: tokenizers are expensive, and every VerifiersRolloutFn built
# for the same model (train and eval, legacy and class path, repeated constructions in a test
# session) can share them. Bounded, so a long-lived process does not hoard tokenizers.
@functools.lru_cache(maxsize=4)
def shared_renderer_pool(spec: RendererSpec) -> Any:
    """The process-wide renderer pool for ``spec`` (built on first use, then reused)."""
    return _build_pool(spec)


# -- the client --------------------------------------------------------------------------------

# The renderer the request running in this task renders with, when it is not the pool (see
# miles_verifiers.episodes.inline_render). A context variable, because one client serves many
# concurrent requests and Verifiers asks for the renderer in the middle of each.
_REQUEST_RENDERER: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "miles_verifiers_request_renderer", default=None
)


class MilesTrainClient(FixedRendererPool, TrainClient):
    """Verifiers' ``TrainClient`` with the shared renderer pool and explicit refusals.

    One is made per rollout call, around that call's own transport; :meth:`end` makes every
    later request fail at once (so cancelled episodes wind down instead of running on).
    """

    def __init__(self, transport: Any, pool: Any, spec: RendererSpec) -> None:
        super().__init__(
            transport,
            pool_size=spec.pool_size,
            renderer_model_name=spec.tokenizer_source,
        )
        self.use_renderer_pool(pool)
        self._renderers = pool
        self._spec = spec
        self._ended = False

    def renderer_for_request(self) -> Any:
        return _REQUEST_RENDERER.get() or super().renderer_for_request()

    def _inline_renderer_for(self, body: Mapping[str, Any], turn: Any) -> Any:
        """The loop's renderer when this request's prompt is short and it is built, else None."""
        inline = getattr(self._renderers, "inline_renderer", None)
        if inline is None:
            return None
        messages = turn.prompt if turn is not None else body.get("messages") or ()
        return inline if renders_inline(prompt_size(messages, body.get("tools"))) else None

    def end(self) -> None:
        """Refuse every request from now on (the owning rollout call is over)."""
        self._ended = True

    @property
    def ended(self) -> bool:
        return self._ended

    async def get_response(
        self,
        dialect: Any,
        body: dict,
        model: str,
        sampling_args: Any,
        session_id: str | None = None,
        turn: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        if self._ended:
            raise CallEndedError(
                "the rollout call this request belongs to has ended (it was cancelled or "
                "finished); the request was not sent to SGLang.",
                status_code=_REFUSED,
            )
        chosen = _REQUEST_RENDERER.set(self._inline_renderer_for(body, turn))
        try:
            return await self._respond(
                dialect, body, model, sampling_args, session_id, turn, headers
            )
        finally:
            _REQUEST_RENDERER.reset(chosen)

    async def _respond(
        self,
        dialect: Any,
        body: dict,
        model: str,
        sampling_args: Any,
        session_id: str | None,
        turn: Any,
        headers: Mapping[str, str] | None,
    ) -> Any:
        try:
            return await super().get_response(
                dialect,
                body,
                model,
                sampling_args,
                session_id=session_id,
                turn=turn,
                headers=headers,
            )
        except NotImplementedError as error:
            raise UnsupportedRequestError(
                f"the harness sent a request the token path cannot render ({error}).",
                "use a harness that talks to the model through /v1/chat/completions without "
                "streaming; OpenAI Responses and Anthropic Messages requests are not rendered "
                "to token ids.",
            ) from error
        except NonTextContentError as error:
            raise UnsupportedRequestError(
                f"{error.where} holds a content part of type {error.part_type!r}; the Miles "
                "token path sends token ids only, so the model would never see it.",
                "send text only (text parts are fine), or leave media tasks out of this run.",
            ) from error
        except ValueError as error:
            if not is_tools_refusal(error):
                raise
            raise UnsupportedRequestError(
                f"the harness offered tools, but the renderer for {self._spec.model_label!r} "
                f"cannot render tool calls ({error}).",
                f"name a model Renderers has a tool-capable renderer for in {IDENTITY_FLAGS} "
                "(e.g. --sglang-tokenizer-path Qwen/Qwen3-0.6B when the checkpoint is a local "
                "copy of that model).",
            ) from error

    async def relay(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedRequestError(
            "the harness asked for a streamed completion; the Miles transport samples token "
            "ids and returns them whole.",
            "turn streaming off in the harness (stream=false).",
        )

    async def relay_aux(self, dialect: Any, route: str, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedRequestError(
            f"the harness called the auxiliary route {route!r}, which only a provider relay "
            "can answer.",
            "use a chat-completions harness that does not call auxiliary routes (such as "
            "Anthropic's count_tokens).",
        )
