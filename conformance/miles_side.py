"""What Miles does around a rollout function, ported small and faithful for the suite.

No Miles is installed here, so the suite reproduces the parts of Miles that decide whether an
adapter's output trains correctly (``miles-contract.md`` §1.3-§1.4):

- ``miles_args``: the argument namespace with Miles' defaults for every flag a rollout
  function reads (§3), after Miles' own post-parse fix-ups;
- ``MilesLoop`` / ``call_rollout_function``: one persistent event loop in a daemon thread,
  driven from a worker thread, the way the rollout manager calls a rollout function;
- ``flatten`` and ``normalized_rewards``: how the manager flattens a train output and turns
  rewards into group-relative advantages (GRPO/GSPO/REINFORCE++-baseline).

Mock notice: this is a stand-in for Miles (which cannot run here), faithful to the behaviour
described in the reference contract, field by field where fields are involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import statistics
import threading
from argparse import Namespace
from collections.abc import Callable, Coroutine, Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

GROUP_NORMALIZED_ESTIMATORS = frozenset({"grpo", "gspo", "reinforce_plus_plus_baseline"})
STD_NORMALIZED_ESTIMATORS = frozenset({"grpo", "gspo"})
STD_EPSILON = 1e-6


class CallDeadlineExceeded(AssertionError):
    """A rollout-function call did not return within the suite's deadline (a hang)."""


# -- arguments ---------------------------------------------------------------------------

# Miles' defaults for every attribute a Verifiers rollout function may read (miles-contract.md
# §3), as a run launched the documented way has them: prompt-data loading off
# (--disable-rollout-global-dataset), the engine address unset until SGLang starts.
_MILES_DEFAULTS: dict[str, Any] = {
    # options an adapter must reject when set
    "rollout_global_dataset": False,
    "partial_rollout": False,
    "multimodal_keys": None,
    "chat_template_path": None,
    "use_opd": False,
    "use_rollout_routing_replay": False,
    "use_rollout_indexer_replay": False,
    "multi_lora": False,
    # model identity
    "hf_checkpoint": "Qwen/Qwen3-0.6B",
    "sglang_tokenizer_path": None,
    # batching
    "rollout_batch_size": 2,
    "n_samples_per_prompt": 1,
    "n_samples_per_eval_prompt": 1,
    "over_sampling_batch_size": None,
    "rollout_shuffle": False,
    "rollout_seed": 42,
    "num_rollout": 1,
    "start_rollout_id": None,
    "eval_interval": None,
    "global_batch_size": None,
    "disable_rollout_trim_samples": False,
    "use_dynamic_global_batch_size": False,
    # sampling and limits
    "rollout_temperature": 1.0,
    "rollout_top_p": 1.0,
    "rollout_top_k": -1,
    "rollout_max_response_len": 64,
    "rollout_max_context_len": None,
    "rollout_max_prompt_len": None,
    "rollout_stop": None,
    "rollout_stop_token_ids": None,
    "rollout_skip_special_tokens": False,
    "apply_chat_template_kwargs": {},
    "eval_temperature": None,
    "eval_top_p": None,
    "eval_top_k": None,
    "eval_max_response_len": None,
    "eval_max_context_len": None,
    "eval_max_prompt_len": None,
    "eval_min_new_tokens": None,
    # hooks and rewards
    "dynamic_sampling_filter_path": None,
    "rollout_sample_filter_path": None,
    "rollout_all_samples_process_path": None,
    "custom_generate_function_path": None,
    "group_rm": False,
    "custom_rm_path": None,
    "rm_type": None,
    "rm_url": None,
    "reward_key": None,
    "eval_reward_key": None,
    "advantage_estimator": "grpo",
    "rewards_normalization": True,
    "grpo_std_normalization": True,
    "log_passrate": False,
    # engines and routing
    "rollout_num_gpus": 1,
    "rollout_num_gpus_per_engine": 1,
    "sglang_server_concurrency": 512,
    "sglang_router_ip": None,
    "sglang_router_port": None,
    "sglang_model_routers": None,
    "use_miles_router": False,
    "sglang_router_policy": None,
    "sglang_enable_deterministic_inference": False,
    "use_distributed_post": False,
    "use_session_server": False,
    "colocate": False,
    # LoRA and logprob recompute
    "lora_rank": 0,
    "lora_adapter_path": None,
    "lora_train_only": False,
    "recompute_logprobs_via_prefill": False,
    "true_on_policy_mode": False,
    # checkpoints
    "save": None,
    "load": None,
    "save_interval": None,
}


