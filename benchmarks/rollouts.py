"""Drive the adapter the way Miles does and measure each training call.

``RolloutDriver`` builds ``miles_verifiers.VerifiersRolloutFn`` from a Miles-style argument
namespace and a fixture taskset config (``VERIFIERS_CONFIG``), then calls it once per
``rollout_id``. Each call is measured from outside: wall time, rollouts, sampled tokens,
model turns, CPU of this (trainer-side) process and CPU of environment subprocesses.

The token workload of a call (every model turn's prompt ids and output length) is read back
from the returned samples: a turn's sampled tokens are a run of ones in the loss mask, and
its prompt is every token before that run. The direct load generator replays exactly that.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from argparse import Namespace
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.loadgen import DirectRequest
from benchmarks.procstat import measure_tree_cpu

MODEL_ID = "Qwen/Qwen3-0.6B"
CONFIG_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "configs"

# Fixture taskset name -> its EnvConfig file.
TASKSET_CONFIGS: dict[str, Path] = {
    "mv-arith": CONFIG_DIR / "mv_arith.toml",
    "mv-dialogue": CONFIG_DIR / "mv_dialogue.toml",
    "mv-tools": CONFIG_DIR / "mv_tools.toml",
}


@dataclass(frozen=True)
class CallStats:
    """What one training call did and cost."""

    wall_s: float
    rollouts: int
    sampled_tokens: int
    model_turns: int
    trainer_cpu_s: float
    env_cpu_s: float
    requests: tuple[DirectRequest, ...]

    @property
    def rollouts_per_s(self) -> float:
        return self.rollouts / self.wall_s

    @property
    def sampled_tokens_per_s(self) -> float:
        return self.sampled_tokens / self.wall_s


def _flatten(samples: Any) -> Iterator[Any]:
    """Samples from Miles' nested groups (any depth)."""
    for item in samples:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item


def turn_requests(sample: Any) -> list[DirectRequest]:
    """The model turns of one sample as (prompt ids, output length) requests."""
    tokens: list[int] = list(sample.tokens)
    response_length = int(sample.response_length)
    prompt_length = len(tokens) - response_length
    mask = sample.loss_mask if sample.loss_mask is not None else [1] * response_length
    requests: list[DirectRequest] = []
    index = 0
    while index < len(mask):
        if not mask[index]:
            index += 1
            continue
        end = index
        while end < len(mask) and mask[end]:
            end += 1
        requests.append(DirectRequest(tuple(tokens[: prompt_length + index]), end - index))
        index = end
    return requests


def miles_args(
    *,
    engine_url: str,
    groups: int,
    samples_per_group: int,
    concurrency: int,
    max_response_tokens: int,
    model: str = MODEL_ID,
    seed: int = 42,
) -> Namespace:
    """The Miles namespace a one-engine, one-GPU training run would pass."""
    host, _, port = engine_url.removeprefix("http://").rstrip("/").rpartition(":")
    return Namespace(
        rollout_global_dataset=False,
        hf_checkpoint=model,
        rollout_batch_size=groups,
        n_samples_per_prompt=samples_per_group,
        n_samples_per_eval_prompt=1,
        over_sampling_batch_size=None,
        rollout_max_response_len=max_response_tokens,
        rollout_temperature=1.0,
        rollout_top_p=1.0,
        rollout_top_k=-1,
        rollout_seed=seed,
        rollout_num_gpus=1,
        rollout_num_gpus_per_engine=1,
        sglang_server_concurrency=concurrency,
        sglang_router_ip=host,
        sglang_router_port=int(port),
        # Qwen3 thinking drops <think> from history, so user-simulator turns would not bridge.
        apply_chat_template_kwargs={"enable_thinking": False},
        num_rollout=1_000_000,
        eval_interval=None,
    )


class _BackgroundLoop:
    """One persistent event loop in a daemon thread, as Miles runs async rollout functions."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="bench-rollout-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Any, timeout_s: float) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout=timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.loop.close()


@contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


class RolloutDriver:
    """The adapter's rollout function against one engine, called once per rollout id."""

    def __init__(
        self,
        *,
        engine_url: str,
        taskset: str,
        groups: int,
        samples_per_group: int,
        concurrency: int,
        max_response_tokens: int,
        exclude_pids: Collection[int] = (),
        call_timeout_s: float = 900.0,
    ) -> None:
        if taskset not in TASKSET_CONFIGS:
            raise ValueError(
                f"unknown taskset {taskset!r}; choose one of {sorted(TASKSET_CONFIGS)}"
            )
        from miles_verifiers import VerifiersRolloutFn
        from miles_verifiers.contract import RolloutFnConstructorInput

        self.args = miles_args(
            engine_url=engine_url,
            groups=groups,
            samples_per_group=samples_per_group,
            concurrency=concurrency,
            max_response_tokens=max_response_tokens,
        )
        self._exclude = tuple(exclude_pids)
        self._timeout = call_timeout_s
        self._loop = _BackgroundLoop()
        started = time.perf_counter()
        with _environ("VERIFIERS_CONFIG", str(TASKSET_CONFIGS[taskset])):
            self.fn = VerifiersRolloutFn(RolloutFnConstructorInput(self.args, data_source=None))
        self.construct_s = time.perf_counter() - started
        self._next_id = 0

    def _invoke(self, rollout_id: int) -> Any:
        from miles_verifiers.contract import RolloutFnTrainInput

        output = self.fn(RolloutFnTrainInput(rollout_id=rollout_id))
        if inspect.iscoroutine(output):
            output = self._loop.run(output, self._timeout)
        return output

    def call(self) -> CallStats:
        rollout_id, self._next_id = self._next_id, self._next_id + 1
        with measure_tree_cpu(exclude=self._exclude) as cpu:
            started = time.perf_counter()
            output = self._invoke(rollout_id)
            wall = time.perf_counter() - started
        samples = list(_flatten(output.samples))
        requests = [request for sample in samples for request in turn_requests(sample)]
        return CallStats(
            wall_s=wall,
            rollouts=len(samples),
            sampled_tokens=sum(r.max_new_tokens for r in requests),
            model_turns=len(requests),
            trainer_cpu_s=cpu.self_seconds,
            env_cpu_s=cpu.children_seconds,
            requests=tuple(requests),
        )

    def close(self) -> None:
        for name in ("close", "shutdown", "aclose"):
            closer = getattr(self.fn, name, None)
            if callable(closer):
                result = closer()
                if inspect.iscoroutine(result):
                    self._loop.run(result, 120)
                break
        self._loop.close()


@contextmanager
def rollout_driver(**kwargs: Any) -> Iterator[RolloutDriver]:
    driver = RolloutDriver(**kwargs)
    try:
        yield driver
    finally:
        driver.close()


def workload_of(calls: Sequence[CallStats]) -> list[DirectRequest]:
    return [request for call in calls for request in call.requests]
