"""Aborting a turn while the engine holds it, shared by the engine and topology tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from verifiers.v1.clients.train import TrainClient
from verifiers.v1.errors import ProviderError

from miles_verifiers.engine.workers import AbortReport
from miles_verifiers.episodes.transport import SGLangTransport

POLL_S = 0.01


async def abort_mid_turn(
    client: TrainClient,
    transport: SGLangTransport,
    turn: Coroutine[Any, Any, Any],
    in_flight: Callable[[], Sequence[str]],
    *,
    turn_timeout_s: float,
) -> tuple[ProviderError | None, AbortReport]:
    """Run ``turn`` (a model turn through ``client``), abort the transport's requests once
    ``in_flight`` shows the engine holding it, and return the turn's ProviderError (None if
    it completed) with the abort report.

    The client is closed only after both have ended. The turn ends as soon as the engine
    aborts it, while the sweep may still be posting its other rids; closing the client then
    would close the transport's connections under those posts and fail the sweep.
    """
    running = asyncio.create_task(turn)
    try:
        for _ in range(int(turn_timeout_s / POLL_S)):
            if in_flight():
                break
            await asyncio.sleep(POLL_S)
        else:
            raise AssertionError(f"the engine never held the turn within {turn_timeout_s} s")
        report = await transport.abort()
        try:
            await asyncio.wait_for(running, timeout=turn_timeout_s)
        except ProviderError as exc:
            return exc, report
        return None, report
    finally:
        running.cancel()
        await client.close()
