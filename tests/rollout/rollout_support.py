"""Driving the rollout function the way Miles does, against the loopback engine over HTTP.

``MilesLoop`` is Miles' process-wide event loop in a daemon thread; ``call`` hands a rollout
input to the function from a worker thread (Miles uses ``asyncio.to_thread``) and runs the
coroutine on that loop, with a deadline so a hang fails the test instead of stalling it.
``miles_args`` is a Miles argument namespace for a one-engine run; ``write_config`` copies a
fixture taskset config with changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import threading
import tomllib
from argparse import Namespace
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import tomli_w
from miles_verifiers.fixtures.engine import LoopbackEngine

CONFIG_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
MODEL = "Qwen/Qwen3-0.6B"
CALL_DEADLINE_S = 90.0

RolloutFnFactory = Callable[..., Any]
"""``(args, config, settings=None, *, data_source=None)`` -> a constructed rollout function
pointed at the loopback engine (the ``build_rollout_fn`` fixture)."""


class RecordingEngine(LoopbackEngine):
    """The loopback engine, also keeping the ``/generate`` bodies and abort rids it receives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._abort_lock = threading.Lock()
        self.abort_calls: list[str] = []
        self.bodies: list[Any] = []

    async def generate(self, body: bytes | Any) -> Any:
        try:
            decoded = json.loads(body) if isinstance(body, (bytes, bytearray, str)) else body
        except ValueError:
            decoded = None
        with self._abort_lock:
            self.bodies.append(decoded)
        return await super().generate(body)

    def abort(self, rid: str = "", abort_all: bool = False) -> int:
        with self._abort_lock:
            self.abort_calls.append("*" if abort_all else rid)
        return super().abort(rid, abort_all)

    def requests_seen(self) -> int:
        """``/generate`` and ``/abort_request`` calls since the last ``reset_stats``."""
        with self._abort_lock:
            return self.stats().generate_calls + len(self.abort_calls)

    def clear(self) -> None:
        self.reset_stats()
        with self._abort_lock:
            self.abort_calls.clear()
            self.bodies.clear()


class MilesLoop:
    """One persistent event loop in a daemon thread, as ``miles.utils.async_utils`` keeps."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="miles-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout_s: float = CALL_DEADLINE_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def close(self) -> None:
        async def cancel_leftovers() -> None:
            current = asyncio.current_task()
            leftovers = [t for t in asyncio.all_tasks() if t is not current]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_leftovers(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


def in_worker_thread(work: Callable[[], Any], timeout_s: float = CALL_DEADLINE_S) -> Any:
    """Run ``work`` on a fresh thread (like ``asyncio.to_thread``) and return its result."""
    future: Future[Any] = Future()

    def target() -> None:
        try:
            future.set_result(work())
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            future.set_exception(error)

    threading.Thread(target=target, name="miles-rollout-call", daemon=True).start()
    return future.result(timeout_s + 5)


def call(fn: Any, rollout_input: Any, loop: MilesLoop, timeout_s: float = CALL_DEADLINE_S) -> Any:
    """Miles' ``call_rollout_function`` from a worker thread: call, run a coroutine on the loop."""

    def work() -> Any:
        result = fn(rollout_input)
        if inspect.iscoroutine(result):
            result = loop.run(result, timeout_s)
        return result

    return in_worker_thread(work, timeout_s)


def miles_args(**overrides: Any) -> Namespace:
    """A Miles namespace for a one-engine run (documented launch: no global dataset)."""
    values: dict[str, Any] = {
        "rollout_global_dataset": False,
        "hf_checkpoint": MODEL,
        "rollout_batch_size": 2,
        "n_samples_per_prompt": 2,
        "n_samples_per_eval_prompt": 1,
        "over_sampling_batch_size": None,
        "rollout_max_response_len": 64,
        "rollout_seed": 42,
        "rollout_num_gpus": 1,
        "rollout_num_gpus_per_engine": 1,
        "sglang_server_concurrency": 64,
        "sglang_router_ip": None,
        "sglang_router_port": None,
        "apply_chat_template_kwargs": {"enable_thinking": False},
        "num_rollout": 100,
        "eval_interval": None,
        "save": None,
    }
    values.update(overrides)
    return Namespace(**values)


def point_at(args: Namespace, port: int) -> None:
    """What Miles does once SGLang is up: the router address goes onto the same args."""
    args.sglang_router_ip = "127.0.0.1"
    args.sglang_router_port = port
    args.sglang_model_routers = {"default": ("127.0.0.1", port)}


def write_config(directory: Path, name: str, **tables: Mapping[str, Any]) -> Path:
    """``fixtures/configs/<name>.toml`` with the given tables updated, as a new file."""
    data = tomllib.loads((CONFIG_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    for table, values in tables.items():
        if table == "top":
            data.update(values)
        else:
            data[table] = {**data.get(table, {}), **values}
    digest = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{digest}.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def flat(groups: list[list[Any]]) -> list[Any]:
    return [sample for group in groups for sample in group]


def fingerprint(sample: Any) -> tuple[Any, ...]:
    """Everything two runs that must agree on a sample are compared on."""
    return (
        sample.group_index,
        sample.index,
        repr(sample.prompt),
        tuple(sample.tokens),
        sample.response_length,
        tuple(sample.loss_mask or ()),
        tuple(sample.rollout_log_probs or ()),
        repr(sample.reward),
        sample.status.value,
        sample.label,
    )


def task_data(config: Path) -> list[Any]:
    """Every task's data, in load order, read through Verifiers."""
    from verifiers.v1 import EnvConfig, Environment

    env_config = EnvConfig.model_validate(tomllib.loads(config.read_text(encoding="utf-8")))
    return [task.data for task in Environment(env_config).taskset.load()]


def task_prompts(config: Path) -> list[str]:
    """Every task's prompt text, in load order."""
    return [str(data.prompt) for data in task_data(config)]
