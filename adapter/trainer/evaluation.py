"""One evaluation call: every task, ``--n-samples-per-eval-prompt`` rollouts each, in task order.

The result is Miles' eval shape, keyed by the environment id::

    {env_id: {"rewards": [float, ...], "truncated": [bool, ...], "samples": [Sample, ...]}}

with exactly one entry per rollout in all three lists, in task (load) order and rollout order:
entry ``i`` of each list describes the same rollout, whatever happened to it.

* A failing episode never fails the evaluation. A rollout whose trace Verifiers judged failed,
  or whose episode failed (0.2: the group's episode raised, e.g. a failing ``@group_reward``;
  0.4: that rollout's own episode is not ok, e.g. its user simulator failed) or ran past its
  deadline, is an entry with status ``FAILED`` (``ABORTED`` when the engine aborted its
  generation) and the error under ``metadata["verifiers"]["error"]`` (or
  ``["episode_error"]``); it is counted in ``eval/verifiers/failed_rollouts``, and its
  ``rewards`` entry is ``None``. Each entry is judged by its own rollout's record: under 0.4 the
  slots of a task are independent episodes, so one failing leaves the others' entries as they
  are.
* A rollout that committed no model turn (an *empty trace*, e.g. its first prompt did not fit)
  is still an entry: a ``Sample`` with no tokens (``tokens == []``, ``response_length == 0``,
  empty ``loss_mask``/``rollout_log_probs``), status ``TRUNCATED`` when Verifiers ended it as a
  truncation and ``FAILED`` otherwise, and ``metadata["verifiers"]["empty_trace"] = True``.
  When no trace exists at all (the episode failed before the rollout started) the entry is
  the same kind of empty ``FAILED`` sample.
* ``rewards[i]`` is ``samples[i].get_reward_value`` under the eval reward key (after a Miles
  reward model, when one is configured), or ``None`` for a failed rollout: Miles logs the share
  of ``None`` as ``eval/<env>-none_reward_ratio`` and averages them as 0.
  ``truncated[i]`` is ``samples[i].status == TRUNCATED``.

Rewards are shaped with the evaluation reward key (``--eval-reward-key``, else
``--reward-key``). Sampling follows the eval flags (``--eval-temperature`` ...), seeds are
``rollout_seed + position * n + k`` under deterministic inference, and at most a bounded number
of groups run at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from miles_verifiers.errors import describe_error, is_unsupported_request
from miles_verifiers.protocol.records import TaskRecord, TraceRecord, serialize_prompt
from miles_verifiers.trainer.contract.compat import build_sample
from miles_verifiers.trainer.conversion import (
    METADATA_KEY,
    TOTAL_REWARD_KEY,
    BranchPolicy,
    ConversionError,
    MultipleBranchesError,
    looks_like_engine_abort,
    trace_reward,
    trace_to_sample,
)
from miles_verifiers.trainer.groups import GroupRun, GroupRunner, gather_bounded
from miles_verifiers.trainer.hooks import MilesHooks
from miles_verifiers.trainer.metrics import (
    TRAIN_PREFIX,
    merge,
    summarize_trace,
    trace_metrics,
    with_eval_prefix,
)
from miles_verifiers.trainer.training import UnsupportedRequestRunError

logger = logging.getLogger(__name__)

FAILED_ROLLOUTS = "failed_rollouts"
EMPTY_TRACES = "empty_traces"
FAILED_EPISODES = "failed_episodes"


@dataclass(frozen=True)
class EvalSetup:
    tasks: Sequence[TaskRecord]
    n_samples_per_eval_prompt: int
    reward_key: str | None
    episode_deadline_s: float
    max_groups_in_flight: int
    env_id: str
    hooks: MilesHooks
    sample_cls: type
    # ``siblings``: a multi-branch rollout's entry holds its last trainable branch.
    branch_policy: BranchPolicy = BranchPolicy.REJECT


@dataclass(frozen=True)
class EvalEntry:
    sample: Any
    trace: TraceRecord | None
    failed: bool
    empty: bool


def _status(sample_cls: Any, name: str) -> Any:
    return getattr(sample_cls.Status, name)


def tolerant_reward(trace: TraceRecord | None, reward_key: str | None) -> float | dict[str, float]:
    """The reward of a rollout that failed: what it has, zero where a component is missing."""
    total = float(trace.reward) if trace is not None else 0.0
    if not reward_key:
        return total
    rewards = {k: float(v) for k, v in (trace.rewards.items() if trace is not None else ())}
    rewards[TOTAL_REWARD_KEY] = total
    rewards.setdefault(reward_key, 0.0)
    return rewards


def empty_sample(
    sample_cls: type,
    *,
    task: TaskRecord,
    trace: TraceRecord | None,
    group_index: int,
    index: int,
    reward_key: str | None,
    status: str,
    weight_version: Any,
    error: str | None,
) -> Any:
    """The entry for a rollout with no token sequence (see the module docstring)."""
    if trace is not None:
        task = trace.task
    info: dict[str, Any] = {
        "trace_id": trace.id if trace is not None else None,
        "task_index": task.idx,
        "rewards": dict(trace.rewards) if trace is not None else {},
        "metrics": dict(trace.metrics) if trace is not None else {},
        "stop_condition": trace.stop_condition if trace is not None else None,
        "num_turns": 0,
        "empty_trace": True,
    }
    if trace is not None and trace.error is not None:
        info["error"] = trace.error.model_dump(mode="json", exclude_none=True)
    if error is not None:
        info["episode_error"] = error
    return build_sample(
        sample_cls,
        routing_key=trace.id if trace is not None else None,
        group_index=group_index,
        index=index,
        prompt=serialize_prompt(task.prompt),
        tokens=[],
        response="",
        response_length=0,
        label=task.label,
        reward=tolerant_reward(trace, reward_key),
        loss_mask=[],
        rollout_log_probs=[],
        weight_versions=[] if weight_version is None else [str(weight_version)],
        status=_status(sample_cls, status),
        metadata={METADATA_KEY: info},
    )


def group_entries(
    run: GroupRun,
    task: TaskRecord,
    position: int,
    setup: EvalSetup,
    weight_version: Any,
) -> list[EvalEntry]:
    """One entry per requested rollout of one task (raises only for multi-branch traces under
    the ``reject`` branch policy; under ``siblings`` the entry holds the last trainable branch)."""
    n = setup.n_samples_per_eval_prompt
    group_error = None if run.ok else describe_error(run.error) if run.error else run.failure
    by_rollout = rollout_traces(run.traces, n)
    entries: list[EvalEntry] = []
    for k in range(n):
        trace = by_rollout[k]
        index = position * n + k
        common = {
            "task": task,
            "trace": trace,
            "group_index": position,
            "index": index,
            "reward_key": setup.reward_key,
            "weight_version": weight_version,
        }
        if trace is None:
            sample = empty_sample(setup.sample_cls, status="FAILED", error=group_error, **common)
            entries.append(EvalEntry(sample, None, failed=True, empty=True))
            continue
        # Each rollout is judged by its own record: the other slots of its task do not count.
        episode_error = describe_error(trace.episode_error) if trace.episode_error else None
        failed = trace.rollout_failed
        # An engine abort stays ABORTED (not FAILED), so Miles' own abort checks see it.
        aborted = trace.failed and looks_like_engine_abort(trace.error)
        failure = "ABORTED" if aborted else "FAILED"
        try:
            sample = trace_to_sample(
                trace,
                group_index=position,
                index=index,
                policy=setup.branch_policy,
                reward_key=None,
                weight_version=weight_version,
                sample_cls=setup.sample_cls,
            )
        except MultipleBranchesError:
            raise
        except ConversionError as error:
            logger.warning("evaluation rollout %s cannot be converted: %s", trace.id, error)
            sample = empty_sample(
                setup.sample_cls, status=failure, error=describe_error(error), **common
            )
            entries.append(EvalEntry(sample, trace, failed=True, empty=True))
            continue
        if sample is None:
            stopped = trace.is_truncated or trace.is_timeout  # a stop Verifiers scored
            status = "TRUNCATED" if stopped and not failed else failure
            sample = empty_sample(setup.sample_cls, status=status, error=episode_error, **common)
            entries.append(EvalEntry(sample, trace, failed=failed, empty=True))
            continue
        if setup.hooks.reward_model is None:
            sample.reward = _eval_reward(trace, setup.reward_key, strict=not failed)
        # else: the Miles reward model replaces the reward (the plain total until then), and
        # the eval reward key names a key of its result, not a Verifiers reward.
        if failed:
            sample.status = _status(setup.sample_cls, failure)
            if episode_error is not None:
                sample.metadata[METADATA_KEY]["episode_error"] = episode_error
        entries.append(EvalEntry(sample, trace, failed=failed, empty=False))
    return entries


def rollout_traces(traces: Sequence[TraceRecord], n: int) -> list[TraceRecord | None]:
    """The record of each of a group's ``n`` rollouts (None where a rollout has none): by the
    rollout each record names, else by its place in the list."""
    found: list[TraceRecord | None] = [None] * n
    for position, trace in enumerate(traces):
        k = trace.rollout if trace.rollout is not None else position
        if 0 <= k < n and found[k] is None:
            found[k] = trace
    return found


def _eval_reward(
    trace: TraceRecord, reward_key: str | None, *, strict: bool
) -> float | dict[str, float]:
    # A clean rollout must have the reward key (a missing one is a setup error); a failed one
    # reads what it has.
    if strict:
        return trace_reward(trace, reward_key, key_flag="--eval-reward-key")
    return tolerant_reward(trace, reward_key)


async def evaluate(
    scope: Any,
    setup: EvalSetup,
    args: Any,
    *,
    weight_version: Any,
    runner: GroupRunner,
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Run the evaluation inside ``scope``; returns Miles' ``data`` and the ``eval/`` metrics."""

    def group(position: int, task: TaskRecord) -> Callable[[], Any]:
        async def run() -> tuple[bool, list[EvalEntry]]:
            # Evaluation runs the tasks in load order: a task's slot is its index.
            result = await runner.run(position, position)
            if not result.ok and is_unsupported_request(result.error):
                # Every episode would do the same (e.g. several trainable traces per rollout):
                # stop, as training does, instead of filling the entries with the refusal.
                raise UnsupportedRequestRunError(str(result.error))
            entries = group_entries(
                result,
                task,
                position,
                setup,
                weight_version,
            )
            scored = [e.sample for e in entries if not e.empty]
            if setup.hooks.reward_model is not None and scored:
                await setup.hooks.reward_model.apply(args, scored, evaluation=True)
            episodes_ok = result.ok and not any(t.episode_error for t in result.traces)
            return episodes_ok, entries

        return run

    per_group = await gather_bounded(
        scope,
        [group(position, task) for position, task in enumerate(setup.tasks)],
        setup.max_groups_in_flight,
    )
    entries = [entry for _, group_list in per_group for entry in group_list]
    _report_unsupported_requests(entries)

    reward_args = SimpleNamespace(reward_key=setup.reward_key)
    truncated_status = _status(setup.sample_cls, "TRUNCATED")
    samples = [e.sample for e in entries]
    data = {
        setup.env_id: {
            "rewards": [eval_reward_value(e, reward_args) for e in entries],
            "truncated": [s.status == truncated_status for s in samples],
            "samples": samples,
        }
    }
    traces = [e.trace for e in entries if e.trace is not None]
    metrics = with_eval_prefix(
        merge(
            trace_metrics([summarize_trace(t) for t in traces], TRAIN_PREFIX),
            {
                f"{TRAIN_PREFIX}{FAILED_ROLLOUTS}": float(sum(e.failed for e in entries)),
                f"{TRAIN_PREFIX}{EMPTY_TRACES}": float(sum(e.empty for e in entries)),
                f"{TRAIN_PREFIX}{FAILED_EPISODES}": float(sum(not ok for ok, _ in per_group)),
            },
        )
    )
    return data, metrics


def eval_reward_value(entry: EvalEntry, reward_args: Any) -> float | None:
    """What Miles logs for one rollout: None for a failed one (Miles counts those in
    ``eval/<env>-none_reward_ratio`` and averages them as 0), else its reward value."""
    if entry.failed:
        return None
    return float(entry.sample.get_reward_value(reward_args))


def _report_unsupported_requests(entries: Sequence[EvalEntry]) -> None:
    """Say once, loudly, when rollouts failed because the setup cannot serve their requests."""
    for entry in entries:
        error = entry.trace.error if entry.trace is not None else None
        if error is not None and is_unsupported_request(error):
            logger.error(
                "evaluation rollouts failed on a request the Miles transport cannot serve: %s",
                error.message,
            )
            return


__all__ = [
    "EvalEntry",
    "EvalSetup",
    "eval_reward_value",
    "evaluate",
    "group_entries",
    "tolerant_reward",
]
