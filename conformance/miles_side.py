"""What Miles does around a rollout function: kept as a name the suite's tests import.

The port itself lives in the project's Miles test kit (``miles_verifiers_testkit.miles``),
shared with the unit tests and the benchmarks: the argument namespace with Miles' defaults,
the persistent event loop and worker-thread call, and how the manager flattens a train
output and normalises rewards. Mock notice: a stand-in for Miles, which cannot run here.
"""

from __future__ import annotations

from miles_verifiers_testkit.miles import (
    GROUP_NORMALIZED_ESTIMATORS,
    STD_EPSILON,
    STD_NORMALIZED_ESTIMATORS,
    CallDeadlineExceeded,
    MilesLoop,
    call_from_worker_thread,
    call_rollout_function,
    flatten,
    group_advantages,
    miles_args,
    normalized_rewards,
    point_at_engine,
    record_checkpoint,
    reward_group_segments,
    saves_checkpoint,
)

__all__ = [
    "GROUP_NORMALIZED_ESTIMATORS",
    "STD_EPSILON",
    "STD_NORMALIZED_ESTIMATORS",
    "CallDeadlineExceeded",
    "MilesLoop",
    "call_from_worker_thread",
    "call_rollout_function",
    "flatten",
    "group_advantages",
    "miles_args",
    "normalized_rewards",
    "point_at_engine",
    "record_checkpoint",
    "reward_group_segments",
    "saves_checkpoint",
]
