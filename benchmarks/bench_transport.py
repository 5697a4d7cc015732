"""What the adapter's transport costs per request, next to a plain ``httpx`` post.

Both clients send the same SGLang ``/generate`` payload to the same zero-latency engine in one
run: the transport receives the body Renderers would post and translates it; the plain
client posts the translation made beforehand. Each side parses the JSON it returns to its
caller. The difference is the transport's overhead (translation, checks, retries
bookkeeping, response conversion). A plain aiohttp post of the same payload is measured
alongside, as a reference for what the HTTP client itself costs.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from benchmarks.procstat import self_cpu_seconds
from benchmarks.prompts import renderers_generate_body
from benchmarks.ratios import round_ratios
from benchmarks.recorder import GroupRecorder, Recorder
from benchmarks.results import Better
from benchmarks.rollouts import MODEL_ID
from benchmarks.rounds import measured_rounds
from benchmarks.scale import Scale

MAX_TOKENS = 32
GENERATE_PATH = "/inference/v1/generate"


@dataclass(frozen=True)
class Timed:
    wall_s: float
    cpu_s: float
    requests: int

    @property
    def ms_per_request(self) -> float:
        return 1000 * self.wall_s / self.requests

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu_s / self.requests

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.wall_s


async def _run(send: Callable[[int], Awaitable[Any]], requests: int, concurrency: int) -> Timed:
    counter = iter(range(requests))

    async def worker() -> None:
        for index in counter:
            await send(index)

    for index in range(min(8, requests)):  # warm the connection pool and code paths
        await send(index)
    cpu, started = self_cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Timed(time.perf_counter() - started, self_cpu_seconds() - cpu, requests)


@dataclass(frozen=True)
class SideBySide:
    transport: Timed
    httpx: Timed
    aiohttp: Timed


async def _side_by_side(
    url: str, prompts: list[tuple[int, ...]], requests: int, concurrency: int, rotation: int
) -> SideBySide:
    from miles_verifiers.engine.settings import TransportSettings
    from miles_verifiers.episodes.transport import SGLangTransport
    from miles_verifiers.episodes.transport.request import build_generate_call

    settings = TransportSettings(
        engine_url=url, max_response_len=MAX_TOKENS, served_model_names=(MODEL_ID,)
    )
    transport = SGLangTransport(settings)
    bodies = [
        renderers_generate_body(prompts[i % len(prompts)], max_tokens=MAX_TOKENS)
        for i in range(requests)
    ]
    payloads = [
        build_generate_call(
            body, settings=settings, rid=f"plain-{i}", session_id=None, first_prompt=True
        ).payload
        for i, body in enumerate(bodies)
    ]
    # The same pool size and timeouts the transport configures for itself.
    limits = httpx.Limits(
        max_connections=settings.max_connections, max_keepalive_connections=settings.max_connections
    )
    plain = httpx.AsyncClient(limits=limits, timeout=settings.timeouts.to_httpx())
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=settings.max_connections))
    generate_url, transport_url = f"{url}/generate", f"{url}{GENERATE_PATH}"

    async def via_transport(index: int) -> Any:
        response = await transport.post(
            transport_url,
            cast_to=httpx.Response,
            body=bodies[index],
            options={"headers": {"X-Session-ID": f"s{index}"}},
        )
        return response.json()

    async def via_httpx(index: int) -> Any:
        response = await plain.post(generate_url, json=payloads[index])
        response.raise_for_status()
        return response.json()

    async def via_aiohttp(index: int) -> Any:
        async with session.post(generate_url, json=payloads[index]) as response:
            response.raise_for_status()
            return await response.json()

    sides = {"transport": via_transport, "httpx": via_httpx, "aiohttp": via_aiohttp}
    names = list(sides)
    # Rotate the order from round to round so no client always meets a warmer engine.
    order = names[rotation % 3 :] + names[: rotation % 3]
    timed: dict[str, Timed] = {}
    try:
        for name in order:
            timed[name] = await _run(sides[name], requests, concurrency)
    finally:
        await transport.close()
        await plain.aclose()
        await session.close()
    return SideBySide(**timed)


def _measure(
    benchmark, scale: Scale, recorder: Recorder, engine, prompts, concurrency: int
) -> tuple[GroupRecorder, str, list[SideBySide]]:
    """The rounds side by side, and where their figures go: a recorder and a key prefix."""
    url, _ = engine
    rotation = itertools.count()
    rounds = measured_rounds(
        benchmark,
        lambda: asyncio.run(
            _side_by_side(
                url, prompts, scale.transport_requests, concurrency, rotation=next(rotation)
            )
        ),
        rounds=scale.rounds,
    )
    record = recorder.group("transport", concurrency=concurrency)
    return record, f"transport.c{concurrency}", rounds


SIDES = {
    "transport": "adapter transport",
    "httpx": "plain httpx post",
    "aiohttp": "plain aiohttp post (reference)",
}


def _per_side(
    record: GroupRecorder,
    key: str,
    rounds: list[SideBySide],
    metric: str,
    what: str,
    unit: str,
    better: Better,
    sides: tuple[str, ...] = tuple(SIDES),
) -> None:
    """A figure per side: ``metric`` (a :class:`Timed` property) of each round."""
    record.each(
        key,
        [
            (
                f"{side}_{metric}",
                [getattr(getattr(r, side), metric) for r in rounds],
                f"{SIDES[side]}: {what}",
                unit,
                better,
            )
            for side in sides
        ],
    )


def _transport_minus_httpx(rounds: list[SideBySide], metric: str) -> list[float]:
    return [getattr(r.transport, metric) - getattr(r.httpx, metric) for r in rounds]


def _transport_over_httpx(rounds: list[SideBySide], metric: str) -> list[float]:
    """Round i of the transport over round i of httpx (measured back to back): the median of
    these is the like-for-like ratio, not the ratio of the two sides' medians."""
    return round_ratios(
        [getattr(r.transport, metric) for r in rounds], [getattr(r.httpx, metric) for r in rounds]
    )


