"""Metric names and values the rollout function reports to Miles.

Train metrics keep the names the upstream adapter and Miles' built-in rollout use
(``rollout/dynamic_filter/drop_<reason>``, ``verifiers/reward_mean`` ...), so existing
dashboards keep working, and add drop reasons, replacements, carry-over, tokens and turns.
Eval metrics carry an ``eval/`` prefix, so no key is logged on both the train and the eval
step axis.

Everything is pure: summaries and counts in, a flat ``{name: number}`` dict out. Means are
taken over what the caller passes, which should be the traces/samples actually returned
(not the dropped or carried-over ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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

# Upstream names (train); eval gets the same names under EVAL_PREFIX.
REWARD_MEAN = "reward_mean"
ERROR_RATE = "error_rate"
TRUNCATED_RATE = "truncated_rate"
NUM_TURNS_MEAN = "num_turns_mean"
# Added by this project.
NUM_TURNS_MAX = "num_turns_max"
NUM_TRACES = "num_traces"
RESPONSE_TOKENS_MEAN = "response_tokens_mean"
TOTAL_TOKENS_MEAN = "total_tokens_mean"
SAMPLE_REWARD_MEAN = "sample_reward_mean"
RESPONSE_LENGTH_MEAN = "response_length_mean"
LOSS_TOKENS_MEAN = "loss_tokens_mean"
ABORTED_RATE = "aborted_rate"
# Verifiers 0.4's own verdicts: agent timeouts (a stop, trained as TRUNCATED) and the errors
# that traces and episodes recovered from under retries (a count over the call's traces).
TIMEOUT_RATE = "timeout_rate"
RECOVERED_ERRORS = "recovered_errors"
EPISODE_RECOVERED_ERRORS = "episode_recovered_errors"
GROUPS_DISPATCHED = "groups_dispatched"
GROUPS_ACCEPTED = "groups_accepted"
GROUPS_DROPPED = "groups_dropped"
GROUPS_REPLACED = "groups_replaced"
GROUPS_CARRIED_OVER = "groups_carried_over"
# Per name, the mean over the traces that carry it: each reward function's score and each
# metric the environment recorded (Verifiers 0.4's ``Env.finalize`` included).
REWARD_NAME_PREFIX = "reward/"
METRIC_NAME_PREFIX = "metric/"


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
    """Reward, error/truncation rates, turns and tokens over ``summaries`` ({} when empty)."""
    if not summaries:
        return {}
    return {
        f"{prefix}{NUM_TRACES}": float(len(summaries)),
        f"{prefix}{REWARD_MEAN}": _mean([s.reward for s in summaries]),
        f"{prefix}{ERROR_RATE}": _mean([float(s.failed) for s in summaries]),
        f"{prefix}{TRUNCATED_RATE}": _mean([float(s.is_truncated) for s in summaries]),
        f"{prefix}{TIMEOUT_RATE}": _mean([float(s.is_timeout) for s in summaries]),
        f"{prefix}{RECOVERED_ERRORS}": float(sum(s.recovered_errors for s in summaries)),
        f"{prefix}{EPISODE_RECOVERED_ERRORS}": float(
            sum(s.episode_recovered_errors for s in summaries)
        ),
        f"{prefix}{NUM_TURNS_MEAN}": _mean([float(s.num_turns) for s in summaries]),
        f"{prefix}{NUM_TURNS_MAX}": float(max(s.num_turns for s in summaries)),
        f"{prefix}{RESPONSE_TOKENS_MEAN}": _mean([float(s.response_tokens) for s in summaries]),
        f"{prefix}{TOTAL_TOKENS_MEAN}": _mean([float(s.total_tokens) for s in summaries]),
        **_means_by_name([s.rewards for s in summaries], f"{prefix}{REWARD_NAME_PREFIX}"),
        **_means_by_name([s.metrics for s in summaries], f"{prefix}{METRIC_NAME_PREFIX}"),
    }


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
    return {
        f"{prefix}{SAMPLE_REWARD_MEAN}": _mean(
            [float(s.get_reward_value(reward_args)) for s in samples]
        ),
        f"{prefix}{RESPONSE_LENGTH_MEAN}": _mean([float(s.response_length) for s in samples]),
        f"{prefix}{LOSS_TOKENS_MEAN}": _mean([float(s.effective_response_length) for s in samples]),
        f"{prefix}{ABORTED_RATE}": _mean(
            [float(getattr(s.status, "value", s.status) == "aborted") for s in samples]
        ),
    }


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
    """Group counts of one rollout.

    ``first_batch`` is the size of the rollout's first dispatch (carry-over plus the
    over-sampling batch); everything dispatched after it replaced a dropped group, so
    ``groups_replaced`` is the extra work drops cost. ``groups_carried_over`` will be re-run
    first in the next rollout.
    """
    return {
        f"{prefix}{GROUPS_DISPATCHED}": float(dispatched),
        f"{prefix}{GROUPS_ACCEPTED}": float(accepted),
        f"{prefix}{GROUPS_DROPPED}": float(dropped),
        f"{prefix}{GROUPS_REPLACED}": float(max(0, dispatched - first_batch)),
        f"{prefix}{GROUPS_CARRIED_OVER}": float(carried_over),
    }


def with_eval_prefix(metrics: Mapping[str, float]) -> dict[str, float]:
    """The same metrics under ``eval/`` (idempotent)."""
    return {
        (name if name.startswith(EVAL_PREFIX) else f"{EVAL_PREFIX}{name}"): value
        for name, value in metrics.items()
    }


def merge(*parts: Iterable[tuple[str, float]] | Mapping[str, float]) -> dict[str, float]:
    """Merge metric dicts; a name reported twice is a bug, so it raises."""
    merged: dict[str, float] = {}
    for part in parts:
        items = part.items() if isinstance(part, Mapping) else part
        for name, value in items:
            if name in merged:
                raise ValueError(f"metric {name!r} is reported twice")
            merged[name] = value
    return merged
