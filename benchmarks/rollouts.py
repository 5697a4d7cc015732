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

import inspect
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.loadgen import DirectRequest
from benchmarks.procstat import measure_tree_cpu
from benchmarks.scale import RolloutPoint
from miles_verifiers_testkit.miles import (
    FIXTURE_CONFIGS,
    MODEL,
    MilesLoop,
    call_rollout_function,
    config_env,
    flatten,
    miles_args,
    point_at_engine,
)

MODEL_ID = MODEL
CONFIG_DIR = FIXTURE_CONFIGS

# Fixture taskset name -> its EnvConfig file.
TASKSET_CONFIGS: dict[str, Path] = {
    "mv-arith": CONFIG_DIR / "mv_arith.toml",
    "mv-dialogue": CONFIG_DIR / "mv_dialogue.toml",
    "mv-tools": CONFIG_DIR / "mv_tools.toml",
    # mv-arith ported to Verifiers 0.4 (its episodes need a worker with verifiers 0.4.0).
    "mv-arith04": CONFIG_DIR / "v04" / "mv_arith.toml",
    # mv-arith04 on Verifiers' stock `null` harness (a `uv` script per episode; uv in the venv).
    "mv-arith04-null": CONFIG_DIR / "v04" / "mv_arith_null.toml",
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
        settings: Any = None,
        min_new_tokens: int = 0,
    ) -> None:
        """``settings`` (an ``AdapterSettings``) replaces the ``MILES_VERIFIERS_*`` environment;
        ``min_new_tokens`` > 0 makes every reply at least that long (the engine pads it)."""
        if taskset not in TASKSET_CONFIGS:
            raise ValueError(
                f"unknown taskset {taskset!r}; choose one of {sorted(TASKSET_CONFIGS)}"
            )
        from miles_verifiers import VerifiersRolloutFn
        from miles_verifiers_testkit.miles.contract import RolloutFnConstructorInput

        # A one-engine, one-GPU training run. Qwen3 thinking drops <think> from history, so
        # user-simulator turns would not bridge: thinking off.
        self.args = miles_args(
            rollout_batch_size=groups,
            n_samples_per_prompt=samples_per_group,
            rollout_max_response_len=max_response_tokens,
            sglang_server_concurrency=concurrency,
            apply_chat_template_kwargs={"enable_thinking": False},
            num_rollout=1_000_000,
        )
        if min_new_tokens > 0:
            # Miles has no flag for it: a hand-set attribute, as a launcher script would set.
            self.args.rollout_min_new_tokens = min_new_tokens
        host, _, port = engine_url.removeprefix("http://").rstrip("/").rpartition(":")
        point_at_engine(self.args, host, int(port))
        self._exclude = tuple(exclude_pids)
        self._timeout = call_timeout_s
        self._loop = MilesLoop()
        started = time.perf_counter()
        with config_env(TASKSET_CONFIGS[taskset]):
            self.fn = VerifiersRolloutFn(
                RolloutFnConstructorInput(self.args, data_source=None), settings=settings
            )
        self.construct_s = time.perf_counter() - started
        self._next_id = 0

    def _invoke(self, rollout_id: int) -> Any:
        from miles_verifiers_testkit.miles.contract import RolloutFnTrainInput

        return call_rollout_function(
            self.fn, RolloutFnTrainInput(rollout_id=rollout_id), self._loop, self._timeout
        )

    def call(self) -> CallStats:
        rollout_id, self._next_id = self._next_id, self._next_id + 1
        with measure_tree_cpu(exclude=self._exclude) as cpu:
            started = time.perf_counter()
            output = self._invoke(rollout_id)
            wall = time.perf_counter() - started
        samples = flatten(output.samples)
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


def point_driver(
    engine_url: str, taskset: str, point: RolloutPoint, **kwargs: Any
) -> AbstractContextManager[RolloutDriver]:
    """:func:`rollout_driver` with ``point``'s batch (groups x samples) and concurrency."""
    return rollout_driver(
        engine_url=engine_url,
        taskset=taskset,
        groups=point.groups,
        samples_per_group=point.samples_per_group,
        concurrency=point.concurrency,
        **kwargs,
    )


def workload_of(calls: Sequence[CallStats]) -> list[DirectRequest]:
    return [request for call in calls for request in call.requests]
