"""Proxy variables pointing at a dead proxy: a loopback port nobody listens on.

Every proxy variable, upper and lower case, names it and nothing is exempted (no
``NO_PROXY``), as on a cluster whose proxy cannot reach this machine's loopback. A request
that goes to it is refused at once and reaches no other address.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

import pytest

PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")


def dead_proxy_url() -> str:
    """``http://127.0.0.1:<port>`` for a loopback port that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def behind_dead_proxy(environ: Mapping[str, str], proxy: str) -> dict[str, str]:
    """A copy of ``environ`` with every proxy variable set to ``proxy`` and no NO_PROXY."""
    copy = {k: v for k, v in environ.items() if k not in NO_PROXY_VARIABLES}
    copy.update(dict.fromkeys(PROXY_VARIABLES, proxy))
    return copy


def set_dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    """Put this process behind a dead proxy for one test; returns the proxy's URL."""
    proxy = dead_proxy_url()
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, proxy)
    for name in NO_PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return proxy
