"""Miles as its rollout manager runs: its own argument defaults, loader and calling convention.

Nothing here re-implements Miles: arguments come from Miles' own parser, functions are loaded
by Miles' loader and called by Miles' ``call_rollout_function`` from a worker thread (what the
manager's ``asyncio.to_thread`` does), so coroutines run on Miles' own background loop.
"""

from __future__ import annotations

import argparse
import functools
import sys
from argparse import Namespace
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

from tests.rollout.rollout_support import miles_args as suite_args
from tests.rollout.rollout_support import point_at

CALL_DEADLINE_S = 120.0
ROLLOUT_FUNCTION_PATH = "miles_verifiers.VerifiersRolloutFn"


@functools.lru_cache(maxsize=1)
def _miles_defaults() -> dict[str, Any]:
    from miles.utils.arguments import get_miles_extra_args_provider

    # Miles' provider peeks at sys.argv for the rollout function (to let it add flags), so it
    # sees the command line a Verifiers run has; the batch size is the one required flag.
    argv = ["miles", "--rollout-batch-size", "1", "--rollout-function-path", ROLLOUT_FUNCTION_PATH]
    parser = argparse.ArgumentParser(prog="miles", add_help=False)
    with mock.patch.object(sys, "argv", argv):
        get_miles_extra_args_provider()(parser)
        parsed, _ = parser.parse_known_args(argv[1:])
    return vars(parsed)


def run_args(**overrides: Any) -> Namespace:
    """Miles' own defaults for all of its flags, with the suite's one-engine run on top.

    ``global_batch_size`` is what Miles derives for one optimiser step per rollout.
    """
    values = {**_miles_defaults(), **vars(suite_args(**overrides))}
    if values.get("over_sampling_batch_size") is None:
        values["over_sampling_batch_size"] = values["rollout_batch_size"]
    if values.get("global_batch_size") is None:
        values["global_batch_size"] = values["rollout_batch_size"] * values["n_samples_per_prompt"]
    if values.get("eval_reward_key") is None:
        values["eval_reward_key"] = values.get("reward_key")
    return Namespace(**values)


def build(path: str, args: Namespace, port: int, data_source: Any = None) -> Any:
    """The manager's construction: Miles' loader on the constructor input, then the engine
    address set on the same args (Miles starts SGLang only after building the function)."""
    from miles.rollout.base_types import RolloutFnConstructorInput
    from miles.rollout.inference_rollout.compatibility import load_rollout_function

    fn = load_rollout_function(RolloutFnConstructorInput(args=args, data_source=data_source), path)
    point_at(args, port)
    return fn


def in_worker_thread(work: Any, *call_args: Any, timeout_s: float = CALL_DEADLINE_S) -> Any:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="miles-to-thread") as pool:
        return pool.submit(work, *call_args).result(timeout_s)


def train(fn: Any, rollout_id: int, weight_version: int | None = None) -> Any:
    from miles.rollout.base_types import RolloutFnTrainInput
    from miles.rollout.inference_rollout.compatibility import call_rollout_function

    rollout_input = RolloutFnTrainInput(rollout_id=rollout_id, weight_version=weight_version)
    return in_worker_thread(call_rollout_function, fn, rollout_input)


def evaluate(fn: Any, rollout_id: int) -> Any:
    from miles.rollout.base_types import RolloutFnEvalInput
    from miles.rollout.inference_rollout.compatibility import call_rollout_function

    return in_worker_thread(call_rollout_function, fn, RolloutFnEvalInput(rollout_id=rollout_id))


def train_data(args: Namespace, output: Any) -> tuple[list[Any], dict[str, Any]]:
    """What the manager makes of a train output: flattened, trimmed, then Miles' train data."""
    from miles.ray.rollout.rollout_data_conversion import postprocess_rollout_data
    from miles.ray.rollout.train_data_conversion import convert_samples_to_train_data

    flat, metadata = postprocess_rollout_data(args, output.samples, train_parallel_config=None)
    data = convert_samples_to_train_data(
        args,
        flat,
        metadata=metadata,
        custom_convert_samples_to_train_data_func=None,
        custom_reward_post_process_func=None,
    )
    return flat, data


def miles_command_line(config: str, port: int, *extra: str) -> list[str]:
    """``train.py``'s argv for a two-rollout run with eval, rollout only, against an external
    engine at ``port`` (the loopback engine), training through the adapter."""
    return [
        "train.py",
        "--train-backend", "fsdp",
        "--hf-checkpoint", "Qwen/Qwen3-0.6B",
        "--rollout-function-path", "miles_verifiers.VerifiersRolloutFn",
        "--disable-rollout-global-dataset",
        "--debug-rollout-only",
        "--rollout-external",
        "--rollout-external-engine-addrs", f"127.0.0.1:{port}",
        "--rollout-batch-size", "2",
        "--n-samples-per-prompt", "2",
        "--global-batch-size", "4",
        "--num-rollout", "2",
        "--eval-interval", "1",
        "--eval-prompt-data", "verifiers-taskset", config,
        "--rollout-max-response-len", "64",
        "--actor-num-nodes", "1",
        "--actor-num-gpus-per-node", "1",
        "--rollout-num-gpus", "1",
        "--rollout-num-gpus-per-engine", "1",
        *extra,
    ]  # fmt: skip
