"""The HTTP shell Verifiers' ``TrainClient`` uses in place of an ``AsyncOpenAI``: the surface
``renderers.client.generate`` uses (entry 9 of :mod:`miles_verifiers.episodes.v02.upstream`).
Translation lives in the pure modules; this one does I/O, retries and the little state.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from miles_verifiers.engine.client import EngineClient
from miles_verifiers.engine.errors import (
    EngineAborted,
    MalformedOutput,
    RequestRejected,
    is_retryable_status,
    is_retryable_transport_error,
)
from miles_verifiers.engine.limits import EngineLimits, fetch_deployment_limits
from miles_verifiers.engine.proxies import environment_proxy_for
from miles_verifiers.engine.routers import keys_dropped_by_router
from miles_verifiers.engine.settings import TransportSettings, resolve_engine_url
from miles_verifiers.episodes.transport.errors import (
    error_for_output,
    error_for_rejection,
    error_for_status,
    error_for_transport_failure,
)
from miles_verifiers.episodes.transport.request import (
    GenerateCall,
    build_generate_call,
    is_known_continuation,
)
from miles_verifiers.episodes.transport.response import convert_generate_output
from miles_verifiers.episodes.transport.sessions import PrefixCacheUsage, SessionLedger
from miles_verifiers.episodes.v02.upstream import (
    GENERATE_SUFFIX,
    MODELS_PATHS,
    session_id_from_options,
)

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]


class SGLangTransport(EngineClient):
    """Sends Renderers' generate requests to SGLang's native ``/generate``. ``sleep`` is the
    backoff wait; ``router_drops_warned``, the keys warned about as dropped by the router, is
    shared by an owner's transports so the warning comes once per owner."""

    def __init__(
        self,
        settings: TransportSettings,
        *,
        http_transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        router_drops_warned: set[str] | None = None,
    ) -> None:
        super().__init__(settings, http_transport=http_transport)
        self._router_drops_warned = set() if router_drops_warned is None else router_drops_warned
        self._rid_numbers = itertools.count()
        self._sessions = SessionLedger(settings.session_cache_size)
        self._reported_keys: set[str] = set()
        self._sleep = sleep
        self._engine_limits: EngineLimits | None = None
        self._limits_lock = asyncio.Lock()

    @property
    def base_url(self) -> httpx.URL:
        """``<engine>/v1``, resolved now (the router address may come after construction)."""
        return httpx.URL(f"{resolve_engine_url(self._settings)}/v1")

    async def get(self, path: str, *, cast_to: object = None, **_: object) -> dict[str, Any]:
        """Renderers' ``GET /models`` probe, with the context length as ``max_model_len``;
        without one the listing is empty, so Renderers skips its pre-flight length check."""
        if path.strip("/") in MODELS_PATHS:
            limit = self._settings.context_len
            names = self._settings.served_model_names if limit is not None else ()
            return {
                "object": "list",
                "data": [
                    {"id": name, "object": "model", "owned_by": "sglang", "max_model_len": limit}
                    for name in names
                ],
            }
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
                rid=f"{self.rid_prefix}-{next(self._rid_numbers)}",
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
            # Not resent: the engine that broke the contract would likely break it again; the
            # harness's own bounded retries handle the failed turn.
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
            self._sessions.add(session_id, answer.get("meta_info") or {})
        return httpx.Response(200, json=converted, request=httpx.Request("POST", str(path)))

    def prefix_cache_usage(self, session_id: str) -> PrefixCacheUsage | None:
        """What the engine reported about ``session_id``'s prompts (None: nothing answered)."""
        return self._sessions.get(session_id)

    async def _limits(self, base_url: str) -> EngineLimits | None:
        """The engine's limits, read on the first request; None when probing is off."""
        if not self._settings.probe_engine_limits:
            return None
        async with self._limits_lock:  # one probe, however many requests come first
            if self._engine_limits is None:
                timeout_s = self._settings.timeouts.connect_s
                self._engine_limits = await fetch_deployment_limits(
                    self._http(),
                    base_url,
                    lambda: self.list_workers(timeout_s=timeout_s),
                    timeout_s=timeout_s,
                )
        return self._engine_limits

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
        dropped = sorted(set(call.dropped_keys) - self._reported_keys)
        overridden = sorted(set(call.overridden_keys) - self._reported_keys)
        if dropped or overridden:
            self._reported_keys.update(dropped, overridden)
            logger.debug(
                "not forwarding to SGLang: dropped %s, overridden by settings %s",
                dropped,
                overridden,
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
