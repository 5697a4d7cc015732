"""HTTP plumbing every engine client shares: one TLS context, and a bounded JSON probe.

httpx loads its CA bundle (about 30 ms of CPU) for each client not given a context, even for
plain-HTTP loopback; clients are made per call, rollout or poll, and one context serves them all.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Sequence

import httpx


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default context (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured), built once."""
    return httpx.create_ssl_context()


async def get_json(
    client: httpx.AsyncClient, base_url: str, paths: Sequence[str], *, timeout_s: float
) -> tuple[object, str | None]:
    """The JSON of the first of ``paths`` served (404/405: the next), or None and why not."""
    for path in paths:
        url = f"{base_url}{path}"
        try:
            response = await client.get(url, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return None, f"GET {url} failed ({type(exc).__name__}: {exc})"
        if response.status_code in (404, 405):
            continue
        if response.status_code != 200:
            return None, f"GET {url} answered HTTP {response.status_code}"
        try:
            return response.json(), None
        except ValueError:
            return None, f"GET {url} is not JSON"
    return None, f"{base_url} serves no {paths[0]}"
