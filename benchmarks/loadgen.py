"""A direct load generator for SGLang's native ``/generate``: the ceiling the adapter is held to.

It replays a token workload (prompt ids and output lengths) straight to the engine at a fixed
concurrency, the way SGLang's own serving benchmark does and the way an RL trainer sends
rollouts: non-streaming, with logprobs, ``ignore_eos`` so each request produces exactly the
output length it asks for. Nothing but HTTP stands between it and the engine.

The client is aiohttp, as in SGLang's serving benchmark: its connection pool costs about
0.5 ms of CPU per request at any concurrency, where httpx's grows with the number of
requests in flight (measured here: ~1.5 ms at 1, ~9 ms at 256), so an httpx load generator
would itself become the bottleneck of a 2-core machine. ``client="httpx"`` is kept for
comparison.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import httpx

Client = Literal["aiohttp", "httpx"]
# (payload) -> (status, parsed JSON body or error text)
Poster = Callable[[dict[str, Any]], Awaitable[tuple[int, Any]]]


@dataclass(frozen=True)
class DirectRequest:
    """One request of a workload: the prompt's token ids and how many tokens to generate."""

    input_ids: tuple[int, ...]
    max_new_tokens: int


@dataclass(frozen=True)
class LoadResult:
    requests: int
    prompt_tokens: int
    output_tokens: int
    duration_s: float
    latencies_s: tuple[float, ...]

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.duration_s

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s


class EngineRequestError(RuntimeError):
    """The engine answered a direct request with an error."""


def generate_payload(request: DirectRequest, *, return_logprob: bool = True) -> dict[str, Any]:
    return {
        "input_ids": list(request.input_ids),
        "sampling_params": {
            "max_new_tokens": request.max_new_tokens,
            "temperature": 1.0,
            "ignore_eos": True,
        },
        "return_logprob": return_logprob,
        "stream": False,
    }


def _output_tokens(body: dict[str, Any]) -> int:
    meta = body.get("meta_info") or {}
    if "completion_tokens" in meta:
        return int(meta["completion_tokens"])
    return len(body.get("output_ids") or ())


async def _run_workers(
    post: Poster, workload: Sequence[DirectRequest], concurrency: int
) -> tuple[float, int, list[float]]:
    queue: asyncio.Queue[DirectRequest] = asyncio.Queue()
    for request in workload:
        queue.put_nowait(request)
    latencies: list[float] = []
    output_tokens = 0

    async def worker() -> None:
        nonlocal output_tokens
        while True:
            try:
                request = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            started = time.perf_counter()
            status, body = await post(generate_payload(request))
            if status != 200:
                raise EngineRequestError(
                    f"the engine answered HTTP {status} to a direct request: {str(body)[:300]}"
                )
            output_tokens += _output_tokens(body)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(workload)))))
    return time.perf_counter() - started, output_tokens, latencies


async def replay(
    base_url: str,
    workload: Sequence[DirectRequest],
    *,
    concurrency: int,
    timeout_s: float = 600.0,
    client: Client = "aiohttp",
) -> LoadResult:
    """Send every request of ``workload`` with at most ``concurrency`` in flight; time the whole."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if not workload:
        raise ValueError("the workload is empty; give at least one DirectRequest")
    url = f"{base_url.rstrip('/')}/generate"
    if client == "aiohttp":
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as session:

            async def post(payload: dict[str, Any]) -> tuple[int, Any]:
                async with session.post(url, json=payload) as response:
                    if response.status != 200:
                        return response.status, await response.text()
                    return 200, await response.json()

            duration, output_tokens, latencies = await _run_workers(post, workload, concurrency)
    elif client == "httpx":
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits) as http:

            async def post(payload: dict[str, Any]) -> tuple[int, Any]:
                response = await http.post(url, json=payload)
                return (
                    response.status_code,
                    response.json() if response.status_code == 200 else response.text,
                )

            duration, output_tokens, latencies = await _run_workers(post, workload, concurrency)
    else:
        raise ValueError(f"client must be 'aiohttp' or 'httpx', got {client!r}")
    return LoadResult(
        requests=len(workload),
        prompt_tokens=sum(len(r.input_ids) for r in workload),
        output_tokens=output_tokens,
        duration_s=duration,
        latencies_s=tuple(latencies),
    )


def flush_cache(base_url: str, timeout_s: float = 30.0) -> bool:
    """Empty the engine's prefix cache (SGLang refuses while requests run): True if it did."""
    with httpx.Client(timeout=timeout_s) as client:
        return client.post(f"{base_url.rstrip('/')}/flush_cache").status_code == 200


def replay_sync(base_url: str, workload: Sequence[DirectRequest], **options: Any) -> LoadResult:
    """:func:`replay` to the end on an event loop of its own; ``options`` are replay's."""
    return asyncio.run(replay(base_url, workload, **options))
