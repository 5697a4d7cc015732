"""Chat content parts made plain text before any renderer sees them: Renderers 0.1.10 treat a
part list differently per model (Qwen3 renders the turn empty; Llama 3 and gpt-oss join the
text parts), so the adapter joins them itself. Any other part (an image, audio ...) is refused:
the token path sends token ids only, so the model would be trained on a prompt it never saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from miles_verifiers.errors import SetupError


class NonTextContentError(SetupError, ValueError):
    """A message holds a content part the token path cannot send (``part_type`` names it)."""

    def __init__(self, part_type: str, where: str) -> None:
        self.part_type = part_type
        self.where = where
        super().__init__(
            f"{where} holds a content part of type {part_type!r}, but the Miles rollout sends "
            "token ids only: the part would be dropped without the model ever seeing it. Fix: "
            "give the prompt as text (text parts are fine), or leave tasks with media out of "
            "this run."
        )


def field_of(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _non_text_part(content: Any) -> str | None:
    """The type of the first non-text part of a part list (a bare string is text); None for
    text only, or content that is not a list."""
    if not isinstance(content, (list, tuple)):
        return None
    for part in content:
        kind = "text" if isinstance(part, str) else field_of(part, "type")
        label = "untyped" if kind is None else str(kind)
        if label != "text":
            return label
    return None


def _has_part_list(message: Any) -> bool:
    return isinstance(message, Mapping) and isinstance(message.get("content"), (list, tuple))


def plain_text_messages(messages: Sequence[Any]) -> Sequence[Any]:
    """Wire messages with part-list content joined into strings (``messages`` itself when none
    has one; new dicts, never the caller's); :class:`NonTextContentError` for a non-text part."""
    if not any(_has_part_list(m) for m in messages):
        return messages
    plain = []
    for position, message in enumerate(messages):
        if _has_part_list(message):
            parts = message["content"]
            kind = _non_text_part(parts)
            if kind is not None:
                where = f"message {position} (role {message.get('role')!r}) of a model request"
                raise NonTextContentError(kind, where)
            text = "".join(p if isinstance(p, str) else field_of(p, "text") or "" for p in parts)
            message = {**message, "content": text}
        plain.append(message)
    return plain


def check_task_prompts(tasks: Iterable[Any]) -> None:
    """Refuse, before anything is sent, a task whose prompt holds a non-text content part."""
    for task in tasks:
        data = getattr(task, "data", task)
        prompt = getattr(data, "prompt", None)
        for message in prompt if isinstance(prompt, (list, tuple)) else ():
            kind = _non_text_part(field_of(message, "content"))
            if kind is not None:
                name = getattr(data, "name", None)
                label = f"task {getattr(data, 'idx', '?')}" + (f" ({name!r})" if name else "")
                raise NonTextContentError(kind, f"the prompt of {label}")
