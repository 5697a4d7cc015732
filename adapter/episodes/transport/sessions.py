"""Bounded memory of the sessions (rollouts) a transport has already served."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PrefixCacheUsage:
    """A session's prompt tokens and how many the engine's prefix cache held, summed over its
    generate calls (SGLang's ``meta_info`` ``prompt_tokens`` and ``cached_tokens``)."""

    cached_tokens: int = 0
    prompt_tokens: int = 0

    def plus(self, meta_info: Mapping[str, Any]) -> PrefixCacheUsage:
        return PrefixCacheUsage(
            self.cached_tokens + _count(meta_info.get("cached_tokens")),
            self.prompt_tokens + _count(meta_info.get("prompt_tokens")),
        )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class SessionLedger(OrderedDict[str, PrefixCacheUsage | None]):
    """The last ``capacity`` sessions seen, each with the usage of its answered calls (None
    before the first answer). An evicted session's next request counts as its first again (the
    first-prompt limit applies), so the capacity should exceed the rollouts in flight at once."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        super().__init__()
        self.capacity = capacity

    def __setitem__(self, session_id: str, value: PrefixCacheUsage | None) -> None:
        super().__setitem__(session_id, value)
        self.move_to_end(session_id)
        while len(self) > self.capacity:
            self.popitem(last=False)

    def record(self, session_id: str) -> None:
        self[session_id] = self.get(session_id)

    def add(self, session_id: str, meta_info: Mapping[str, Any]) -> None:
        self[session_id] = (self.get(session_id) or PrefixCacheUsage()).plus(meta_info)
