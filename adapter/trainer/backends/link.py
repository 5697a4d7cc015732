"""What the pool needs from one worker, whichever backend runs it."""

from __future__ import annotations

from typing import Protocol

from miles_verifiers.errors import RolloutCallError


class WorkerLostError(RolloutCallError):
    """An episode worker died, closed its pipe, or did not answer in time."""


class WorkerLink(Protocol):
    """One running worker: send a request's bytes, get the reply's bytes."""

    @property
    def alive(self) -> bool: ...

    @property
    def description(self) -> str: ...

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        """The reply; :class:`WorkerLostError` if the worker dies or is late (then killed)."""

    def kill(self) -> None:
        """Stop the worker now, from any thread, blocking and bounded."""

    async def stop(self) -> None:
        """:meth:`kill` on the worker's event loop, without blocking it."""
