"""Render short prompts on the event loop; leave long ones to Renderers' worker threads. For
most agentic turns the thread hop costs more than the render (about 8% of the rollout loop's
time on single-turn tasks), while a prompt within the limits below holds the loop a few
milliseconds at most. Both paths render alike, so they produce the same token ids.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from miles_verifiers.episodes.content import field_of, plain_text_messages

INLINE_MAX_MESSAGES = 12
"""At most this many messages in a prompt rendered on the loop."""
INLINE_MAX_CHARS = 4096
"""At most this many characters (message text, tool-call arguments, tool schemas)."""


@dataclass(frozen=True)
class PromptSize:
    messages: int
    chars: int


def _text_length(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, Sequence):
        return sum(_text_length(field_of(part, "text")) for part in content)
    return len(str(content))


def _message_chars(message: Any) -> int:
    chars = _text_length(field_of(message, "content"))
    chars += _text_length(field_of(message, "reasoning_content"))
    for call in field_of(message, "tool_calls") or ():
        function = field_of(call, "function") or call
        chars += sum(len(str(field_of(function, key) or "")) for key in ("name", "arguments"))
    return chars


def prompt_size(messages: Sequence[Any], tools: Sequence[Any] | None = None) -> PromptSize:
    """How much a prompt holds: wire dicts and Verifiers' typed messages alike."""
    chars = sum(_message_chars(message) for message in messages)
    chars += sum(len(str(tool)) for tool in tools or ())
    return PromptSize(messages=len(messages), chars=chars)


def renders_inline(size: PromptSize) -> bool:
    """True when a prompt is short enough to render on the event loop."""
    return size.messages <= INLINE_MAX_MESSAGES and size.chars <= INLINE_MAX_CHARS


class PlainTextRendering:
    """The renderer methods Renderers' ``generate`` calls, each on a renderer from
    ``checkout()``, with content-part lists made plain text first (renderers disagree on them;
    see :mod:`miles_verifiers.episodes.content`)."""

    def checkout(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def render(self, messages: Any, **kwargs: Any) -> Any:
        plain = plain_text_messages(messages)
        with self.checkout() as renderer:
            return renderer.render(plain, **kwargs)

    def render_ids(self, messages: Any, **kwargs: Any) -> Any:
        plain = plain_text_messages(messages)
        with self.checkout() as renderer:
            return renderer.render_ids(plain, **kwargs)

    def bridge_to_next_turn(
        self, previous_prompt_ids: Any, previous_completion_ids: Any, new_messages: Any, **kw: Any
    ) -> Any:
        plain = plain_text_messages(new_messages)
        with self.checkout() as renderer:
            return renderer.bridge_to_next_turn(
                previous_prompt_ids, previous_completion_ids, plain, **kw
            )

    def parse_response(self, completion_ids: Any, **kwargs: Any) -> Any:
        with self.checkout() as renderer:
            return renderer.parse_response(completion_ids, **kwargs)

    def get_stop_token_ids(self) -> Any:
        with self.checkout() as renderer:
            return renderer.get_stop_token_ids()


class InlineRenderer(PlainTextRendering):
    """One renderer kept for the event loop; not a ``RendererPool``, so Renderers runs its work
    inline. When two loops on two threads meet, the second takes a renderer from the pool."""

    def __init__(self, renderer: Any, pool: Any) -> None:
        self._renderer = renderer
        self._fallback = pool
        self._busy = threading.Lock()

    # Renderers' generate reads these off whatever it renders with; the pool has them.
    @property
    def supports_tools(self) -> bool:
        return bool(self._fallback.supports_tools)

    @property
    def is_multimodal(self) -> bool:
        return bool(self._fallback.is_multimodal)

    @contextmanager
    def checkout(self) -> Iterator[Any]:
        if self._busy.acquire(blocking=False):
            try:
                yield self._renderer
            finally:
                self._busy.release()
        else:
            with self._fallback.checkout() as renderer:
                yield renderer
