"""Bounded memory of the sessions (rollouts) a transport has already served."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PrefixCacheLedger", "PrefixCacheUsage", "SessionLedger"]


class SessionLedger:
    """Least-recently-used set of session ids, holding at most ``capacity`` of them.

    It tells a session's first request from its later ones, so the first-prompt limit applies
    once per rollout. When a session is evicted its next request counts as a first one again;
    the capacity should exceed the number of rollouts in flight at once.
    All methods are synchronous, so concurrent asyncio tasks cannot interleave inside them.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._seen

    def record(self, session_id: str) -> None:
        """Mark ``session_id`` as seen and most recent, evicting the least recent if full."""
        self._seen[session_id] = None
        self._seen.move_to_end(session_id)
        while len(self._seen) > self._capacity:
            self._seen.popitem(last=False)


@dataclass(frozen=True)
class PrefixCacheUsage:
    """Prompt tokens a session sent and how many of them the engine's prefix cache held,
    summed over its generate calls (SGLang's ``meta_info`` ``prompt_tokens`` and
    ``cached_tokens``)."""

    cached_tokens: int = 0
    prompt_tokens: int = 0

    def plus(self, meta_info: Mapping[str, Any]) -> PrefixCacheUsage:
        return PrefixCacheUsage(
            self.cached_tokens + _count(meta_info.get("cached_tokens")),
            self.prompt_tokens + _count(meta_info.get("prompt_tokens")),
        )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class PrefixCacheLedger:
    """Per-session :class:`PrefixCacheUsage`, least recently used first out, at most
    ``capacity`` sessions (like :class:`SessionLedger`)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._usage: OrderedDict[str, PrefixCacheUsage] = OrderedDict()

    def add(self, session_id: str, meta_info: Mapping[str, Any]) -> None:
        """Count one answered generate call of ``session_id``."""
        self._usage[session_id] = self._usage.get(session_id, PrefixCacheUsage()).plus(meta_info)
        self._usage.move_to_end(session_id)
        while len(self._usage) > self._capacity:
            self._usage.popitem(last=False)

    def get(self, session_id: str) -> PrefixCacheUsage | None:
        return self._usage.get(session_id)
