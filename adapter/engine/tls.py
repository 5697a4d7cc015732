"""The TLS context every HTTP client of this process shares.

httpx builds a fresh context for each client it is not given one (loading the CA bundle: about
30 ms of CPU), even for a plain-HTTP loopback address. Transports, abort clients and the test
kit's loopback clients are made per call, per rollout or per poll, so that cost added up to
minutes over a test run. The context is never changed after it is built, so one serves all.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default context (its CA bundle, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured),
    built once per process."""
    return httpx.create_ssl_context()
