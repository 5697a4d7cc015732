"""Driving the rollout function the way Miles does, against the loopback engine over HTTP.

Everything here is the project's Miles test kit (``miles_verifiers_testkit.miles``), shared
with the conformance suite and the benchmarks; this module keeps the names the rollout tests
import. ``miles_args`` is the kit's namespace with this folder's usual run: two samples per
prompt, 64 concurrent requests, Qwen3 thinking off (so multi-turn histories bridge).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers_conformance.checks import sample_fingerprint as fingerprint
from miles_verifiers_testkit import miles as kit
from miles_verifiers_testkit.miles import (
    MODEL,
    MilesLoop,
    RecordingEngine,
    in_worker_thread,
    task_prompts,
    write_config,
)
from miles_verifiers_testkit.miles import call_from_worker_thread as call
from miles_verifiers_testkit.miles import flatten as flat
from miles_verifiers_testkit.miles import load_task_data as task_data

__all__ = [
    "CALL_DEADLINE_S",
    "CONFIG_DIR",
    "MODEL",
    "MilesLoop",
    "RecordingEngine",
    "RolloutFnFactory",
    "Rollouts",
    "call",
    "eval_input",
    "fingerprint",
    "flat",
    "in_worker_thread",
    "miles_args",
    "point_at",
    "task_data",
    "task_prompts",
    "train_fingerprints",
    "train_input",
    "write_config",
]

CONFIG_DIR = kit.FIXTURE_CONFIGS
CALL_DEADLINE_S = kit.DEFAULT_DEADLINE_S

RolloutFnFactory = Callable[..., Any]
"""``(args, config, settings=None, *, data_source=None)`` -> a constructed rollout function
pointed at the loopback engine (the ``build_rollout_fn`` fixture)."""

miles_args = partial(
    kit.miles_args,
    n_samples_per_prompt=2,
    sglang_server_concurrency=64,
    apply_chat_template_kwargs={"enable_thinking": False},
    num_rollout=100,
)


def point_at(args: Any, port: int) -> None:
    """The router address of the loopback engine on ``port`` onto the args, as Miles sets it."""
    kit.point_at_engine(args, "127.0.0.1", port)


def train_input(rollout_id: int, weight_version: int | None = None) -> Any:
    """Miles' train call input for ``rollout_id``."""
    return contract().RolloutFnTrainInput(rollout_id=rollout_id, weight_version=weight_version)


def eval_input(rollout_id: int) -> Any:
    """Miles' eval call input for ``rollout_id``."""
    return contract().RolloutFnEvalInput(rollout_id=rollout_id)


def train_fingerprints(fn: Any, loop: MilesLoop, rollouts: int = 2) -> list[list[Any]]:
    """The fingerprints of the samples of train calls 0 .. ``rollouts`` - 1, call by call."""
    return [
        [fingerprint(s) for s in flat(call(fn, train_input(r), loop).samples)]
        for r in range(rollouts)
    ]


@dataclass(frozen=True)
class Rollouts:
    """One test's handle on the session's loopback engine and Miles loop (the ``rollouts``
    fixture): taskset configs written to the test's folder, the rollout function built as Miles
    builds it, and Miles' train and eval calls on it."""

    engine: RecordingEngine
    port: int
    loop: MilesLoop
    build_fn: RolloutFnFactory
    folder: Path

    def config(self, name: str, /, **tables: Any) -> Path:
        """The fixture config ``name`` with some tables updated (see ``write_config``)."""
        return write_config(self.folder, name, **tables)

    def build(
        self, args: Any, config: Path, settings: Any = None, *, data_source: Any = None
    ) -> Any:
        """The rollout function for ``args`` and ``config``, pointed at the loopback engine."""
        return self.build_fn(args, config, settings, data_source=data_source)

    def train(self, fn: Any, rollout_id: int = 0, weight_version: int | None = None) -> Any:
        """Miles' train call ``rollout_id`` on ``fn``."""
        return call(fn, train_input(rollout_id, weight_version), self.loop)

    def evaluate(self, fn: Any, rollout_id: int = 0) -> Any:
        """Miles' eval call ``rollout_id`` on ``fn``."""
        return call(fn, eval_input(rollout_id), self.loop)
