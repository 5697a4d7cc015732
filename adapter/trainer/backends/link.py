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
        """The reply to ``payload``. Raises :class:`WorkerLostError` when the worker dies or
        does not answer within ``timeout_s`` (the caller then kills it)."""
        ...

    def kill(self) -> None:
        """Stop the worker now, from any thread, without waiting on an event loop (blocking,
        bounded)."""
        ...

    async def stop(self) -> None:
        """What :meth:`kill` does, on the event loop that started the worker, without
        blocking that loop."""
        ...
