"""Deliberately broken adapters, to show that the suite fails when a contract is broken.

Each double wraps the real adapter and breaks exactly one promise, through the public
contract only (what the call returns, or what goes over the wire to the engine):

- ``ReversedGroups``: returns the groups of a train call in reverse, as an adapter that
  hands back groups in completion order would (GRP-2, CYC-1).
- ``SharedGroupIndex``: puts every sample in group 0, so Miles' normalisation mixes the
  baselines of different tasks (GRP-4).
- ``LeakySamplingKey``: sends every request through a proxy that adds a sampling key SGLang
  does not accept, as upstream does with ``routed_experts_prompt_start`` (TRP-1).
- ``PatchedEngineAnswers``: sends every request through a proxy that turns positive or NaN
  logprobs in the engine's answers into plausible ones, as an adapter that patches over
  contract-breaking answers instead of refusing them would, so they get trained on (FLT-3).
- ``HangsForever``: never returns from a train call, as an adapter stuck retrying would; a
  hang must fail FLT-1 whatever ``--replacement-error`` names.
- ``RetriesARejectedKeyForever``: every call keeps re-sending a request with a sampling key
  the engine refuses, from a task that outlives the call (as upstream's retry loop does): the
  hang must read as that key under TRP-1, and what it leaves running must not reach the
  next test.
- ``IgnoresSeatPins``: constructs from the config without its Verifiers 0.4 seats' sampling,
  model and client pins, as an adapter that never reads them would, so a pin Miles cannot
  train faithfully is accepted (CFG-4).

Two more break a rule of Verifiers 0.4's verdicts (the VER clauses, which run only with 0.4
workers). Unlike the others they reach into the reference adapter: they rewrite the trace
records its trainer side receives from its workers (``miles_verifiers.trainer.backends.pool.group_run``,
whatever the backend), so the real training and evaluation rules judge what the mutant makes
of them:

- ``TrainsFailedSeats``: drops a record's ``episode_error`` when a seat's failure caused it, as
  an adapter that never reads ``episode.ok`` would: the user simulator failed, the trainable
  trace is ok, so it is trained (VER-2).
- ``DropsRecoveredRetries``: counts every recorded error as a failure (the old ``error is not
  None``): a trace or an episode that recovered under Verifiers' retries is failed (VER-1).

Use with ``pytest conformance --adapter miles_verifiers_conformance.selftest.doubles:ReversedGroups``. The
adapter they wrap is ``$CONFORMANCE_DOUBLES_WRAP`` (``module:attribute``), by default the
reference adapter.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import socket
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from miles_verifiers_conformance.miles_side import flatten

WRAPPED_ENV = "CONFORMANCE_DOUBLES_WRAP"
CONFIG_VAR = "VERIFIERS_CONFIG"
DEFAULT_WRAPPED = "miles_verifiers:VerifiersRolloutFn"
LEAKED_KEY = "routed_experts_prompt_start"


def _real_adapter_class() -> type:
    module, _, attribute = os.environ.get(WRAPPED_ENV, DEFAULT_WRAPPED).partition(":")
    return getattr(importlib.import_module(module), attribute)


class _Wrapper:
    """Builds the real adapter from the same constructor input and post-processes its outputs."""

    def __init__(self, constructor_input: Any) -> None:
        self._inner = _real_adapter_class()(constructor_input)
        self._args = constructor_input.args

    def __call__(self, rollout_input: Any) -> Any:
        self.before_call(self._args)
        result = self._inner(rollout_input)
        if inspect.isawaitable(result):
            return self._finish(result, rollout_input)
        return self._transform(result, rollout_input)

    async def _finish(self, pending: Awaitable[Any], rollout_input: Any) -> Any:
        return self._transform(await pending, rollout_input)

    def _transform(self, output: Any, rollout_input: Any) -> Any:
        return output if rollout_input.evaluation else self.break_train(output)

    def before_call(self, args: Any) -> None:
        pass

    def break_train(self, output: Any) -> Any:
        return output


class ReversedGroups(_Wrapper):
    def break_train(self, output: Any) -> Any:
        output.samples = list(reversed(output.samples))
        return output


class SharedGroupIndex(_Wrapper):
    def break_train(self, output: Any) -> Any:
        for group in output.samples:
            for sample in flatten(group):  # siblings of a rollout sit in a list of their own
                sample.group_index = 0
        return output


def _leak_sampling_key(payload: Any) -> Any:
    payload.setdefault("sampling_params", {})[LEAKED_KEY] = 0
    return payload


def _patch_logprobs(answer: Any) -> Any:
    entries = answer.get("meta_info", {}).get("output_token_logprobs") or []
    for entry in entries:
        if not entry[0] <= 0:  # positive, or NaN
            entry[0] = -0.5
    return answer


class _RewritingProxy:
    """A loopback HTTP proxy that rewrites every ``/generate`` body (``request``) and JSON
    answer (``answer``) on the way through; None passes that side through untouched."""

    def __init__(
        self,
        target: str,
        request: Callable[[Any], Any] | None = None,
        answer: Callable[[Any], Any] | None = None,
    ) -> None:
        import httpx
        import uvicorn
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        client = httpx.AsyncClient(base_url=target, timeout=httpx.Timeout(30.0))
        rewrite_request, rewrite_answer = request, answer

        async def forward(request: Request) -> Response:
            body = await request.body()
            is_generate = request.url.path.rstrip("/") == "/generate"
            if is_generate and rewrite_request is not None:
                body = json.dumps(rewrite_request(json.loads(body))).encode()
            upstream = await client.request(
                request.method,
                request.url.path,
                content=body,
                params=request.query_params,
                headers={"content-type": request.headers.get("content-type", "application/json")},
            )
            content = upstream.content
            if is_generate and rewrite_answer is not None and upstream.status_code == 200:
                try:
                    content = json.dumps(rewrite_answer(json.loads(content))).encode()
                except ValueError:
                    pass  # a cut-short body stays as it is
            return Response(
                content,
                upstream.status_code,
                media_type=upstream.headers.get("content-type"),
            )

        app = Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "PUT"])])
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="rewriting-proxy",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


class _Proxied(_Wrapper):
    """Puts a rewriting proxy between the adapter and the engine, at the first call."""

    rewrite_request: Callable[[Any], Any] | None = None
    rewrite_answer: Callable[[Any], Any] | None = None

    def __init__(self, constructor_input: Any) -> None:
        super().__init__(constructor_input)
        self._proxy: _RewritingProxy | None = None

    def before_call(self, args: Any) -> None:
        if self._proxy is not None:
            return
        target = f"http://{args.sglang_router_ip}:{args.sglang_router_port}"
        self._proxy = _RewritingProxy(target, self.rewrite_request, self.rewrite_answer)
        weakref.finalize(self, self._proxy.close)
        # The adapter reads the router address from the shared args at request time.
        args.sglang_router_ip, args.sglang_router_port = "127.0.0.1", self._proxy.port
        args.sglang_model_routers = {"default": ("127.0.0.1", self._proxy.port)}


class LeakySamplingKey(_Proxied):
    rewrite_request = staticmethod(_leak_sampling_key)


class PatchedEngineAnswers(_Proxied):
    rewrite_answer = staticmethod(_patch_logprobs)


HANG_S = 3600.0  # far past any deadline; the call runs on a daemon thread, so exit is not held


class HangsForever(_Wrapper):
    def __call__(self, rollout_input: Any) -> Any:
        threading.Event().wait(HANG_S)
        return super().__call__(rollout_input)


RETRY_PAUSE_S = 0.05


async def _retry_rejected_key_forever(url: str) -> None:
    """Re-send a refused request without end, the way a transport that retries 5xx does."""
    import httpx

    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1, LEAKED_KEY: 0}}
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0)) as client:
        while True:  # unbounded on purpose: this is the defect the double imitates
            try:
                await client.post(url, json=body)
            except httpx.HTTPError:
                pass
            await asyncio.sleep(RETRY_PAUSE_S)


class RetriesARejectedKeyForever(_Wrapper):
    def __call__(self, rollout_input: Any) -> Any:
        url = f"http://{self._args.sglang_router_ip}:{self._args.sglang_router_port}/generate"

        async def call() -> Any:
            # A detached task, waited on without passing cancellation to it: cancelling the
            # call (the deadline) leaves the task running, as with a task per group.
            task = asyncio.ensure_future(_retry_rejected_key_forever(url))
            await asyncio.wait({task})
            return None

        return call()


# What a Verifiers 0.4 seat may pin that an adapter must read before training it.
SEAT_PINS = ("sampling", "model", "client")


class IgnoresSeatPins(_Wrapper):
    """Constructs from a copy of the config without its seats' sampling, model and client pins,
    as an adapter that never reads them would: a trainable seat's [<seat>.sampling] that
    differs from Miles' flags, or a model pinned without a client, is accepted (CFG-4)."""

    def __init__(self, constructor_input: Any) -> None:
        import tempfile
        import tomllib
        from pathlib import Path

        import tomli_w

        original = os.environ.get(CONFIG_VAR)
        if not original:
            super().__init__(constructor_input)
            return
        data = tomllib.loads(Path(original).read_text(encoding="utf-8"))
        for table in data.values():
            if isinstance(table, dict):
                for pin in SEAT_PINS:
                    table.pop(pin, None)
        copy = Path(tempfile.mkdtemp(prefix="unpinned-")) / Path(original).name
        copy.write_text(tomli_w.dumps(data), encoding="utf-8")
        os.environ[CONFIG_VAR] = str(copy)
        try:
            super().__init__(constructor_input)
        finally:
            os.environ[CONFIG_VAR] = original


