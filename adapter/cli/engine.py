"""Where the rollout function's requests go: the embedded loopback engine, or a real SGLang.

Miles starts its engines only after the rollout function is constructed, then writes the
router address into the same ``args`` object (§1.2). :func:`point_args_at` does that write;
:func:`engine_target` yields the address, starting the loopback engine when no URL is given.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from miles_verifiers.errors import CommandLineError, EngineError

# Miles' name for the single (default) model's router in ``args.sglang_model_routers``.
DEFAULT_MODEL_NAME = "default"


class EngineUrlError(CommandLineError, ValueError):
    """``--engine-url`` is not an ``http://host:port`` address."""


class EngineUnreachableError(EngineError, ConnectionError):
    """Nothing answers HTTP at the engine address."""


@dataclass(frozen=True)
class EngineAddress:
    host: str
    port: int
    embedded: bool

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def parse_engine_url(url: str) -> EngineAddress:
    """``http://host:port`` (the router or engine) as an address; anything else is refused."""
    parts = urlsplit(url.strip())
    problem = None
    if parts.scheme != "http":
        problem = "it must start with http:// (SGLang's router and engines speak plain HTTP)"
    elif not parts.hostname:
        problem = "it names no host"
    elif parts.path not in ("", "/") or parts.query or parts.fragment:
        problem = "it must be a bare address without a path, like http://10.0.0.1:30000"
    else:
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is None:
            problem = "it names no valid port"
    if problem:
        raise EngineUrlError(f"--engine-url {url!r} cannot be used: {problem}.")
    return EngineAddress(host=parts.hostname or "", port=int(parts.port or 0), embedded=False)


def point_args_at(args: argparse.Namespace, address: EngineAddress) -> None:
    """Write the router address into ``args`` as Miles does once its engines are up."""
    args.sglang_router_ip = address.host
    args.sglang_router_port = address.port
    args.sglang_model_routers = {DEFAULT_MODEL_NAME: (address.host, address.port)}


def require_reachable(address: EngineAddress, timeout_s: float = 10.0) -> None:
    """Fail fast when nothing answers HTTP at ``address``.

    Any HTTP answer to ``GET /health`` counts (routers differ in what they serve there); only
    a connection that cannot be made or a request that times out is an error. Without this a
    wrong address would surface much later, as every episode of the first rollout failing.
    """
    import httpx

    from miles_verifiers.engine.proxies import direct_mounts
    from miles_verifiers.engine.tls import default_tls_context

    try:
        # A loopback engine is asked directly, as the transport will (whatever HTTP_PROXY says).
        mounts = direct_mounts([address.base_url])
        with httpx.Client(mounts=mounts, verify=default_tls_context()) as client:
            client.get(f"{address.base_url}/health", timeout=timeout_s)
    except httpx.HTTPError as error:
        raise EngineUnreachableError(
            f"nothing answers at {address.base_url} ({type(error).__name__}: {error}). Fix: "
            "start SGLang (or its router) there, or correct --engine-url."
        ) from error


@contextlib.contextmanager
def engine_target(engine_url: str | None, model: str) -> Iterator[EngineAddress]:
    """The address to use for the ``with`` block: ``engine_url`` (checked to answer), or a
    loopback engine serving ``model`` (started here, on a free 127.0.0.1 port, stopped on
    exit)."""
    if engine_url:
        address = parse_engine_url(engine_url)
        require_reachable(address)
        yield address
        return
    from miles_verifiers.cli.kit import embedded_engine

    with embedded_engine(model) as base_url:
        address = parse_engine_url(base_url)
        yield EngineAddress(host=address.host, port=address.port, embedded=True)