def miles_args(**overrides: Any) -> Namespace:
    """A Miles argument namespace: Miles' defaults, the given values, then Miles' fix-ups."""
    unknown = sorted(set(overrides) - set(_MILES_DEFAULTS))
    if unknown:
        raise TypeError(f"not a Miles argument known to the suite: {', '.join(unknown)}")
    values = {**_MILES_DEFAULTS, **overrides}
    values["apply_chat_template_kwargs"] = dict(values["apply_chat_template_kwargs"] or {})
    # Miles fills these after parsing (arguments.py): over-sampling defaults to the batch size,
    # the eval reward key to the train one, the prompt cap to context - 1.
    if values["over_sampling_batch_size"] is None:
        values["over_sampling_batch_size"] = values["rollout_batch_size"]
    if values["eval_reward_key"] is None:
        values["eval_reward_key"] = values["reward_key"]
    if values["rollout_max_context_len"] is not None and values["rollout_max_prompt_len"] is None:
        values["rollout_max_prompt_len"] = values["rollout_max_context_len"] - 1
    if values["eval_max_context_len"] is None:
        values["eval_max_context_len"] = values["rollout_max_context_len"]
    return Namespace(**values)


def saves_checkpoint(args: Namespace, rollout_id: int) -> bool:
    """Whether Miles' train loop checkpoints after training ``rollout_id``: every
    ``--save-interval`` rollouts and after the last one."""
    if args.save is None or args.save_interval is None:
        return False
    if args.num_rollout is not None and rollout_id == args.num_rollout - 1:
        return True
    return (rollout_id + 1) % args.save_interval == 0


def record_checkpoint(args: Namespace, rollout_id: int) -> None:
    """What a Miles checkpoint leaves for a rollout function: the saved rollout id in
    ``latest_checkpointed_iteration.txt`` under ``--save`` (resuming starts at the next id)."""
    directory = Path(args.save)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "latest_checkpointed_iteration.txt").write_text(f"{rollout_id}\n")


def point_at_engine(args: Namespace, host: str, port: int) -> None:
    """What Miles' ``start_rollout_servers`` does to the shared args once SGLang is up."""
    args.sglang_router_ip = host
    args.sglang_router_port = port
    args.sglang_model_routers = {"default": (host, port)}


# -- calling convention -------------------------------------------------------------------


class MilesLoop:
    """One process-wide event loop in a daemon thread, as ``miles.utils.async_utils`` keeps."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="miles-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout_s: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            future.cancel()
            raise CallDeadlineExceeded(
                f"the rollout coroutine did not finish within {timeout_s:.0f} s"
            ) from None

    def close(self) -> None:
        async def _cancel_leftovers() -> None:
            current = asyncio.current_task()
            leftovers = [t for t in asyncio.all_tasks() if t is not current]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)

        if self._loop.is_running():
            # Best effort: the loop is going away anyway.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_leftovers(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()


def call_rollout_function(
    fn: Callable[[Any], Any], rollout_input: Any, loop: MilesLoop, timeout_s: float
) -> Any:
    """Miles' ``call_rollout_function``: call, and run a coroutine result on the shared loop."""
    result = fn(rollout_input)
    if inspect.iscoroutine(result):
        result = loop.run(result, timeout_s)
    return result


