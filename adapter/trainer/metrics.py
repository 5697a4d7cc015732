"""Metric names and values the rollout function reports to Miles.

Train metrics keep the names of the upstream adapter and Miles' built-in rollout
(``rollout/dynamic_filter/drop_<reason>``, ``verifiers/reward_mean`` ...), so dashboards keep
working; eval metrics carry an ``eval/`` prefix, so no key is logged on both step axes. Means
are over what the caller passes: the traces and samples returned, not the dropped ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class TraceSummary:
    """The few numbers metrics need from one verifiers trace."""

    reward: float
    failed: bool
    is_truncated: bool
    num_turns: int
    response_tokens: int
    total_tokens: int
    rewards: Mapping[str, float] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    is_timeout: bool = False
    recovered_errors: int = 0
    episode_recovered_errors: int = 0


def summarize_trace(trace: TraceRecord) -> TraceSummary:
    return TraceSummary(
        reward=float(trace.reward),
        failed=trace.failed,
        is_truncated=bool(trace.is_truncated),
        num_turns=int(trace.num_turns),
        response_tokens=int(trace.num_output_tokens),
        total_tokens=int(trace.num_total_tokens),
        rewards=dict(trace.rewards),
        metrics=dict(trace.metrics),
        is_timeout=trace.is_timeout,
        recovered_errors=trace.recovered_errors,
        episode_recovered_errors=trace.episode_recovered_errors,
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def trace_metrics(
    summaries: Sequence[TraceSummary], prefix: str = TRAIN_PREFIX
) -> dict[str, float]:
    """Reward, error/truncation rates, turns and tokens over ``summaries`` ({} when empty).

    Each reward function's score and each metric the environment recorded gets its mean over
    the traces that carry it, as ``reward/<name>`` and ``metric/<name>``.
    """
    if not summaries:
        return {}
    values = {
        "num_traces": float(len(summaries)),
        "reward_mean": _mean([s.reward for s in summaries]),
        "error_rate": _mean([float(s.failed) for s in summaries]),
        "truncated_rate": _mean([float(s.is_truncated) for s in summaries]),
        # Verifiers 0.4's own verdicts: an agent timeout is a stop (trained as truncated).
        "timeout_rate": _mean([float(s.is_timeout) for s in summaries]),
        "recovered_errors": float(sum(s.recovered_errors for s in summaries)),
        "episode_recovered_errors": float(sum(s.episode_recovered_errors for s in summaries)),
        "num_turns_mean": _mean([float(s.num_turns) for s in summaries]),
        "num_turns_max": float(max(s.num_turns for s in summaries)),
        "response_tokens_mean": _mean([float(s.response_tokens) for s in summaries]),
        "total_tokens_mean": _mean([float(s.total_tokens) for s in summaries]),
        **_means_by_name([s.rewards for s in summaries], "reward/"),
        **_means_by_name([s.metrics for s in summaries], "metric/"),
    }
    return {f"{prefix}{name}": value for name, value in values.items()}


def _means_by_name(values: Sequence[Mapping[str, float]], prefix: str) -> dict[str, float]:
    names = sorted({name for one in values for name in one})
    return {
        f"{prefix}{name}": _mean([one[name] for one in values if name in one]) for name in names
    }


def sample_metrics(
    samples: Sequence[Any], reward_args: Any, prefix: str = TRAIN_PREFIX
) -> dict[str, float]:
    """What Miles will train on: its reward (after any Miles reward model), lengths, aborts.

    ``reward_args`` is what ``Sample.get_reward_value`` reads (anything with ``reward_key``).
    """
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
    return {f"{prefix}{name}": value for name, value in values.items()}


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
    prefix: str = TRAIN_PREFIX,
) -> dict[str, float]:
    """Group counts of one rollout; what was dispatched beyond ``first_batch`` (carry-over plus
    the over-sampling batch) replaced dropped groups."""
    return {
        f"{prefix}groups_dispatched": float(dispatched),
        f"{prefix}groups_accepted": float(accepted),
        f"{prefix}groups_dropped": float(dropped),
        f"{prefix}{GROUPS_REPLACED}": float(max(0, dispatched - first_batch)),
        f"{prefix}groups_carried_over": float(carried_over),
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
