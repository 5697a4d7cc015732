"""Keeping loopback traffic away from HTTP proxies.

httpx sends every request through ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` unless ``NO_PROXY``
names the host, loopback included; a cluster proxy cannot reach this machine's 127.0.0.1, and
would be handed every request (with its per-rollout bearer secret and prompt).
"""

from __future__ import annotations

import ipaddress
import urllib.request
from collections.abc import Iterable, Mapping, MutableMapping

import httpx

# What NO_PROXY must hold so that httpx, requests and curl all go direct to loopback. httpx
# matches NO_PROXY entries by exact host, so the CIDR form alone would not do.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")
_NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (and ``*.localhost``) and any 127.0.0.0/8 or ::1 address."""
    name = host.strip("[]").rstrip(".").casefold()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def direct_mounts(urls: Iterable[str] = ()) -> dict[str, None]:
    """httpx ``mounts`` sending loopback hosts (and those among ``urls``) past any proxy."""
    hosts = dict.fromkeys(LOOPBACK_NAMES)
    for url in urls:
        try:
            host = httpx.URL(url).host
        except (httpx.InvalidURL, TypeError):
            continue
        if host and is_loopback_host(host):
            hosts[host] = None
    return {(f"all://[{host}]" if ":" in host else f"all://{host}"): None for host in hosts}


def environment_proxy_for(url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy ``environ`` names for ``url``; None for loopback, which is never proxied."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    if not parsed.host or is_loopback_host(parsed.host):
        return None
    proxies = {
        name.lower()[: -len("_proxy")]: value
        for name, value in environ.items()
        if name.lower().endswith("_proxy") and value
    }
    proxy = proxies.get(parsed.scheme) or proxies.get("all")
    if not proxy:
        return None
    no_proxy = proxies.get("no", "")
    # proxy_bypass_environment is documented but missing from the type stubs.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if no_proxy.strip() == "*" or bypass(parsed.host, {"no": no_proxy}):
        return None
    return proxy


def proxy_failure_note(proxy: str | None, host: str = "the host") -> str:
    """What an error adds about the ``proxy`` a failed request went through (empty: none)."""
    if not proxy:
        return ""
    try:
        url = httpx.URL(proxy if "://" in proxy else f"http://{proxy}")
        shown = str(url.copy_with(username=None, password=None))  # no credentials in a message
    except httpx.InvalidURL:
        shown = "(unparseable proxy URL)"
    return (
        f" through the proxy {shown} named by the environment "
        f"(HTTP_PROXY/HTTPS_PROXY/ALL_PROXY; add {host} to NO_PROXY to reach it directly)"
    )


def ensure_loopback_bypass(environ: MutableMapping[str, str]) -> tuple[str, ...]:
    """Add the loopback names to ``NO_PROXY``/``no_proxy`` when a proxy is set; those added."""
    if not any(environ.get(name) or environ.get(name.upper()) for name in _PROXY_VARS):
        return ()
    current = [
        entry.strip()
        for name in _NO_PROXY_VARS
        for entry in environ.get(name, "").split(",")
        if entry.strip()
    ]
    merged = list(dict.fromkeys(current))
    if "*" in merged:
        return ()
    added = tuple(name for name in LOOPBACK_NAMES if name not in merged)
    if added:
        value = ",".join([*merged, *added])
        for name in _NO_PROXY_VARS:
            environ[name] = value
    return added
