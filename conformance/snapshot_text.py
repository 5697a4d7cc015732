"""Readable snapshot texts: token ids next to the text they decode to, span by span.

Layout (one file per case)::

    model: Qwen/Qwen3-0.6B
    renderer: Qwen3Renderer
    ...
    == turn 1 prompt (155 tokens) ==
    - span [0, 120) message 0 (system), 120 tokens
      ids: [151644, 8948, ...]
      text:
        │<|im_start|>system
        │You are ...

Every token id of the file sits on an ``ids:`` line (``drift.parse_ids`` reads them back);
decoded text lines start with ``│`` so text can never be mistaken for ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Decode = Callable[[Sequence[int]], str]
TEXT_MARK = "│"


def spans(message_indices: Sequence[int]) -> list[tuple[int, int, int]]:
    """Maximal runs of one message index: ``(start, end, message_index)``."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for position in range(1, len(message_indices) + 1):
        if position == len(message_indices) or message_indices[position] != message_indices[start]:
            runs.append((start, position, message_indices[start]))
            start = position
    return runs


def ids_line(ids: Iterable[int], indent: str = "  ") -> str:
    return f"{indent}ids: [{', '.join(str(int(i)) for i in ids)}]"


def text_block(text: str, indent: str = "  ") -> list[str]:
    return [f"{indent}text:"] + [f"{indent}  {TEXT_MARK}{line}" for line in text.split("\n")]


def header(fields: Mapping[str, Any]) -> list[str]:
    return [
        f"{key}: {value if isinstance(value, str) else json.dumps(value, sort_keys=True)}"
        for key, value in fields.items()
    ]


def _span_label(index: int, messages: Sequence[Mapping[str, Any]]) -> str:
    if index == -2:
        return "sampled by the model"
    if index < 0:
        return "scaffold"
    role = messages[index].get("role", "?") if index < len(messages) else "?"
    return f"message {index} ({role})"


def step_lines(
    title: str,
    token_ids: Sequence[int],
    message_indices: Sequence[int],
    messages: Sequence[Mapping[str, Any]],
    sampled_mask: Sequence[bool],
    notes: Sequence[str],
    decode: Decode,
) -> list[str]:
    lines = [f"== {title} ({len(token_ids)} tokens) =="]
    lines += [f"note: {note}" for note in notes]
    for start, end, index in spans(message_indices):
        sampled = sum(1 for flag in sampled_mask[start:end] if flag) if sampled_mask else 0
        extra = f", {sampled} sampled" if sampled and index != -2 else ""
        lines.append(
            f"- span [{start}, {end}) {_span_label(index, messages)}, {end - start} tokens{extra}"
        )
        lines.append(ids_line(token_ids[start:end]))
        lines += text_block(decode(list(token_ids[start:end])))
    return lines


def document(header_fields: Mapping[str, Any], sections: Iterable[list[str]]) -> str:
    lines = header(header_fields)
    for section in sections:
        lines.append("")
        lines += section
    return "\n".join(lines) + "\n"
