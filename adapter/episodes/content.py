"""Chat content in OpenAI content-part form, made plain text before any renderer sees it.

A message's ``content`` may be a list of parts (``[{"type": "text", "text": ...}, ...]``).
Renderers 0.1.10 handle such lists differently per model: the Qwen3 renderer renders the turn
EMPTY (its chat template only takes string content), while the Llama 3 and gpt-oss renderers
concatenate the text parts with nothing between them (as Hugging Face templates that accept
parts do). The adapter therefore joins text parts itself, the same way for every model, so a
question written in part form reaches the engine as its text.

Any other part (an image, audio ...) is refused: the Miles token path sends token ids only, so
the part would be dropped silently and the model trained on a prompt it never saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from miles_verifiers.errors import SetupError

TEXT_PART = "text"


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


def part_type(part: Any) -> str:
    """The ``type`` of one content part (a dict or a typed part); a bare string is text."""
    if isinstance(part, str):
        return TEXT_PART
    kind = part.get("type") if isinstance(part, Mapping) else getattr(part, "type", None)
    return str(kind) if kind is not None else "untyped"


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
    return text or ""


def first_non_text_part(content: Any) -> str | None:
    """The type of the first non-text part of ``content``; None for text (or no content)."""
    if not isinstance(content, (list, tuple)):
        return None
    return next((kind for kind in map(part_type, content) if kind != TEXT_PART), None)


def plain_text(content: Any, where: str) -> Any:
    """``content`` with text parts joined into one string; other content is returned as is.

    Raises :class:`NonTextContentError` (naming ``where``) for a part that is not text.
    """
    if not isinstance(content, (list, tuple)):
        return content
    kind = first_non_text_part(content)
    if kind is not None:
        raise NonTextContentError(kind, where)
    return "".join(_part_text(part) for part in content)


def plain_text_messages(messages: Sequence[Any]) -> Sequence[Any]:
    """Wire messages (dicts) with part-list content joined into strings.

    Returns ``messages`` itself when no message has list content, so the common case copies
    nothing; otherwise a new list with new dicts for the changed messages (the caller's
    messages are never modified).
    """
    if not any(_has_part_list(m) for m in messages):
        return messages
    return [
        {**m, "content": plain_text(m["content"], _describe(m, position))}
        if _has_part_list(m)
        else m
        for position, m in enumerate(messages)
    ]


def prompt_non_text_part(prompt: Any) -> str | None:
    """The type of the first non-text part in a task prompt (a string or typed messages)."""
    if not isinstance(prompt, (list, tuple)):
        return None
    for message in prompt:
        content = (
            message.get("content")
            if isinstance(message, Mapping)
            else getattr(message, "content", None)
        )
        kind = first_non_text_part(content)
        if kind is not None:
            return kind
    return None


def check_task_prompts(tasks: Iterable[Any]) -> None:
    """Refuse, before anything is sent, a task whose prompt holds a non-text content part."""
    for task in tasks:
        data = getattr(task, "data", task)
        kind = prompt_non_text_part(getattr(data, "prompt", None))
        if kind is not None:
            raise NonTextContentError(kind, f"the prompt of {_task_label(data)}")


def _task_label(data: Any) -> str:
    name = getattr(data, "name", None)
    label = f"task {getattr(data, 'idx', '?')}"
    return f"{label} ({name!r})" if name else label


def _has_part_list(message: Any) -> bool:
    return isinstance(message, Mapping) and isinstance(message.get("content"), (list, tuple))


def _describe(message: Mapping[str, Any], position: int) -> str:
    return f"message {position} (role {message.get('role')!r}) of a model request"


__all__ = [
    "NonTextContentError",
    "check_task_prompts",
    "first_non_text_part",
    "part_type",
    "plain_text",
    "plain_text_messages",
    "prompt_non_text_part",
]