def call_from_worker_thread(
    fn: Callable[[Any], Any], rollout_input: Any, loop: MilesLoop, timeout_s: float
) -> Any:
    """``await asyncio.to_thread(call_rollout_function, fn, input)``, with a deadline.

    A daemon thread rather than an executor so that a call that hangs cannot block the
    suite's exit; the deadline turns the hang into :class:`CallDeadlineExceeded`.
    """
    future: Future[Any] = Future()

    def work() -> None:
        try:
            future.set_result(call_rollout_function(fn, rollout_input, loop, timeout_s))
        except BaseException as error:  # noqa: BLE001 - handed to the caller as is
            future.set_exception(error)

    threading.Thread(target=work, name="miles-rollout-call", daemon=True).start()
    try:
        return future.result(timeout=timeout_s + 5)
    except FutureTimeout:
        raise CallDeadlineExceeded(
            f"the rollout call did not return within {timeout_s:.0f} s"
        ) from None


# -- what the manager does with a train output ----------------------------------------------


def flatten(nested: Iterable[Any]) -> list[Any]:
    """Every nesting level flattened into one list, in order (``postprocess_rollout_data``)."""
    flat: list[Any] = []
    for item in nested:
        if isinstance(item, list):
            flat.extend(flatten(item))
        else:
            flat.append(item)
    return flat


def reward_group_segments(
    samples: Sequence[Any], n_samples_per_prompt: int, rollout_batch_size: int
) -> list[list[int]]:
    """Row indices of each normalisation group, as Miles segments a flat batch."""
    if samples and all(s.group_index is not None for s in samples):
        by_group: dict[int, list[int]] = {}
        for row, sample in enumerate(samples):
            by_group.setdefault(sample.group_index, []).append(row)
        return list(by_group.values())
    if len(samples) == n_samples_per_prompt * rollout_batch_size:
        n = n_samples_per_prompt
        return [list(range(start, start + n)) for start in range(0, len(samples), n)]
    return [list(range(len(samples)))]


def group_advantages(rewards: Sequence[float], args: Namespace) -> list[float]:
    """Miles' group-relative value of each reward of one group (one value per rollout)."""
    if (
        args.advantage_estimator not in GROUP_NORMALIZED_ESTIMATORS
        or not args.rewards_normalization
    ):
        return list(rewards)
    divide_by_std = (
        args.advantage_estimator in STD_NORMALIZED_ESTIMATORS
        and args.grpo_std_normalization
        and args.n_samples_per_prompt != 1
    )
    mean = statistics.fmean(rewards)
    std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    out = []
    for reward in rewards:
        centred = reward - mean
        if divide_by_std and len(rewards) > 1 and std > 0:
            centred /= std + STD_EPSILON
        out.append(centred)
    return out


def normalized_rewards(samples: Sequence[Any], args: Namespace) -> list[float]:
    """The per-row training reward Miles derives from a flat batch (GRPO's advantage)."""
    raw = [float(s.get_reward_value(args)) for s in samples]
    if (
        args.advantage_estimator not in GROUP_NORMALIZED_ESTIMATORS
        or not args.rewards_normalization
    ):
        return raw
    out = list(raw)
    for rows in reward_group_segments(samples, args.n_samples_per_prompt, args.rollout_batch_size):
        # Rows of one rollout (same rollout_id, else index) count once and must agree.
        rollout_of_row: dict[int, Any] = {}
        per_rollout: dict[Any, float] = {}
        for row in rows:
            sample = samples[row]
            key = (
                sample.rollout_id
                if getattr(sample, "rollout_id", None) is not None
                else sample.index
            )
            key = ("row", row) if key is None else key
            if key in per_rollout and per_rollout[key] != raw[row]:
                raise ValueError(f"rows of rollout {key!r} carry different rewards")
            per_rollout[key] = raw[row]
            rollout_of_row[row] = key
        keys = list(per_rollout)
        advantages = dict(zip(keys, group_advantages([per_rollout[k] for k in keys], args)))
        for row in rows:
            out[row] = advantages[rollout_of_row[row]]
    return out
