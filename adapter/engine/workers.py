"""Talking to SGLang workers directly: listing them from a router, and aborting requests.

The router has no ``/abort_request``, so aborts go to each worker. SGLang matches an abort's
``rid`` by prefix in its scheduler, but with the default single tokenizer worker its HTTP
front end drops any rid that is not exactly a live request's. So an abort names each live rid
exactly, and additionally the transport's rid prefix (which multi-tokenizer engines honour).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from miles_verifiers.errors import EngineError

__all__ = ["AbortReport", "WorkerListError", "abort_on_workers", "list_workers", "worker_base_url"]

logger = logging.getLogger(__name__)

# In dp-aware mode the router lists one entry per data-parallel rank as "<url>@<rank>".
_DP_RANK_SUFFIX = re.compile(r"@\d+$")


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


def worker_base_url(url: str) -> str:
    """A worker URL as listed by the router, reduced to the engine's own base URL."""
    return _DP_RANK_SUFFIX.sub("", url.strip()).rstrip("/")


def _unique(urls: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(worker_base_url(url) for url in urls))


async def list_workers(
    client: httpx.AsyncClient, router_url: str, *, timeout_s: float = 10.0
) -> tuple[str, ...]:
    """Worker base URLs behind a router, each once.

    Tries sgl-router's ``GET /workers`` (``{"workers": [{"url": ...}]}``), then the older
    ``GET /list_workers`` (``{"urls": [...]}``) of sglang-router <= 0.2 and Miles' own router.
    An SGLang worker reached directly serves neither (404 on both): when it answers
    ``GET /model_info``, the URL itself is the single worker.
    """
    router_url = router_url.rstrip("/")
    failures: list[str] = []
    not_found = 0
    for path, read in (("/workers", _urls_from_workers), ("/list_workers", _urls_from_list)):
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
            return _unique(read(response.json()))
        except (ValueError, TypeError, KeyError) as exc:
            raise WorkerListError(f"GET {url} returned an unexpected body: {exc}") from exc
    if not_found == 2:
        if await _is_sglang_worker(client, router_url, timeout_s, failures):
            _note_direct_worker(router_url)
            return (router_url,)
    raise WorkerListError(
        f"could not list the workers of router {router_url}: " + "; ".join(failures)
    )


async def _is_sglang_worker(
    client: httpx.AsyncClient, url: str, timeout_s: float, failures: list[str]
) -> bool:
    """Whether ``url`` answers like an SGLang worker (``GET /model_info`` with a JSON object)."""
    probe = f"{url}/model_info"
    try:
        response = await client.get(probe, timeout=timeout_s)
    except httpx.HTTPError as exc:
        failures.append(f"GET {probe}: {type(exc).__name__}: {exc}")
        return False
    if response.status_code != 200:
        failures.append(f"GET {probe}: HTTP {response.status_code}")
        return False
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        failures.append(f"GET {probe}: not a JSON object")
        return False
    return True


# Engine URLs already reported as a direct worker, so the log says it once per URL.
_DIRECT_WORKERS_NOTED: set[str] = set()


def _note_direct_worker(url: str) -> None:
    if url not in _DIRECT_WORKERS_NOTED:
        _DIRECT_WORKERS_NOTED.add(url)
        logger.info(
            "%s lists no workers (no /workers or /list_workers route) but answers /model_info: "
            "treating it as a single SGLang worker reached directly; aborts go to it",
            url,
        )


def _urls_from_workers(body: object) -> list[str]:
    if not isinstance(body, dict) or not isinstance(body.get("workers"), list):
        raise ValueError('expected {"workers": [...]}')
    urls: list[str] = []
    for worker in body["workers"]:
        url = worker.get("url") if isinstance(worker, dict) else None
        if not isinstance(url, str) or not url:
            raise ValueError("a worker entry has no url")
        urls.append(url)
    return urls


def _urls_from_list(body: object) -> list[str]:
    if not isinstance(body, dict) or not isinstance(body.get("urls"), list):
        raise ValueError('expected {"urls": [...]}')
    urls = body["urls"]
    if not all(isinstance(url, str) and url for url in urls):
        raise ValueError("a url entry is not a non-empty string")
    return urls


async def _post_abort(
    client: httpx.AsyncClient, worker: str, rid: str, timeout_s: float
) -> httpx.Response:
    """One ``/abort_request`` post. A pooled connection the worker had already closed fails
    at once (a transport error that is not a timeout); aborting twice is harmless, so that
    post gets one more try, on a new connection."""
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
    concurrency: int = 32,
) -> AbortReport:
    """POST ``/abort_request {"rid": rid}`` for every rid to every worker; never raises for a
    worker that fails, it is reported instead. SGLang answers 200 even for unknown rids."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    workers = _unique(worker_urls)
    rid_list = tuple(dict.fromkeys(rids))
    if any(not rid for rid in rid_list):
        # SGLang ignores an empty rid, and an empty prefix would mean "every request".
        raise ValueError("abort rids must be non-empty strings")
    gate = asyncio.Semaphore(concurrency)
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