def _record_cpu(record: GroupRecorder, key: str, rounds: list[SideBySide]) -> None:
    cpu = "cpu_ms_per_request"
    _per_side(record, key, rounds, cpu, "client CPU per request", "ms", "lower")
    record.each(key, [
        ("cpu_overhead_ms_per_request", _transport_minus_httpx(rounds, cpu),
         "transport overhead over httpx: client CPU per request", "ms", "lower"),
        ("transport_over_httpx_cpu", _transport_over_httpx(rounds, cpu),
         "transport / plain httpx: client CPU per request", "ratio", "lower"),
    ])  # fmt: skip


def test_transport_overhead_one_request_at_a_time(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine, prompts
) -> None:
    record, key, rounds = _measure(benchmark, scale, recorder, zero_latency_engine, prompts, 1)
    _record_cpu(record, key, rounds)
    latency = "ms_per_request"
    _per_side(
        record, key, rounds, latency, "latency per request", "ms", "lower", ("transport", "httpx")
    )
    record(
        f"{key}.overhead_ms_per_request",
        _transport_minus_httpx(rounds, latency),
        "transport overhead over httpx: latency per request",
        "ms",
        "lower",
    )


def test_transport_throughput_concurrent(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine, prompts
) -> None:
    record, key, rounds = _measure(
        benchmark, scale, recorder, zero_latency_engine, prompts, scale.transport_concurrency
    )
    _record_cpu(record, key, rounds)
    throughput = "requests_per_s"
    _per_side(record, key, rounds, throughput, "requests/s", "requests/s", "higher")
    record(
        f"{key}.transport_over_httpx",
        _transport_over_httpx(rounds, throughput),
        "transport / plain httpx throughput",
        "ratio",
    )
