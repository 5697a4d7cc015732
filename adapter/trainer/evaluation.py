"""One evaluation call: every task, ``--n-samples-per-eval-prompt`` rollouts each, in task order,
in Miles' eval shape (``{env_id: {"rewards", "truncated", "samples"}}``, one entry per rollout).

A failing rollout never fails the evaluation: its entry is ``FAILED`` (``ABORTED`` for an engine
abort) with reward ``None``; one with no model turn or no trace is an empty sample
(``metadata["verifiers"]["empty_trace"]``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from miles_verifiers.errors import describe_error, is_unsupported_request
from miles_verifiers.protocol.records import TaskRecord, TraceRecord
from miles_verifiers.trainer.conversion import (
    METADATA_KEY,
    BranchPolicy,
    ConversionError,
    MultipleBranchesError,
    SampleFields,
    looks_like_engine_abort,
    new_sample,
    trace_reward,
    trace_to_sample,
)
from miles_verifiers.trainer.groups import CallScope, GroupRun
from miles_verifiers.trainer.hooks import MilesHooks
from miles_verifiers.trainer.metrics import (
    TRAIN_PREFIX,
    merge,
    trace_metrics,
    with_eval_prefix,
)
from miles_verifiers.trainer.training import raise_if_unsupported

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalSetup:
    tasks: Sequence[TaskRecord]
    n_samples_per_eval_prompt: int
    reward_key: str | None
    max_groups_in_flight: int
    env_id: str
    hooks: MilesHooks
    sample_cls: Any  # the contract's Sample class
    # ``siblings``: a multi-branch rollout's entry holds its last trainable branch.
    branch_policy: BranchPolicy = BranchPolicy.REJECT


@dataclass(frozen=True)
class EvalEntry:
    sample: Any
    trace: TraceRecord | None
    failed: bool
    empty: bool


def _empty_entry(
    trace: TraceRecord | None, task: TaskRecord, status: str, error: str | None, **fields: Any
) -> EvalEntry:
    """The entry for a rollout with no token sequence (failed unless ``failed`` says not)."""
    failed = fields.pop("failed", True)
    info: dict[str, Any] = {"num_turns": 0, "empty_trace": True}
    if trace is not None and trace.error is not None:
        info["error"] = trace.error.model_dump(mode="json", exclude_none=True)
    if error is not None:
        info["episode_error"] = error
    task = trace.task if trace is not None else task
    sample = new_sample(trace, task, None, info, status=status, **fields)
    return EvalEntry(sample, trace, failed=failed, empty=True)


def group_entries(
    run: GroupRun,
    task: TaskRecord,
    position: int,
    setup: EvalSetup,
    weight_version: Any,
) -> list[EvalEntry]:
    """One entry per requested rollout of one task (raises only for multi-branch traces under
    the ``reject`` branch policy)."""
    n = setup.n_samples_per_eval_prompt
    group_error = None if run.ok else describe_error(run.error) if run.error else run.failure
    fields: SampleFields = {
        "group_index": position,
        "weight_version": weight_version,
        "sample_cls": setup.sample_cls,
    }

    def entry(index: int, trace: TraceRecord | None) -> EvalEntry:
        empty = {**fields, "index": index, "reward_key": setup.reward_key}
        if trace is None:
            return _empty_entry(None, task, "FAILED", group_error, **empty)
        episode_error = describe_error(trace.episode_error) if trace.episode_error else None
        failed = trace.rollout_failed
        # An engine abort stays ABORTED (not FAILED), so Miles' own abort checks see it.
        aborted = trace.failed and looks_like_engine_abort(trace.error)
        failure = "ABORTED" if aborted else "FAILED"
        try:
            sample = trace_to_sample(trace, index=index, policy=setup.branch_policy, **fields)
        except MultipleBranchesError:
            raise
        except ConversionError as error:
            logger.warning("evaluation rollout %s cannot be converted: %s", trace.id, error)
            return _empty_entry(trace, task, failure, describe_error(error), **empty)
        if sample is None:
            stopped = trace.is_truncated or trace.is_timeout  # a stop Verifiers scored
            status = "TRUNCATED" if stopped and not failed else failure
            return _empty_entry(trace, task, status, episode_error, failed=failed, **empty)
        # A Miles reward model replaces the reward later, and the eval reward key names a key of
        # its result; else a clean rollout must have the key and a failed one reads what it has.
        if setup.hooks.reward_model is None:
            sample.reward = trace_reward(
                trace, setup.reward_key, key_flag="--eval-reward-key", strict=not failed
            )
        if failed:
            sample.status = getattr(setup.sample_cls.Status, failure)
            if episode_error is not None:
                sample.metadata[METADATA_KEY]["episode_error"] = episode_error
        return EvalEntry(sample, trace, failed=failed, empty=False)

    return [entry(position * n + k, t) for k, t in enumerate(rollout_traces(run.traces, n))]


def rollout_traces(traces: Sequence[TraceRecord], n: int) -> list[TraceRecord | None]:
    """The record of each of ``n`` rollouts (None where one has none): by the rollout each
    record names, else by its place in the list."""
    found: list[TraceRecord | None] = [None] * n
    for position, trace in enumerate(traces):
        k = trace.rollout if trace.rollout is not None else position
        if 0 <= k < n and found[k] is None:
            found[k] = trace
    return found


async def evaluate(
    scope: CallScope,
    setup: EvalSetup,
    args: Any,
    *,
    weight_version: Any,
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Run the evaluation inside ``scope``; returns Miles' ``data`` and the ``eval/`` metrics."""
    gate = asyncio.Semaphore(setup.max_groups_in_flight)

    async def group(position: int, task: TaskRecord) -> tuple[bool, list[EvalEntry]]:
        async with gate:
            # Evaluation runs the tasks in load order: a task's slot is its index.
            result = await scope.run(position, position)
            # Every episode would refuse alike: stop, as training does.
            raise_if_unsupported(None if result.ok else result.error)
            entries = group_entries(result, task, position, setup, weight_version)
            scored = [e.sample for e in entries if not e.empty]
            if setup.hooks.reward_model is not None and scored:
                await setup.hooks.reward_model.apply(args, scored, evaluation=True)
            episodes_ok = result.ok and not any(t.episode_error for t in result.traces)
            return episodes_ok, entries

    groups = [scope.spawn(group(position, task)) for position, task in enumerate(setup.tasks)]
    per_group = await asyncio.gather(*groups)
    entries = [entry for _, group_list in per_group for entry in group_list]
    unsupported = [
        e.trace.error
        for e in entries
        if e.trace is not None
        and e.trace.error is not None
        and is_unsupported_request(e.trace.error)
    ]
    if unsupported:
        logger.error(
            "evaluation rollouts failed on a request the Miles transport cannot serve: %s",
            unsupported[0].message,
        )

    reward_args = SimpleNamespace(reward_key=setup.reward_key)
    samples = [e.sample for e in entries]
    truncated = setup.sample_cls.Status.TRUNCATED
    data = {
        setup.env_id: {
            # None for a failed rollout: Miles logs their share as eval/<env>-none_reward_ratio.
            "rewards": [
                None if e.failed else float(e.sample.get_reward_value(reward_args)) for e in entries
            ],
            "truncated": [s.status == truncated for s in samples],
            "samples": samples,
        }
    }
    traces = [e.trace for e in entries if e.trace is not None]
    metrics = with_eval_prefix(
        merge(
            trace_metrics(traces),
            {
                f"{TRAIN_PREFIX}failed_rollouts": float(sum(e.failed for e in entries)),
                f"{TRAIN_PREFIX}empty_traces": float(sum(e.empty for e in entries)),
                f"{TRAIN_PREFIX}failed_episodes": float(sum(not ok for ok, _ in per_group)),
            },
        )
    )
    return data, metrics
