"""The HTTP shell: the object Verifiers' ``TrainClient`` uses in place of an ``AsyncOpenAI``.

It implements :class:`miles_verifiers.episodes.v02.upstream.RenderersClient`, the part of ``AsyncOpenAI``
that ``renderers.client.generate`` (0.1.10) and ``TrainClient.close`` use. Translation lives in
the pure modules; this one only does I/O, retries and the small amount of state (session
ledger, in-flight rids, the pooled client).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from miles_verifiers.engine.errors import (
    EngineAborted,
    MalformedOutput,
    RequestRejected,
    error_for_output,
    error_for_rejection,
    error_for_status,
    error_for_transport_failure,
    is_retryable_status,
    is_retryable_transport_error,
)
from miles_verifiers.engine.identity import check_served_model
from miles_verifiers.engine.limits import EngineLimits, fetch_deployment_limits
from miles_verifiers.engine.proxies import direct_mounts, environment_proxy_for
from miles_verifiers.engine.routers import keys_dropped_by_router
from miles_verifiers.engine.settings import (
    EngineAddressError,
    TransportSettings,
    resolve_engine_url,
)
from miles_verifiers.engine.tls import default_tls_context
from miles_verifiers.engine.workers import AbortReport, abort_on_workers, list_workers
from miles_verifiers.episodes.transport.probe import MODELS_PATHS, models_listing
from miles_verifiers.episodes.transport.request import (
    GenerateCall,
    build_generate_call,
    is_known_continuation,
)
from miles_verifiers.episodes.transport.response import convert_generate_output
from miles_verifiers.episodes.transport.sessions import (
    PrefixCacheLedger,
    PrefixCacheUsage,
    SessionLedger,
)
from miles_verifiers.episodes.v02.upstream import (
    GENERATE_SUFFIX,
    SESSION_HEADER,
    session_id_from_options,
)

__all__ = ["GENERATE_SUFFIX", "SESSION_HEADER", "SGLangTransport"]

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]

# A worker answers /model_info; sgl-router only forwards the older /get_model_info name.
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")

# Connections per pooled client: small enough that httpx's per-event pool scan stays cheap,
# large enough that a handful of clients cover a whole rollout's concurrency.
CONNECTIONS_PER_LANE = 16


def _lane_sizes(max_connections: int) -> list[int]:
    """Split a connection budget into pools of at most CONNECTIONS_PER_LANE that sum to it."""
    full, rest = divmod(max_connections, CONNECTIONS_PER_LANE)
    return [CONNECTIONS_PER_LANE] * full + ([rest] if rest else [])


class SGLangTransport:
    """Sends Renderers' generate requests to SGLang's native ``/generate``.

    Safe for many concurrent tasks on one event loop. ``http_transport`` replaces httpx's
    network layer (tests use ``httpx.MockTransport``); ``sleep`` is the backoff wait.
    ``router_drops_warned`` holds the sampling keys already warned about as dropped by the
    router; an owner that makes one transport per call passes one set to all of them, so the
    warning comes once per owner rather than once per call.
    """

    def __init__(
        self,
        settings: TransportSettings,
        *,
        http_transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        router_drops_warned: set[str] | None = None,
    ) -> None:
        self._settings = settings
        self._router_drops_warned = set() if router_drops_warned is None else router_drops_warned
        self._rid_prefix = settings.rid_prefix or f"mv_{uuid.uuid4().hex[:16]}"
        self._rid_numbers = itertools.count()
        self._sessions = SessionLedger(settings.session_cache_size)
        self._prefix_cache = PrefixCacheLedger(settings.session_cache_size)
        self._in_flight: set[str] = set()
        self._reported_keys: set[str] = set()
        self._http_transport = http_transport
        self._sleep = sleep
        # httpx's pool scans every connection it holds on each request event, so one pool of
        # hundreds of connections makes the client CPU-bound at high concurrency. Requests are
        # spread round-robin over small pools ("lanes") instead; see _lane_sizes.
        self._lanes: list[httpx.AsyncClient] = []
        self._lanes_loop: asyncio.AbstractEventLoop | None = None
        self._next_lane = itertools.count()
        self._engine_limits: EngineLimits | None = None
        self._limits_lock: asyncio.Lock | None = None
        self._model_checked = False

    @property
    def settings(self) -> TransportSettings:
        return self._settings

    # --- what TrainClient / renderers use --------------------------------------------------

    @property
    def base_url(self) -> httpx.URL:
        """``<engine>/v1``, resolved now (the router address may be set after construction)."""
        return httpx.URL(f"{resolve_engine_url(self._settings)}/v1")

    async def get(self, path: str, *, cast_to: object = None, **_: object) -> dict[str, Any]:
        """Answer Renderers' ``GET /models`` probe from the settings (see ``probe``)."""
        if path.strip("/") in MODELS_PATHS:
            return models_listing(self._settings)
        raise ValueError(f"the SGLang transport only answers GET /models, not GET {path!r}")

    async def post(
        self,
        path: str,
        *,
        cast_to: object = httpx.Response,
        body: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        stream: bool = False,
    ) -> httpx.Response:
        """One generate turn: translate, send (with retries), check and convert the answer."""
        if stream:
            raise ValueError("the SGLang transport does not stream; call post() with stream=False")
        if not str(path).rstrip("/").endswith(GENERATE_SUFFIX):
            raise ValueError(
                f"the SGLang transport only serves POST .../inference/v1/generate, not {path!r}"
            )
        if cast_to is not httpx.Response:
            raise TypeError(f"post() returns an httpx.Response; cast_to={cast_to!r} is unsupported")
        url = f"{resolve_engine_url(self._settings)}/generate"
        session_id = session_id_from_options(options)
        body = body if body is not None else {}
        first_prompt = (
            session_id is None or session_id not in self._sessions
        ) and not is_known_continuation(body)
        engine_limits = await self._limits(url.removesuffix("/generate"))
        try:
            call = build_generate_call(
                body,
                settings=self._settings,
                rid=self._new_rid(),
                session_id=session_id,
                first_prompt=first_prompt,
                engine_limits=engine_limits,
            )
        except RequestRejected as exc:
            raise error_for_rejection(exc, httpx.Request("POST", url)) from exc
        if session_id is not None:
            self._sessions.record(session_id)
        self._report_ignored_keys(call)
        response, rid = await self._send_with_retries(url, call)
        try:
            answer = response.json()
        except ValueError as exc:
            raise error_for_output(
                MalformedOutput(f"the body is not JSON ({exc})"), response, None
            ) from exc
        try:
            # A contract-breaking answer is not resent here: the engine that broke it would
            # most likely break it again. The failed turn is the harness's to handle, within its
            # own bounded retries (the OpenAI SDK's max_retries), and the group is dropped.
            converted = convert_generate_output(
                answer,
                rid=rid,
                max_new_tokens=call.payload["sampling_params"].get("max_new_tokens"),
                vocab_size=self._settings.vocab_size,
            )
        except (EngineAborted, MalformedOutput) as exc:
            raise error_for_output(exc, response, answer) from exc
        if session_id is not None:
            # Verifiers names the session after the trace, so conversion can look it up.
            self._prefix_cache.add(session_id, answer.get("meta_info") or {})
        return httpx.Response(200, json=converted, request=httpx.Request("POST", str(path)))

    def prefix_cache_usage(self, session_id: str) -> PrefixCacheUsage | None:
        """What the engine reported about ``session_id``'s prompts (None: nothing answered)."""
        return self._prefix_cache.get(session_id)

    async def close(self) -> None:
        """Close the pooled HTTP clients; a later request opens new ones."""
        lanes, loop = self._lanes, self._lanes_loop
        self._lanes, self._lanes_loop = [], None
        if not lanes:
            return
        if loop is asyncio.get_running_loop():
            await asyncio.gather(*(lane.aclose() for lane in lanes))
        else:
            # Its connections belong to another (usually finished) loop and cannot be closed
            # from this one; dropping the client lets them be collected.
            logger.debug("dropping an SGLang HTTP client opened on another event loop")

    # --- which model the engine serves -----------------------------------------------------

    async def verify_served_model(
        self, expected: str, *, aliases: Sequence[str] = (), timeout_s: float = 10.0
    ) -> None:
        """Refuse an engine whose ``/model_info`` names another model than ``expected`` (or
        one of its ``aliases``).

        Asks once per transport (a transport serves one rollout call). An engine or router
        that does not answer the question (no such route, an error, unreachable) is not
        refused here: the generate requests report an unreachable engine themselves.
        Raises :class:`~miles_verifiers.engine.identity.EngineModelMismatchError`.
        """
        if self._model_checked:
            return
        base = resolve_engine_url(self._settings)
        info = await self._model_info(base, timeout_s)
        self._model_checked = True
        if info is None:
            return
        check_served_model(expected, info, base, aliases=aliases)

    async def _model_info(self, base: str, timeout_s: float) -> object | None:
        client = self._http()
        for path in MODEL_INFO_PATHS:
            url = f"{base}{path}"
            try:
                response = await client.get(url, timeout=timeout_s)
            except httpx.HTTPError as exc:
                logger.debug("not checking the served model: GET %s failed (%s)", url, exc)
                return None
            if response.status_code in (404, 405):
                continue
            if response.status_code != 200:
                logger.debug(
                    "not checking the served model: GET %s answered HTTP %d",
                    url,
                    response.status_code,
                )
                return None
            try:
                return response.json()
            except ValueError:
                logger.debug("not checking the served model: GET %s is not JSON", url)
                return None
        logger.debug("not checking the served model: %s serves no /model_info", base)
        return None

    # --- cancelling leftover work ----------------------------------------------------------

    @property
    def rid_prefix(self) -> str:
        """Every rid this transport sends is ``f"{rid_prefix}-<n>"``."""
        return self._rid_prefix

    @property
    def in_flight_rids(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    async def list_workers(self, *, timeout_s: float = 10.0) -> tuple[str, ...]:
        """The worker URLs behind the configured router."""
        return await list_workers(
            self._http(), resolve_engine_url(self._settings), timeout_s=timeout_s
        )

    async def abort(
        self, worker_urls: Sequence[str] | None = None, *, timeout_s: float = 10.0
    ) -> AbortReport:
        """Abort this transport's requests on the given workers (default: the router's list).

        Posts each in-flight rid exactly, plus the rid prefix. The aborted requests come back
        from SGLang as aborts and are raised as ``EngineAbortedError`` to their callers.
        """
        if worker_urls is None:
            worker_urls = await self.list_workers(timeout_s=timeout_s)
        rids = [f"{self._rid_prefix}-", *sorted(self._in_flight)]
        return await abort_on_workers(self._http(), worker_urls, rids, timeout_s=timeout_s)

    # --- internals -------------------------------------------------------------------------

    def _new_rid(self) -> str:
        return f"{self._rid_prefix}-{next(self._rid_numbers)}"

    def _http(self) -> httpx.AsyncClient:
        """The next pooled client of the running event loop (httpx clients cannot change loops)."""
        loop = asyncio.get_running_loop()
        if not self._lanes or self._lanes_loop is not loop or self._lanes[0].is_closed:
            if self._lanes and not self._lanes[0].is_closed:
                logger.debug("event loop changed; opening new SGLang HTTP clients")
            tls = default_tls_context()
            mounts = self._direct_mounts()
            self._lanes = [
                httpx.AsyncClient(
                    limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                    timeout=self._settings.timeouts.to_httpx(),
                    transport=self._http_transport,
                    verify=tls,
                    mounts=mounts,
                )
                for size in _lane_sizes(self._settings.max_connections)
            ]
            self._lanes_loop = loop
        return self._lanes[next(self._next_lane) % len(self._lanes)]

    async def _limits(self, base_url: str) -> EngineLimits | None:
        """The engine's limits, read on this transport's first request (bounded by the
        connect timeout); None when probing is off."""
        if not self._settings.probe_engine_limits:
            return None
        if self._engine_limits is None:
            if self._limits_lock is None:
                self._limits_lock = asyncio.Lock()
            async with self._limits_lock:
                if self._engine_limits is None:
                    timeout_s = self._settings.timeouts.connect_s
                    self._engine_limits = await fetch_deployment_limits(
                        self._http(),
                        base_url,
                        lambda: self.list_workers(timeout_s=timeout_s),
                        timeout_s=timeout_s,
                    )
        return self._engine_limits

    def _direct_mounts(self) -> dict[str, None] | None:
        """Loopback engines are reached directly even when the environment names a proxy,
        which could not reach this machine's loopback anyway. A given ``http_transport``
        already ignores environment proxies."""
        if self._http_transport is not None:
            return None
        try:
            engine = [resolve_engine_url(self._settings)]
        except EngineAddressError:
            engine = []
        return direct_mounts(engine)

    def _report_ignored_keys(self, call: GenerateCall) -> None:
        lost = keys_dropped_by_router(call.payload["sampling_params"], self._settings.router)
        lost_new = [key for key in lost if key not in self._router_drops_warned]
        if lost_new:
            self._router_drops_warned.update(lost_new)
            logger.warning(
                "the %s in front of the engines drops sampling param(s) %s without an error, so "
                "they have no effect; run Miles with --use-miles-router to keep them",
                self._settings.router.value,
                lost_new,
            )
        new = [
            k for k in (*call.dropped_keys, *call.overridden_keys) if k not in self._reported_keys
        ]
        if new:
            self._reported_keys.update(new)
            logger.debug(
                "not forwarding to SGLang: dropped %s, overridden by settings %s",
                sorted(k for k in new if k in call.dropped_keys),
                sorted(k for k in new if k in call.overridden_keys),
            )

    async def _send_with_retries(self, url: str, call: GenerateCall) -> tuple[httpx.Response, str]:
        client = self._http()
        delays = self._settings.retry.delays()
        base_rid = call.payload["rid"]
        for attempt in range(len(delays) + 1):
            # SGLang refuses a rid it is still tracking, so every resend gets its own.
            rid = base_rid if attempt == 0 else f"{base_rid}_{attempt}"
            payload = {**call.payload, "rid": rid}
            self._in_flight.add(rid)
            try:
                response = await client.post(url, json=payload, headers=call.headers)
            except httpx.RequestError as exc:
                error: Exception = error_for_transport_failure(
                    exc,
                    httpx.Request("POST", url),
                    proxy=None
                    if self._http_transport is not None
                    else environment_proxy_for(url, os.environ),
                )
                retryable = is_retryable_transport_error(exc)
                cause: BaseException = exc
            else:
                if response.is_success:
                    return response, rid
                error = error_for_status(response, tuple(call.payload["sampling_params"]))
                retryable = is_retryable_status(response.status_code)
                cause = error
            finally:
                self._in_flight.discard(rid)
            if not retryable or attempt == len(delays):
                if cause is error:
                    raise error
                raise error from cause
            logger.warning(
                "SGLang request %s failed (%s); retry %d/%d in %.2fs",
                rid,
                error,
                attempt + 1,
                len(delays),
                delays[attempt],
            )
            await self._sleep(delays[attempt])
        raise AssertionError("unreachable: the retry loop always returns or raises")
