"""The model client Verifiers' rollouts talk to (a ``TrainClient`` that refuses what the token
path cannot serve, naming the fix, and stops when its rollout call ends), the growing renderer
pool behind it (one per spec and process) and the Renderers model id of a local checkpoint.
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
from pathlib import PurePath
from typing import Any

from verifiers.v1.clients.train import TrainClient
from verifiers.v1.errors import ProviderError

from miles_verifiers.episodes.content import NonTextContentError
from miles_verifiers.episodes.inline_render import (
    InlineRenderer,
    PlainTextRendering,
    prompt_size,
    renders_inline,
)
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
from miles_verifiers.protocol.messages import RendererSpecModel

logger = logging.getLogger(__name__)

IDENTITY_FLAGS = "--hf-checkpoint or --sglang-tokenizer-path"

# Status of the refusals: a 4xx, so no harness SDK retries them.
_REFUSED = 400


class UnsupportedRequestError(ProviderError, SetupError):
    """The harness asked for something the Miles token path cannot do: a setup problem, told
    apart from an episode's failure by its tagged message once Verifiers records it."""

    trace_code = UNSUPPORTED_REQUEST_CODE

    def __init__(self, what: str, fix: str) -> None:
        message = tag_message(UnsupportedRequestError, f"{what} Fix: {fix}")
        ProviderError.__init__(self, message, status_code=_REFUSED)


class CallEndedError(ProviderError, RolloutCallError):
    """A model request arrived after the rollout call that owns it had ended."""

    trace_code = "call_ended"

    def __init__(self) -> None:
        message = (
            "the rollout call this request belongs to has ended (it was cancelled or "
            "finished); the request was not sent to SGLang."
        )
        ProviderError.__init__(self, message, status_code=_REFUSED)


def renderer_identity(
    checkpoint: str | None, model_map: Mapping[str, str] | None = None
) -> str | None:
    """The Renderers model id behind ``checkpoint`` (an HF cache path's ``models--org--name``, or
    a registered id ending in the path's last component); None when there is none, or several
    that map to different renderers (``Qwen/Qwen3-0.6B`` and ``PrimeIntellect/Qwen3-0.6B``)."""
    if not checkpoint:
        return None
    from renderers.base import MODEL_RENDERER_MAP

    known = MODEL_RENDERER_MAP if model_map is None else model_map
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


def identify_renderer(hf_checkpoint: str | None, tokenizer_source: str | None) -> str | None:
    """The identity to render with: from the checkpoint first, then the tokenizer source."""
    return renderer_identity(hf_checkpoint) or renderer_identity(tokenizer_source)


@functools.cache
def growing_pool_class() -> type:
    """The pool class (built lazily so that importing this module does not import Renderers)."""
    base = renderer_pool_base()

    class GrowingRendererPool(PlainTextRendering, base):  # type: ignore[misc, valid-type]
        """A ``RendererPool`` (so Renderers moves its work to threads) that starts with one
        renderer and builds more on demand, up to ``size``: each loads its own tokenizer
        (about half a second for Qwen3), worth it only once two renders overlap."""

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
            self.built = 1  # renderers built so far
            self._grow_lock = threading.Lock()
            # What short prompts render with on the event loop (None until it is built).
            self.inline_renderer: InlineRenderer | None = None
            # Without a loop renderer every render takes a worker thread.
            self._inline_started = not loop_renderer
            self.vocab_size = renderer_vocab_size(first)

        @contextmanager
        def checkout(self) -> Iterator[Any]:
            try:
                renderer = self._idle.get_nowait()
            except queue.Empty:
                renderer = self._grow()
            if renderer is None:
                # Renderers calls pool methods on worker threads, so blocking here is fine.
                renderer = self._idle.get()
            try:
                yield renderer
            finally:
                self._idle.put(renderer)

        def warm_up(self) -> None:
            """Build the remaining renderers, then the event loop's own, so the loop never waits
            for a thread's (multimodal prompts take threads); run on a background thread."""
            try:
                while (renderer := self._grow()) is not None:
                    self._idle.put(renderer)
            except Exception as error:
                logger.warning("building a spare renderer failed: %s", error)
            with self._grow_lock:
                if self._inline_started or self.is_multimodal:
                    return
                self._inline_started = True
            try:
                renderer = self._make_renderer()
            except Exception as error:
                logger.warning("building the event loop's renderer failed: %s", error)
                return
            self.inline_renderer = InlineRenderer(renderer, self)

        def _grow(self) -> Any:
            """A new renderer, or None at capacity."""
            with self._grow_lock:
                if self.built >= self._capacity:
                    return None
                self.built += 1
            try:
                return self._make_renderer()
            except BaseException:
                with self._grow_lock:
                    self.built -= 1
                raise

    return GrowingRendererPool


