"""What Miles does around a rollout function: kept as a name the suite's tests import.

The port itself lives in the project's Miles test kit (``miles_verifiers_testkit.miles``),
shared with the unit tests and the benchmarks; these are the names the suite reads from it:
the argument namespace with Miles' defaults, the call deadline, how the manager flattens a
train output and normalises rewards, and its checkpoint records. Mock notice: a stand-in for
Miles, which cannot run here.
"""

from __future__ import annotations

from miles_verifiers_testkit.miles import (
    CallDeadlineExceeded,
    flatten,
    group_advantages,
    miles_args,
    normalized_rewards,
    point_at_engine,
    record_checkpoint,
    saves_checkpoint,
)

__all__ = [
    "CallDeadlineExceeded",
    "flatten",
    "group_advantages",
    "miles_args",
    "normalized_rewards",
    "point_at_engine",
    "record_checkpoint",
    "saves_checkpoint",
]
