"""Bounded memory of the sessions (rollouts) a transport has already served."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["SessionLedger"]


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
