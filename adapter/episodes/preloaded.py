"""Tokenizers the worker template loaded before forking, handed out once each in the child: a
load costs about 0.7 s of CPU and a worker makes two at its start.
"""

from __future__ import annotations

import contextlib
from typing import Any

# The copies a fork child may still take, by tokenizer source (filled in the template only).
_COPIES: dict[str, list[Any]] = {}


def preload(source: str, copies: int) -> None:
    """Load ``copies`` tokenizers of ``source`` (a failure is left to the child's own load)."""
    from renderers.base import load_tokenizer as load

    with contextlib.suppress(Exception):
        for _ in range(copies):
            _COPIES.setdefault(source, []).append(load(source))


def load_tokenizer(source: str) -> Any:
    """A tokenizer of ``source``: a copy the template loaded, else a fresh load."""
    with contextlib.suppress(KeyError, IndexError):
        return _COPIES[source].pop()
    from renderers.base import load_tokenizer as load

    return load(source)
