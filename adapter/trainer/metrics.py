"""Metric names and values the rollout function reports to Miles.

Train metrics keep the names of the upstream adapter and Miles' built-in rollout
(``rollout/dynamic_filter/drop_<reason>``, ``verifiers/reward_mean`` ...), so dashboards keep
working; eval metrics carry an ``eval/`` prefix, so no key is logged on both step axes. Means
are over what the caller passes: the traces and samples returned, not the dropped ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from miles_verifiers.protocol.records import TraceRecord

TRAIN_PREFIX = "verifiers/"
EVAL_PREFIX = "eval/"
DROP_PREFIX = "rollout/dynamic_filter/drop_"

# Drop reasons the rollout function itself assigns (filters add their own).
DROP_EPISODE_ERROR = "episode_error"  # an episode failed as a whole (0.4: episode not ok)
DROP_TRACE_ERROR = "trace_error"  # Verifiers judged a trace of the group failed
DROP_EMPTY_TRACE = "empty_trace"  # a trace committed no model turn (no branch)
DROP_ABORTED = "aborted"  # the engine aborted a request of the group
DROP_ENGINE_CONTRACT = "engine_contract"  # the engine answered a request of the group with garbage
DROP_WORKER_LOST = "worker_lost"  # the episode worker running the group died or hung

# Read by the kit's run summary.
GROUPS_REPLACED = "groups_replaced"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def trace_metrics(traces: Sequence[TraceRecord]) -> dict[str, float]:
    """Reward, error/truncation rates, turns and tokens over ``traces`` ({} when empty), and
    each reward function's and metric's mean over the traces that carry it."""
    if not traces:
        return {}
    values = {
        "num_traces": float(len(traces)),
        "reward_mean": _mean([float(t.reward) for t in traces]),
        "error_rate": _mean([float(t.failed) for t in traces]),
        "truncated_rate": _mean([float(t.is_truncated) for t in traces]),
        # Verifiers 0.4's own verdicts: an agent timeout is a stop (trained as truncated).
        "timeout_rate": _mean([float(t.is_timeout) for t in traces]),
        "recovered_errors": float(sum(t.recovered_errors for t in traces)),
        "episode_recovered_errors": float(sum(t.episode_recovered_errors for t in traces)),
        "num_turns_mean": _mean([float(t.num_turns) for t in traces]),
        "num_turns_max": float(max(t.num_turns for t in traces)),
        "response_tokens_mean": _mean([float(t.num_output_tokens) for t in traces]),
        "total_tokens_mean": _mean([float(t.num_total_tokens) for t in traces]),
        **_means_by_name([t.rewards for t in traces], "reward/"),
        **_means_by_name([t.metrics for t in traces], "metric/"),
    }
    return {f"{TRAIN_PREFIX}{name}": value for name, value in values.items()}


def _means_by_name(values: Sequence[Mapping[str, float]], prefix: str) -> dict[str, float]:
    names = sorted({name for one in values for name in one})
    return {
        f"{prefix}{name}": _mean([one[name] for one in values if name in one]) for name in names
    }


def sample_metrics(samples: Sequence[Any], reward_args: Any) -> dict[str, float]:
    """What Miles will train on: its reward (after any Miles reward model; ``reward_args`` is
    what ``Sample.get_reward_value`` reads), lengths, aborts."""
    if not samples:
        return {}
    values = {
        "sample_reward_mean": _mean([float(s.get_reward_value(reward_args)) for s in samples]),
        "response_length_mean": _mean([float(s.response_length) for s in samples]),
        "loss_tokens_mean": _mean([float(s.effective_response_length) for s in samples]),
        "aborted_rate": _mean(
            [float(getattr(s.status, "value", s.status) == "aborted") for s in samples]
        ),
    }
    return {f"{TRAIN_PREFIX}{name}": value for name, value in values.items()}


def drop_metrics(drops: Mapping[str, int]) -> dict[str, float]:
    """``rollout/dynamic_filter/drop_<reason>`` per reason, Miles' own key for filter drops."""
    return {
        f"{DROP_PREFIX}{reason}": float(count)
        for reason, count in drops.items()
        if reason and count
    }


def scheduling_metrics(
    *,
    first_batch: int,
    dispatched: int,
    accepted: int,
    dropped: int,
    carried_over: int,
) -> dict[str, float]:
    """Group counts of one rollout; what was dispatched beyond ``first_batch`` (carry-over plus
    the over-sampling batch) replaced dropped groups."""
    return {
        f"{TRAIN_PREFIX}groups_dispatched": float(dispatched),
        f"{TRAIN_PREFIX}groups_accepted": float(accepted),
        f"{TRAIN_PREFIX}groups_dropped": float(dropped),
        f"{TRAIN_PREFIX}{GROUPS_REPLACED}": float(max(0, dispatched - first_batch)),
        f"{TRAIN_PREFIX}groups_carried_over": float(carried_over),
    }


def with_eval_prefix(metrics: Mapping[str, float]) -> dict[str, float]:
    """The same metrics under ``eval/`` (idempotent)."""
    return {
        (name if name.startswith(EVAL_PREFIX) else f"{EVAL_PREFIX}{name}"): value
        for name, value in metrics.items()
    }


def merge(*parts: Mapping[str, float]) -> dict[str, float]:
    """Merge metric dicts; a name reported twice is a bug, so it raises."""
    merged: dict[str, float] = {}
    for part in parts:
        for name, value in part.items():
            if name in merged:
                raise ValueError(f"metric {name!r} is reported twice")
            merged[name] = value
    return merged
