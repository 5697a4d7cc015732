"""Which rollout-function calls a Miles run makes, in order (Miles' ``train.py``).

An eval-only run (``--num-rollout 0`` with ``--eval-interval``) evaluates once, at id 0.
Otherwise each rollout id from ``start`` trains once; with ``--eval-interval`` an evaluation
runs first (unless ``--skip-eval-before-train``) and after each ``k`` with
``(k + 1) % interval == 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from miles_verifiers.errors import CommandLineError


class ScheduleError(CommandLineError, ValueError):
    """The flags do not describe a run this runner can schedule."""


@dataclass(frozen=True)
class PlannedCall:
    kind: Literal["train", "eval"]
    rollout_id: int

    @property
    def evaluation(self) -> bool:
        return self.kind == "eval"


def _count(value: object, flag: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScheduleError(
            f"{flag} is {value!r}; it must be an integer >= {minimum}. Fix: pass {flag} N."
        )
    return value


def plan_calls(
    *,
    num_rollout: int | None,
    start_rollout_id: int | None,
    eval_interval: int | None,
    skip_eval_before_train: bool = False,
) -> list[PlannedCall]:
    """The calls of one run, in Miles' order."""
    if num_rollout is None:
        raise ScheduleError(
            "--num-rollout is not set, so there is no telling how many rollouts to run (Miles "
            "can only count epochs over its own prompt dataset, which Verifiers runs turn "
            "off). Fix: pass --num-rollout N (0 with --eval-interval for an eval-only run)."
        )
    total = _count(num_rollout, "--num-rollout", 0)
    start = _count(0 if start_rollout_id is None else start_rollout_id, "--start-rollout-id", 0)
    interval = None if eval_interval is None else _count(eval_interval, "--eval-interval", 1)
    if total == 0:
        if interval is None:
            raise ScheduleError(
                "--num-rollout 0 without --eval-interval runs nothing. Fix: pass --num-rollout "
                "N for training rollouts, or add --eval-interval for an eval-only run."
            )
        return [PlannedCall("eval", 0)]
    if start >= total:
        raise ScheduleError(
            f"--start-rollout-id {start} is not below --num-rollout {total}, so no rollout "
            "would run. Fix: lower --start-rollout-id or raise --num-rollout."
        )
    calls: list[PlannedCall] = []
    for rollout_id in range(start, total):
        if interval is not None and rollout_id == start and not skip_eval_before_train:
            calls.append(PlannedCall("eval", rollout_id))
        calls.append(PlannedCall("train", rollout_id))
        if interval is not None and (rollout_id + 1) % interval == 0:
            calls.append(PlannedCall("eval", rollout_id))
    return calls
