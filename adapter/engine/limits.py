"""The request-length limits an SGLang engine reports, read once so requests stay inside them.

SGLang's scheduler refuses a prompt of ``max_req_input_len`` tokens or more (HTTP 400) and
silently caps ``max_new_tokens`` at ``max_req_len - prompt - 1``, where ``max_req_len =
max_req_input_len + 5 = min(context_length, kv_capacity) - 1``. The engine reports
``max_req_input_len`` and ``context_length`` in ``GET /server_info``; knowing them, the
transport ends an overlong prompt as ``context_length`` before sending it and asks for no more
tokens than the engine will generate.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

__all__ = [
    "INPUT_RESERVE",
    "EngineLimits",
    "engine_limits_from_info",
    "fetch_deployment_limits",
    "fetch_engine_limits",
    "tightest",
]

logger = logging.getLogger(__name__)

# SGLang sizes the longest accepted prompt 5 tokens below its per-request limit.
INPUT_RESERVE = 5
_INFO_PATHS = ("/server_info", "/get_server_info")


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


def tightest(limits: list[EngineLimits]) -> EngineLimits:
    """The limits every one of several workers accepts (the smallest of each reported value)."""
    inputs = [x.max_req_input_len for x in limits if x.max_req_input_len is not None]
    contexts = [x.context_length for x in limits if x.context_length is not None]
    return EngineLimits(
        max_req_input_len=min(inputs) if inputs else None,
        context_length=min(contexts) if contexts else None,
    )


def _positive_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def engine_limits_from_info(body: object) -> EngineLimits:
    """The limits in a ``/server_info`` body (fields missing or malformed are None)."""
    if not isinstance(body, dict):
        return EngineLimits()
    return EngineLimits(
        max_req_input_len=_positive_int(body.get("max_req_input_len")),
        context_length=_positive_int(body.get("context_length")),
    )


async def fetch_engine_limits(
    client: httpx.AsyncClient, base_url: str, *, timeout_s: float
) -> EngineLimits:
    """Read the engine's limits; an engine or router that does not say gives empty limits.

    Never raises for the engine's answer: the limits only sharpen the clamp, and SGLang's own
    refusal is still recognised when they are unknown.
    """
    for path in _INFO_PATHS:
        url = f"{base_url}{path}"
        try:
            response = await client.get(url, timeout=timeout_s)
        except httpx.HTTPError as exc:
            logger.info("could not read the engine's limits from %s: %s", url, exc)
            return EngineLimits()
        if response.status_code in (404, 405):
            continue
        if response.status_code != 200:
            logger.info(
                "could not read the engine's limits: GET %s: HTTP %s", url, response.status_code
            )
            return EngineLimits()
        try:
            return engine_limits_from_info(response.json())
        except ValueError:
            return EngineLimits()
    return EngineLimits()


# Workers asked for their limits when the router does not report them; a bound on the probes.
MAX_WORKERS_PROBED = 8


async def fetch_deployment_limits(
    client: httpx.AsyncClient,
    base_url: str,
    list_workers: Callable[[], Awaitable[Sequence[str]]],
    *,
    timeout_s: float,
) -> EngineLimits:
    """The limits at ``base_url``; when it is a router that does not report them (the Rust
    sglang-router answers its own summary), the tightest limits of its workers."""
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
    return tightest(found)