def _build_renderer(spec: RendererSpecModel) -> Any:
    from renderers.base import create_renderer

    from miles_verifiers.episodes.preloaded import load_tokenizer

    tokenizer = load_tokenizer(spec.tokenizer_source)
    if spec.identity is not None:
        # Renderers picks the renderer class from the tokenizer's name; a local path has
        # none it knows, so name it after the registered model it is.
        tokenizer.name_or_path = spec.identity
    return create_renderer(
        tokenizer, None, chat_template_kwargs=json.loads(spec.chat_template_kwargs_json) or None
    )


@functools.lru_cache(maxsize=4)  # bounded: a long-lived process does not hoard tokenizers
def shared_renderer_pool(spec: RendererSpecModel) -> Any:
    """The process-wide renderer pool for ``spec``, shared by every client of that model."""
    # Imported here first: two threads racing through transformers' lazy imports can fail
    # with "cannot import name 'AutoTokenizer'", and the pool loads tokenizers on threads.
    import transformers  # noqa: F401
    from transformers import AutoTokenizer  # noqa: F401

    # With two or more renderers, one is the event loop's; a pool of one serves threads only.
    loop_renderer = spec.pool_size > 1
    try:
        threads = spec.pool_size - 1 if loop_renderer else spec.pool_size
        pool = growing_pool_class()(
            functools.partial(_build_renderer, spec), threads, loop_renderer=loop_renderer
        )
    except (OSError, ValueError, TypeError, ImportError) as error:
        raise _renderer_setup_error(spec, error) from error
    if spec.pool_size > 1:
        # The others (the loop's last) load in the background, normally before the first
        # request: Miles starts SGLang after building the rollout function.
        threading.Thread(target=pool.warm_up, name="renderer-pool-warm-up", daemon=True).start()
    return pool


def load_one_renderer(spec: RendererSpecModel) -> int | None:
    """Build one renderer for ``spec`` (the construction check that the tokenizer loads) and
    return its vocabulary size, which engine answers are checked against."""
    import transformers  # noqa: F401  (see shared_renderer_pool)

    try:
        renderer = _build_renderer(spec)
    except (OSError, ValueError, TypeError, ImportError) as error:
        raise _renderer_setup_error(spec, error) from error
    return renderer_vocab_size(renderer)


def _renderer_setup_error(spec: RendererSpecModel, error: BaseException) -> RendererSetupError:
    detail = f"{type(error).__name__}: {error}"
    if "chat_template_kwargs" in str(error):
        model = spec.identity or spec.tokenizer_source
        return RendererSetupError(
            f"the renderer for {model!r} rejects --apply-chat-template-kwargs "
            f"{spec.chat_template_kwargs_json} ({detail}). Fix: pass only switches that model's "
            "chat template has (e.g. enable_thinking for Qwen3), and name a registered Renderers "
            f"model in {IDENTITY_FLAGS} so its renderer is known."
        )
    return RendererSetupError(
        f"could not load the tokenizer/renderer for {spec.tokenizer_source!r} ({detail}). Fix: "
        f"point {IDENTITY_FLAGS} at a tokenizer available on this machine (a local checkpoint "
        "directory, or a hub id already in the Hugging Face cache when running offline)."
    )


# The renderer the request running in this task renders with, when not the pool: one client
# serves many concurrent requests, and Verifiers asks for the renderer in the middle of each.
_REQUEST_RENDERER: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "miles_verifiers_request_renderer", default=None
)


class MilesTrainClient(FixedRendererPool, TrainClient):
    """Verifiers' ``TrainClient`` with the shared renderer pool and explicit refusals, one per
    rollout call; after :meth:`end` every request fails at once (cancelled episodes wind down)."""

    def __init__(self, transport: Any, pool: Any, spec: RendererSpecModel) -> None:
        super().__init__(
            transport,
            pool_size=spec.pool_size,
            renderer_model_name=spec.tokenizer_source,
        )
        self.use_renderer_pool(pool)
        self._renderers = pool
        self._model_label = spec.identity or spec.tokenizer_source
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
            raise CallEndedError()
        chosen = _REQUEST_RENDERER.set(self._inline_renderer_for(body, turn))
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
                f"the harness offered tools, but the renderer for {self._model_label!r} "
                f"cannot render tool calls ({error}).",
                f"name a model Renderers has a tool-capable renderer for in {IDENTITY_FLAGS} "
                "(e.g. --sglang-tokenizer-path Qwen/Qwen3-0.6B when the checkpoint is a local "
                "copy of that model).",
            ) from error
        finally:
            _REQUEST_RENDERER.reset(chosen)

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
