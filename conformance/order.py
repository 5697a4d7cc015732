"""The documented task order, and what a run actually trained on.

The order: the taskset is cycled epoch after epoch (each epoch in load order, or its own
permutation with --rollout-shuffle); a rollout returns the first --rollout-batch-size kept
groups in that order; a dropped group is replaced by the next task; tasks started but not
needed come first in the next rollout. So the tasks trained on are the task stream with the
dropped tasks removed, whatever the over-sampling and the timing.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from conformance.checks import check_train_output
from conformance.world import MilesWorld, identify


def trained_prompts(
    world: MilesWorld, fn: Any, args: Any, prompts: list[str], rollout_ids: range
) -> list[list[str]]:
    """The task of every returned group, rollout by rollout (GRP-1 checked on the way)."""
    per_rollout = []
    for rollout_id in rollout_ids:
        groups = check_train_output(world.train(fn, rollout_id), args, world.contract)
        tasks = []
        for position, group in enumerate(groups):
            found = {identify(sample, prompts) for sample in group}
            assert len(found) == 1 and None not in found, (
                f"rollout {rollout_id} group {position} mixes tasks or has an unknown prompt: {found}"
            )
            tasks.append(found.pop())
        per_rollout.append(tasks)
    return per_rollout


def check_epoch_order(
    trained: list[str], prompts: list[str], dropped: set[str], shuffled: bool
) -> None:
    kept = [p for p in prompts if p not in dropped]
    if not shuffled:
        expected = list(
            itertools.islice(
                (p for p in itertools.cycle(prompts) if p not in dropped), len(trained)
            )
        )
        assert trained == expected, (
            "the tasks trained on do not follow the taskset order with only the dropped tasks removed:\n"
            f"  got      {trained}\n  expected {expected}"
        )
        return
    for epoch, start in enumerate(range(0, len(trained), len(kept))):
        chunk = Counter(trained[start : start + len(kept)])
        if start + len(kept) <= len(trained):
            assert chunk == Counter(kept), (
                f"epoch {epoch} does not use every kept task exactly once: {chunk}"
            )
        else:
            assert not chunk - Counter(kept), f"epoch {epoch} repeats a task: {chunk}"
