"""Tallying a run's outputs into the numbers its summary shows, and showing them.

:class:`RunTally` takes each call's output as it comes; :meth:`RunTally.finish` gives a frozen
:class:`RunSummary`. Drops and replacements are read from the metrics the rollout function
reports (Miles' ``rollout/dynamic_filter/drop_<reason>`` and ``verifiers/groups_replaced``);
everything else is counted from the samples themselves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rich.markup import escape
from rich.table import Table

from miles_verifiers.cli.records import flatten_samples
from miles_verifiers.trainer.metrics import DROP_PREFIX, GROUPS_REPLACED, TRAIN_PREFIX

REPLACED_KEY = f"{TRAIN_PREFIX}{GROUPS_REPLACED}"

# "interrupted": the run stopped early (Ctrl-C, SIGTERM) and holds only the calls it lists.
RunStatus = Literal["complete", "interrupted"]


def _status_value(sample: Any) -> str:
    status = getattr(sample, "status", None)
    return str(getattr(status, "value", status))


def sampled_tokens(sample: Any) -> int:
    """Tokens the model sampled for this sample (loss-masked ones; all response tokens when
    there is no mask)."""
    mask = getattr(sample, "loss_mask", None)
    return int(sum(mask)) if mask is not None else int(sample.response_length)


def reward_value(sample: Any, reward_args: Any) -> float | None:
    """The reward Miles would train on, or None when it is missing or not a number."""
    try:
        value = sample.get_reward_value(reward_args)
    except (KeyError, TypeError, IndexError):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class TrainCallStats:
    rollout_id: int
    wall_s: float
    groups: int
    samples: int
    sampled_tokens: int
    reward_mean: float | None
    metrics: Mapping[str, Any]


@dataclass(frozen=True)
class EvalEnvStats:
    rollout_id: int
    env_id: str
    rewards: int
    reward_mean: float | None
    truncated_rate: float | None
    samples: int


@dataclass(frozen=True)
class EvalCallStats:
    rollout_id: int
    wall_s: float
    envs: tuple[EvalEnvStats, ...]
    metrics: Mapping[str, Any]


@dataclass(frozen=True)
class RunSummary:
    status: RunStatus
    train_rollout_ids: tuple[int, ...]
    train_rollouts: int
    groups: int
    samples: int
    reward_mean: float | None
    drops: Mapping[str, float]
    replacements: float
    truncated_rate: float | None
    sampled_tokens: int
    train_wall_s: float
    wall_s: float
    evals: tuple[EvalEnvStats, ...]

    @property
    def tokens_per_s(self) -> float | None:
        return self.sampled_tokens / self.train_wall_s if self.train_wall_s > 0 else None

    def as_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["tokens_per_s"] = self.tokens_per_s
        return document


@dataclass
class RunTally:
    """Accumulates call outputs; ``reward_args`` is what ``Sample.get_reward_value`` reads."""

    reward_args: Any
    train_calls: list[TrainCallStats] = field(default_factory=list, init=False)
    eval_calls: list[EvalCallStats] = field(default_factory=list, init=False)
    _rewards: list[float] = field(default_factory=list, init=False, repr=False)
    _truncated: int = field(default=0, init=False, repr=False)
    _drops: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _replacements: float = field(default=0.0, init=False, repr=False)

    def add_train(
        self, rollout_id: int, samples: Any, metrics: Mapping[str, Any] | None, wall_s: float
    ) -> TrainCallStats:
        flat = list(flatten_samples(samples))
        rewards = [r for r in (reward_value(s, self.reward_args) for s in flat) if r is not None]
        self._rewards.extend(rewards)
        self._truncated += sum(_status_value(s) == "truncated" for s in flat)
        metrics = dict(metrics or {})
        for name, value in metrics.items():
            if name.startswith(DROP_PREFIX) and isinstance(value, (int, float)):
                self._drops[name.removeprefix(DROP_PREFIX)] += int(value)
        replaced = metrics.get(REPLACED_KEY)
        if isinstance(replaced, (int, float)):
            self._replacements += replaced
        stats = TrainCallStats(
            rollout_id=rollout_id,
            wall_s=wall_s,
            groups=len(samples) if isinstance(samples, (list, tuple)) else 0,
            samples=len(flat),
            sampled_tokens=sum(sampled_tokens(s) for s in flat),
            reward_mean=_mean(rewards),
            metrics=metrics,
        )
        self.train_calls.append(stats)
        return stats

    def add_eval(
        self,
        rollout_id: int,
        data: Mapping[str, Mapping[str, Any]],
        metrics: Mapping[str, Any] | None,
        wall_s: float,
    ) -> EvalCallStats:
        envs = []
        for env_id, entry in data.items():
            rewards = [
                float(r)
                for r in entry.get("rewards") or []
                if isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r)
            ]
            truncated = [bool(t) for t in entry.get("truncated") or []]
            envs.append(
                EvalEnvStats(
                    rollout_id=rollout_id,
                    env_id=str(env_id),
                    rewards=len(entry.get("rewards") or []),
                    reward_mean=_mean(rewards),
                    truncated_rate=_mean([float(t) for t in truncated]),
                    samples=sum(1 for _ in flatten_samples(entry.get("samples") or [])),
                )
            )
        stats = EvalCallStats(rollout_id, wall_s, tuple(envs), dict(metrics or {}))
        self.eval_calls.append(stats)
        return stats

    def finish(self, wall_s: float, status: RunStatus = "complete") -> RunSummary:
        samples = sum(c.samples for c in self.train_calls)
        return RunSummary(
            status=status,
            train_rollout_ids=tuple(c.rollout_id for c in self.train_calls),
            train_rollouts=len(self.train_calls),
            groups=sum(c.groups for c in self.train_calls),
            samples=samples,
            reward_mean=_mean(self._rewards),
            drops=dict(sorted(self._drops.items())),
            replacements=self._replacements,
            truncated_rate=self._truncated / samples if samples else None,
            sampled_tokens=sum(c.sampled_tokens for c in self.train_calls),
            train_wall_s=sum(c.wall_s for c in self.train_calls),
            wall_s=wall_s,
            evals=tuple(env for call in self.eval_calls for env in call.envs),
        )


# -- showing it -------------------------------------------------------------------------------


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.{digits}f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def id_ranges(ids: Sequence[int]) -> str:
    """Rollout ids as runs of consecutive ids: ``0-14``, ``3, 7-9``; ``none`` when empty."""
    runs: list[list[int]] = []
    for rollout_id in ids:
        if runs and rollout_id == runs[-1][1] + 1:
            runs[-1][1] = rollout_id
        else:
            runs.append([rollout_id, rollout_id])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "none"


def summary_table(summary: RunSummary) -> Table:
    table = Table(title="Rollout summary", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    drops = ", ".join(f"{reason} {_number(n)}" for reason, n in summary.drops.items()) or "none"
    rows = [
        ("run", summary.status),
        ("training rollouts", _number(summary.train_rollouts)),
        ("rollout ids", id_ranges(summary.train_rollout_ids)),
        ("groups", _number(summary.groups)),
        ("samples", _number(summary.samples)),
        ("reward mean", _number(summary.reward_mean)),
        ("groups dropped", drops),
        ("groups replaced", _number(summary.replacements)),
        ("truncated", _rate(summary.truncated_rate)),
        ("sampled tokens", _number(summary.sampled_tokens)),
        ("tokens/s (training calls)", _number(summary.tokens_per_s, 1)),
        ("training call time", f"{summary.train_wall_s:.2f} s"),
        ("wall time", f"{summary.wall_s:.2f} s"),
    ]
    for name, value in rows:
        table.add_row(name, escape(value))
    return table


def eval_table(summary: RunSummary) -> Table | None:
    if not summary.evals:
        return None
    table = Table(title="Evaluation", title_justify="left")
    for name, justify in (
        ("rollout id", "right"),
        ("env", "left"),
        ("rollouts", "right"),
        ("reward mean", "right"),
        ("truncated", "right"),
        ("samples", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for env in summary.evals:
        table.add_row(
            str(env.rollout_id),
            escape(env.env_id),
            str(env.rewards),
            _number(env.reward_mean),
            _rate(env.truncated_rate),
            str(env.samples),
        )
    return table