# -- mutants of the 0.4 verdict rules: records rewritten where the trainer side receives them ---

RecordRewrite = Callable[[Any], Any]


def _rewrite_records(rewrite: RecordRewrite) -> None:
    """Every worker answer the reference adapter's trainer side reads from now on has its
    trace records passed through ``rewrite`` first (this process only: a nested suite run)."""
    from miles_verifiers.trainer.backends import in_process, pool

    original = getattr(pool.group_run, "__wrapped__", pool.group_run)

    def group_run(result: Any) -> Any:
        return original(result.model_copy(update={"traces": [rewrite(t) for t in result.traces]}))

    group_run.__wrapped__ = original  # type: ignore[attr-defined]
    pool.group_run = group_run
    in_process.group_run = group_run


def _seat_failure_hidden(record: Any) -> Any:
    error = record.episode_error
    if error is None or error.seat is None:
        return record
    return record.model_copy(update={"episode_error": None})


def _recovery_failed(record: Any) -> Any:
    from miles_verifiers.protocol.records import EpisodeErrorRecord

    update: dict[str, Any] = {}
    if record.error is not None:
        update["ok"] = False
    if record.episode_recovered_errors and record.episode_error is None:
        update["episode_error"] = EpisodeErrorRecord(
            type="RecoveredEpisodeError",
            message=f"{record.episode_recovered_errors} error(s) recorded by a retried episode",
        )
    return record.model_copy(update=update) if update else record


class _RewritesRecords(_Wrapper):
    rewrite: RecordRewrite

    def __init__(self, constructor_input: Any) -> None:
        _rewrite_records(type(self).rewrite)
        super().__init__(constructor_input)


class TrainsFailedSeats(_RewritesRecords):
    rewrite = staticmethod(_seat_failure_hidden)


class DropsRecoveredRetries(_RewritesRecords):
    rewrite = staticmethod(_recovery_failed)
