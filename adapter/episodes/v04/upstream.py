"""Every non-public piece of Verifiers 0.4 the episode worker relies on, in one module; each has
a test in ``tests/workers/test_upstream04.py``. Upstream imports happen inside the functions.

verifiers 0.4.0
---------------
1. ``verifiers.v1.interception.server.resolve_client`` builds each client config's
   ``TrainClient``; no public way hands it our transport, so a wrapper sets a loaned call's
   transport (a :class:`TransportLoans` marker ``base_url``) as its ``client`` (2); without it the
   episodes post to the marker address and fail. -> :func:`install_transport_hook`
2. ``TrainClient.client``: what ``renderers.client.generate`` posts through (the 0.2.0 surface).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx

from miles_verifiers.errors import RolloutCallError

# Where a call's marker base_url points: a loopback port nothing should listen on (TCP 9 is
# "discard"), so a request that missed the hook fails at once and never leaves the machine.
MARKER_HOST = "http://127.0.0.1:9"


class CallEndedError(RolloutCallError, RuntimeError):
    """A model request arrived after the rollout call that lent the transport had ended."""


class LentTransport:
    """A call's transport as a ``TrainClient`` holds it: closing the client does not close the
    transport (the call still aborts with it), and once the call ends nothing new is sent."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._ended = False

    def end(self) -> None:
        self._ended = True

    @property
    def base_url(self) -> httpx.URL:
        return self._transport.base_url

    async def get(self, path: str, **options: Any) -> Any:
        return await self._transport.get(path, **options)

    async def post(self, path: str, **options: Any) -> Any:
        if self._ended:
            raise CallEndedError("the rollout call that owns this episode has ended")
        return await self._transport.post(path, **options)

    async def close(self) -> None:
        """The call closes the transport itself (after its aborts), not the client."""


class TransportLoans:
    """Which marker base_url stands for which call's transport (one worker's calls)."""

    def __init__(self) -> None:
        self._lent: dict[str, LentTransport] = {}
        self._lock = threading.Lock()

    @staticmethod
    def marker(call_id: str) -> str:
        return f"{MARKER_HOST}/miles-verifiers/{call_id}/v1"

    def lend(self, call_id: str, transport: Any) -> tuple[str, LentTransport]:
        lent = LentTransport(transport)
        url = self.marker(call_id)
        with self._lock:
            self._lent[url] = lent
        return url, lent

    def take_back(self, call_id: str) -> None:
        with self._lock:
            lent = self._lent.pop(self.marker(call_id), None)
        if lent is not None:
            lent.end()

    def find(self, base_url: str) -> LentTransport | None:
        with self._lock:
            return self._lent.get(base_url)


def _hooked(original: Callable[[Any], Any], loans: TransportLoans) -> Callable[[Any], Any]:
    def resolve_client(config: Any) -> Any:
        client = original(config)
        lent = loans.find(str(getattr(config, "base_url", "")))
        if lent is not None:
            client.client = lent  # what renderers' generate posts through
        return client

    resolve_client.miles_verifiers_loans = loans  # type: ignore[attr-defined]
    return resolve_client


def install_transport_hook(loans: TransportLoans) -> TransportLoans:
    """Wrap ``resolve_client`` once per process; the loans the installed hook reads."""
    from verifiers.v1.interception import server

    current = server.resolve_client
    installed = getattr(current, "miles_verifiers_loans", None)
    if isinstance(installed, TransportLoans):
        return installed
    server.resolve_client = _hooked(current, loans)
    return loans
