"""The engine's HTTP client: pooled connections, the served-model check, worker listing, aborts.

The trainer side checks the served model and sweeps leftover requests with it; the episode
side's transport builds its generate path on top of it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Sequence

import httpx

from miles_verifiers.engine.identity import check_served_model
from miles_verifiers.engine.proxies import direct_mounts
from miles_verifiers.engine.settings import (
    EngineAddressError,
    TransportSettings,
    resolve_engine_url,
)
from miles_verifiers.engine.tls import default_tls_context, get_json
from miles_verifiers.engine.workers import AbortReport, abort_on_workers, list_workers

logger = logging.getLogger(__name__)

# A worker answers /model_info; sgl-router only forwards the older /get_model_info name.
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")

# httpx scans every connection of a pool on each request event, so one pool of hundreds is
# CPU-bound at high concurrency: requests go round-robin over pools ("lanes") of this size.
CONNECTIONS_PER_LANE = 16


def _lane_sizes(max_connections: int) -> list[int]:
    """Split a connection budget into pools of at most CONNECTIONS_PER_LANE that sum to it."""
    full, rest = divmod(max_connections, CONNECTIONS_PER_LANE)
    return [CONNECTIONS_PER_LANE] * full + ([rest] if rest else [])


class EngineClient:
    """One deployment's HTTP client, safe for many tasks on one event loop."""

    def __init__(
        self,
        settings: TransportSettings,
        *,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = settings
        self._rid_prefix = settings.rid_prefix or f"mv_{uuid.uuid4().hex[:16]}"
        self._in_flight: set[str] = set()
        self._http_transport = http_transport
        self._lanes: list[httpx.AsyncClient] = []
        self._lanes_loop: asyncio.AbstractEventLoop | None = None
        self._next_lane = itertools.count()
        self._model_checked = False

    @property
    def settings(self) -> TransportSettings:
        return self._settings

    @property
    def rid_prefix(self) -> str:
        """Every rid this client sends is ``f"{rid_prefix}-<n>"``."""
        return self._rid_prefix

    @property
    def in_flight_rids(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    async def close(self) -> None:
        """Close the pooled HTTP clients; a later request opens new ones."""
        lanes, loop = self._lanes, self._lanes_loop
        self._lanes, self._lanes_loop = [], None
        if lanes and loop is asyncio.get_running_loop():
            await asyncio.gather(*(lane.aclose() for lane in lanes))
        # Clients of another (usually finished) loop cannot be closed from this one: dropped.

    async def verify_served_model(
        self, expected: str, *, aliases: Sequence[str] = (), timeout_s: float = 10.0
    ) -> None:
        """Refuse (once per client) an engine whose ``/model_info`` names another model."""
        if self._model_checked:
            return
        base = resolve_engine_url(self._settings)
        info, problem = await get_json(self._http(), base, MODEL_INFO_PATHS, timeout_s=timeout_s)
        self._model_checked = True
        if problem is not None:
            logger.debug("not checking the served model: %s", problem)
            return
        check_served_model(expected, info, base, aliases=aliases)

    async def list_workers(self, *, timeout_s: float = 10.0) -> tuple[str, ...]:
        """The worker URLs behind the configured router."""
        return await list_workers(
            self._http(), resolve_engine_url(self._settings), timeout_s=timeout_s
        )

    async def abort(
        self, worker_urls: Sequence[str] | None = None, *, timeout_s: float = 10.0
    ) -> AbortReport:
        """Abort each in-flight rid, and the rid prefix, on the workers (default: the router's)."""
        if worker_urls is None:
            worker_urls = await self.list_workers(timeout_s=timeout_s)
        rids = [f"{self._rid_prefix}-", *sorted(self._in_flight)]
        return await abort_on_workers(self._http(), worker_urls, rids, timeout_s=timeout_s)

    def _http(self) -> httpx.AsyncClient:
        """The next pooled client of the running event loop (httpx clients cannot change loops)."""
        loop = asyncio.get_running_loop()
        if not self._lanes or self._lanes_loop is not loop or self._lanes[0].is_closed:
            # Loopback engines are reached past any proxy (a given http_transport ignores them).
            mounts = None
            if self._http_transport is None:
                try:
                    mounts = direct_mounts([resolve_engine_url(self._settings)])
                except EngineAddressError:
                    mounts = direct_mounts()
            self._lanes = [
                httpx.AsyncClient(
                    limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                    timeout=self._settings.timeouts.to_httpx(),
                    transport=self._http_transport,
                    verify=default_tls_context(),
                    mounts=mounts,
                )
                for size in _lane_sizes(self._settings.max_connections)
            ]
            self._lanes_loop = loop
        return self._lanes[next(self._next_lane) % len(self._lanes)]
