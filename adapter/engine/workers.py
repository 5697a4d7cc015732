"""Talking to SGLang workers directly: listing them from a router, and aborting requests.

The router has no ``/abort_request``, so aborts go to each worker. SGLang's scheduler matches an
abort's rid by prefix, but its default single-tokenizer HTTP front end drops a rid that is not
exactly a live request's: an abort names each live rid exactly, and also the rid prefix.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from miles_verifiers.engine.tls import get_json
from miles_verifiers.errors import EngineError

logger = logging.getLogger(__name__)

# In dp-aware mode the router lists one entry per data-parallel rank as "<url>@<rank>".
_DP_RANK_SUFFIX = re.compile(r"@\d+$")
# Abort posts in flight at once.
ABORT_CONCURRENCY = 32


class WorkerListError(EngineError, RuntimeError):
    """The router's worker list could not be read."""


@dataclass(frozen=True)
class AbortReport:
    """What an abort sweep did: one POST per (worker, rid); failures as (url, rid, reason)."""

    workers: tuple[str, ...]
    rids: tuple[str, ...]
    failures: tuple[tuple[str, str, str], ...]

    @property
    def posted(self) -> int:
        return len(self.workers) * len(self.rids)

    @property
    def ok(self) -> bool:
        return not self.failures

    def describe_failures(self, whose: str) -> str:
        """One line naming the first few failed posts of aborting ``whose``."""
        return (
            f"aborting {whose} failed on {len(self.failures)} of {self.posted} worker posts: "
            + "; ".join(f"{url} {reason}" for url, _, reason in self.failures[:3])
        )


def worker_base_url(url: str) -> str:
    """A worker URL as listed by the router, reduced to the engine's own base URL."""
    return _DP_RANK_SUFFIX.sub("", url.strip()).rstrip("/")


def _unique(urls: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(worker_base_url(url) for url in urls))


async def list_workers(
    client: httpx.AsyncClient, router_url: str, *, timeout_s: float = 10.0
) -> tuple[str, ...]:
    """Worker base URLs behind a router, each once: ``GET /workers`` (sgl-router), else
    ``/list_workers`` (older and Miles' routers), else a worker answering ``/model_info``."""
    router_url = router_url.rstrip("/")
    failures: list[str] = []
    not_found = 0
    for path, key in (("/workers", "workers"), ("/list_workers", "urls")):
        url = f"{router_url}{path}"
        try:
            response = await client.get(url, timeout=timeout_s)
        except httpx.HTTPError as exc:
            failures.append(f"GET {url}: {type(exc).__name__}: {exc}")
            continue
        if response.status_code in (404, 405):
            failures.append(f"GET {url}: HTTP {response.status_code}")
            not_found += 1
            continue
        if response.status_code != 200:
            raise WorkerListError(
                f"GET {url} answered HTTP {response.status_code}: {response.text}"
            )
        try:
            return _unique(_listed_urls(response.json(), key))
        except ValueError as exc:
            raise WorkerListError(f"GET {url} returned an unexpected body: {exc}") from exc
    if not_found == 2:
        info, problem = await get_json(client, router_url, ("/model_info",), timeout_s=timeout_s)
        if isinstance(info, dict):
            _note_direct_worker(router_url)
            return (router_url,)
        failures.append(problem or f"GET {router_url}/model_info: not a JSON object")
    raise WorkerListError(
        f"could not list the workers of router {router_url}: " + "; ".join(failures)
    )


@functools.cache  # logged once per URL
def _note_direct_worker(url: str) -> None:
    logger.info(
        "%s lists no workers (no /workers or /list_workers route) but answers /model_info: "
        "treating it as a single SGLang worker reached directly; aborts go to it",
        url,
    )


def _listed_urls(body: object, key: str) -> list[str]:
    """The URLs of ``{"workers": [{"url": ...}, ...]}`` or ``{"urls": [...]}``."""
    entries = body.get(key) if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f'expected {{"{key}": [...]}}')
    if key == "workers":
        entries = [entry.get("url") if isinstance(entry, dict) else None for entry in entries]
    if not all(isinstance(url, str) and url for url in entries):
        raise ValueError("a worker entry has no url")
    return entries


async def _post_abort(
    client: httpx.AsyncClient, worker: str, rid: str, timeout_s: float
) -> httpx.Response:
    """One ``/abort_request`` post, again after a non-timeout transport error (harmless)."""
    url, body = f"{worker}/abort_request", {"rid": rid}
    try:
        return await client.post(url, json=body, timeout=timeout_s)
    except httpx.TimeoutException:
        raise
    except httpx.TransportError:
        return await client.post(url, json=body, timeout=timeout_s)


async def abort_on_workers(
    client: httpx.AsyncClient,
    worker_urls: Sequence[str],
    rids: Sequence[str],
    *,
    timeout_s: float = 10.0,
) -> AbortReport:
    """POST every rid to every worker's ``/abort_request``; failures are reported, not raised."""
    workers = _unique(worker_urls)
    rid_list = tuple(dict.fromkeys(rids))
    if any(not rid for rid in rid_list):
        # SGLang ignores an empty rid, and an empty prefix would mean "every request".
        raise ValueError("abort rids must be non-empty strings")
    gate = asyncio.Semaphore(ABORT_CONCURRENCY)
    failures: list[tuple[str, str, str]] = []

    async def post_one(worker: str, rid: str) -> None:
        async with gate:
            try:
                response = await _post_abort(client, worker, rid, timeout_s)
            except httpx.HTTPError as exc:
                failures.append((worker, rid, f"{type(exc).__name__}: {exc}"))
                return
            if response.status_code != 200:
                failures.append((worker, rid, f"HTTP {response.status_code}: {response.text}"))

    await asyncio.gather(*(post_one(w, r) for w in workers for r in rid_list))
    return AbortReport(workers=workers, rids=rid_list, failures=tuple(failures))
