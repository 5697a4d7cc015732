"""A train batch of mv-compact tasks in which exactly one task branches, wherever the property
clauses (``test_branches.py``, ``test_siblings.py``) place it."""

from __future__ import annotations

from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path

from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.world import write_config

TASKS = 8  # more than batch + extra, so the branching task appears once per call


@dataclass(frozen=True)
class BranchingBatch:
    config: Path
    args: Namespace
    position: int  # the group of the batch whose task branches
    branches: int  # how many graph branches each of its rollouts has


def branching_batch(
    workdir: Path, *, steps: int, batch: int, n: int, extra: int, first_rollout: int, slot: int
) -> BranchingBatch:
    """Train call ``first_rollout`` of ``batch`` groups of ``n``, whose group ``slot % batch``
    runs ``steps`` steps (compacting every 2) while its neighbours run 2 and never compact."""
    position = slot % batch
    branching_task = (first_rollout * batch + position) % TASKS
    config = write_config(
        workdir,
        "mv_compact",
        taskset={"num_tasks": TASKS, "steps": 2, "steps_by_task": {str(branching_task): steps}},
        harness={"compact_every": 2},
        top={"max_turns": 16},  # room for all 14 steps
    )
    args = miles_args(
        rollout_batch_size=batch, n_samples_per_prompt=n, over_sampling_batch_size=batch + extra
    )
    return BranchingBatch(config, args, position, branches=steps // 2)
