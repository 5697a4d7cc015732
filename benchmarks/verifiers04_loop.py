"""Verifiers 0.4's own episode loop, the baseline of the stock-harness benchmark row.

Runs in a Verifiers 0.4 interpreter (the episode workers' venv), started and driven by
``benchmarks/stock04.py``:

    python benchmarks/verifiers04_loop.py --config FILE --engine URL --model M --concurrency C

It loads the environment from the config as Verifiers does (``resolve_env_config``,
``load_environment``), enters ``env.serving()`` once, prints ``{"ready": true}`` and then
answers one JSON line per JSON request line read from stdin::

    {"groups": G, "samples": N, "first_task": K, "max_tokens": T, "temperature": X}
    -> {"wall_s": ..., "episodes": ..., "ok": ..., "turns": ..., "errors": [...]}

Each request runs ``G`` groups of ``N`` slots (``env.slots(task, N)``), every slot through
``env.run_slot`` under one ``asyncio.Semaphore(C)``: the same unit of work and the same bound
the adapter's workers run, with nothing of the adapter in between.

The model connection is what a Verifiers training run uses: a ``TrainClientConfig`` whose
``base_url`` is the engine, from which Verifiers' interception server builds its own
``TrainClient`` (its renderer pool, its ``AsyncOpenAI``, its httpx client). Verifiers'
TrainClient speaks vLLM's ``/inference/v1/generate``; the loopback engine, like Miles' engines,
speaks SGLang's ``/generate``. So the one thing changed is the bottom of Verifiers' own httpx
client: its transport turns each ``/inference/v1/generate`` post into an SGLang ``/generate``
post to the same engine route the adapter uses, and the answer back into the vLLM shape, with
the adapter's own answer conversion (``convert_generate_output``). Everything above the wire
is Verifiers' code as it ships.

Only the standard library, Verifiers (and what it installs) and the adapter's pure response
conversion are imported: this file runs in the worker venv, not the benchmark's.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx

GENERATE_SUFFIX = "/inference/v1/generate"
API_KEY_VAR = "MILES_VERIFIERS_BENCH_NO_API_KEY"

# vLLM / OpenAI sampling names -> SGLang's, for the keys Verifiers' TrainClient sends.
_RENAMED = {"max_tokens": "max_new_tokens", "min_tokens": "min_new_tokens", "seed": "sampling_seed"}
_SGLANG_KEYS = frozenset(
    {
        "max_new_tokens",
        "min_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "stop",
        "stop_token_ids",
        "skip_special_tokens",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "sampling_seed",
        "no_stop_trim",
        "ignore_eos",
    }
)


def sglang_payload(body: dict[str, Any], rid: str) -> dict[str, Any]:
    """The SGLang ``/generate`` request for one vLLM ``/inference/v1/generate`` body."""
    params: dict[str, Any] = {}
    for key, value in (body.get("sampling_params") or {}).items():
        name = _RENAMED.get(key, key)
        if value is not None and name in _SGLANG_KEYS:
            params[name] = value
    return {
        "input_ids": list(body["token_ids"]),
        "sampling_params": params,
        "return_logprob": True,
        "rid": rid,
    }


class SGLangWire(httpx.AsyncBaseTransport):
    """httpx transport under Verifiers' own client: vLLM generate in, SGLang generate out."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()
        self._rids = itertools.count()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.rstrip("/").endswith(GENERATE_SUFFIX):
            return await self._inner.handle_async_request(request)
        from miles_verifiers.episodes.transport.response import convert_generate_output

        body = json.loads(await request.aread())
        rid = f"vfloop_{next(self._rids)}"
        url = request.url.copy_with(path="/generate")
        forwarded = httpx.Request(
            "POST",
            url,
            json=sglang_payload(body, rid),
            headers={"content-type": "application/json"},
        )
        response = await self._inner.handle_async_request(forwarded)
        raw = await response.aread()
        await response.aclose()
        if response.status_code != 200:
            return httpx.Response(response.status_code, content=raw, request=request)
        converted = convert_generate_output(
            json.loads(raw),
            rid=rid,
            max_new_tokens=forwarded_max(body),
        )
        return httpx.Response(200, json=converted, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def forwarded_max(body: dict[str, Any]) -> int | None:
    value = (body.get("sampling_params") or {}).get("max_tokens")
    return int(value) if isinstance(value, int) else None


def install_wire() -> None:
    """Give Verifiers' own httpx client (``build_async_httpx``) the SGLang wire at its bottom;
    its timeouts and pool limits stay Verifiers'."""
    from verifiers.v1.clients import base

    original = base.build_async_httpx

    def build_async_httpx(config: Any) -> httpx.AsyncClient:
        client = original(config)
        limits = base.DEFAULT_LIMITS
        return httpx.AsyncClient(
            timeout=client.timeout,
            limits=limits,
            transport=SGLangWire(httpx.AsyncHTTPTransport(limits=limits)),
        )

    base.build_async_httpx = build_async_httpx


def renderer_config(model: str) -> Any:
    """The Renderers config Renderers maps ``model`` to (as the adapter's workers pick it)."""
    from renderers.base import MODEL_RENDERER_MAP
    from renderers.configs import config_from_name

    name = MODEL_RENDERER_MAP.get(model)
    return config_from_name(name) if name is not None else None


def count_turns(episode: Any) -> int:
    return sum(int(getattr(trace, "num_turns", 0) or 0) for trace in episode.traces)


async def run_round(env: Any, tasks: list[Any], client: Any, args: Any, request: dict) -> dict:
    import verifiers.v1 as vf

    semaphore = asyncio.Semaphore(args.concurrency)
    sampling = vf.SamplingConfig.model_validate(
        {
            "max_tokens": request["max_tokens"],
            "temperature": request["temperature"],
            # As the adapter renders for Miles (the benchmark turns Qwen3 thinking off).
            "chat_template_kwargs": request.get("chat_template_kwargs") or None,
        }
    )
    groups, samples, first = request["groups"], request["samples"], request["first_task"]
    runs = []
    started = time.perf_counter()
    for g in range(groups):
        task = tasks[(first + g) % len(tasks)]
        for slot in env.slots(task, samples):
            context = vf.ModelContext(model=args.model, client=client, sampling=sampling)
            runs.append(env.run_slot(slot, context, semaphore))
    episodes = await asyncio.gather(*runs)
    wall = time.perf_counter() - started
    errors = [
        f"{e.type}: {e.message}"[:300]
        for episode in episodes
        if not episode.ok
        for e in episode.errors
    ]
    return {
        "wall_s": wall,
        "episodes": len(episodes),
        "ok": sum(1 for episode in episodes if episode.ok),
        "turns": sum(count_turns(episode) for episode in episodes),
        "errors": errors[:5],
    }


async def serve(args: argparse.Namespace) -> None:
    import verifiers.v1 as vf

    install_wire()
    data = tomllib.loads(Path(args.config).read_text(encoding="utf-8"))
    env = vf.load_environment(vf.resolve_env_config(data))
    tasks = list(env.taskset)
    client = vf.TrainClientConfig(
        base_url=f"{args.engine.rstrip('/')}/v1",
        api_key_var=API_KEY_VAR,
        renderer_model_name=args.model,
        renderer=renderer_config(args.model),
    )
    loop = asyncio.get_running_loop()
    async with env.serving():
        print(json.dumps({"ready": True, "tasks": len(tasks)}), flush=True)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line.strip():
                break
            reply = await run_round(env, tasks, client, args, json.loads(line))
            print(json.dumps(reply), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--engine", required=True, help="the engine's base URL")
    parser.add_argument("--model", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    asyncio.run(serve(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
