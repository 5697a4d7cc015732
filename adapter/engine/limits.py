"""The request-length limits an SGLang engine reports, read once so requests stay inside them.

SGLang refuses a prompt of ``max_req_input_len`` tokens or more (HTTP 400) and silently caps
``max_new_tokens`` at ``max_req_len - prompt - 1``, where ``max_req_len = max_req_input_len + 5``.
``GET /server_info`` reports ``max_req_input_len`` and ``context_length``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from miles_verifiers.engine.tls import get_json

logger = logging.getLogger(__name__)

INPUT_RESERVE = 5  # max_req_len - max_req_input_len
_INFO_PATHS = ("/server_info", "/get_server_info")
# Workers asked for their limits when the router does not report them; a bound on the probes.
MAX_WORKERS_PROBED = 8


@dataclass(frozen=True)
class EngineLimits:
    """What the engine accepts; a None field was not reported."""

    max_req_input_len: int | None = None
    context_length: int | None = None

    def new_token_room(self, prompt_len: int) -> int | None:
        """Most new tokens the engine generates after this prompt (None: unknown)."""
        if self.max_req_input_len is not None:
            return self.max_req_input_len + INPUT_RESERVE - 1 - prompt_len
        if self.context_length is not None:
            return self.context_length - prompt_len
        return None


def _positive_int(body: object, key: str) -> int | None:
    value = body.get(key) if isinstance(body, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


async def fetch_engine_limits(
    client: httpx.AsyncClient, base_url: str, *, timeout_s: float
) -> EngineLimits:
    """The engine's limits, None where unreported; never raises (they only sharpen the clamp)."""
    body, problem = await get_json(client, base_url, _INFO_PATHS, timeout_s=timeout_s)
    if problem is not None:
        logger.info("could not read the engine's limits: %s", problem)
    return EngineLimits(
        _positive_int(body, "max_req_input_len"), _positive_int(body, "context_length")
    )


async def fetch_deployment_limits(
    client: httpx.AsyncClient,
    base_url: str,
    list_workers: Callable[[], Awaitable[Sequence[str]]],
    *,
    timeout_s: float,
) -> EngineLimits:
    """The limits at ``base_url``, else (a router's own summary) its workers' smallest."""
    limits = await fetch_engine_limits(client, base_url, timeout_s=timeout_s)
    if limits.max_req_input_len is not None:
        return limits
    try:
        workers = [w for w in await list_workers() if w != base_url][:MAX_WORKERS_PROBED]
    except Exception as exc:
        logger.info("could not list workers to read their limits: %s", exc)
        return limits
    if not workers:
        return limits
    found = [await fetch_engine_limits(client, w, timeout_s=timeout_s) for w in workers]
    inputs = [x.max_req_input_len for x in found if x.max_req_input_len is not None]
    contexts = [x.context_length for x in found if x.context_length is not None]
    return EngineLimits(min(inputs, default=None), min(contexts, default=None))
