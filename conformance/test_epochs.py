"""Epochs under --rollout-shuffle: each epoch its own order (see order.py for the rest).

Each epoch is split over two rollouts, and only which tasks fall in each half is compared:
that depends on the epoch's order, never on the order in which groups come back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.order import trained_prompts
from miles_verifiers_conformance.world import MilesWorld, load_task_data, write_config

NUM_TASKS = 6  # 20 ways to pick an epoch's first half: three equal ones are not luck
HALF = NUM_TASKS // 2
EPOCHS = 3


@pytest.mark.clause("CYC-3")
def test_each_shuffled_epoch_has_its_own_order(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": NUM_TASKS, "seed": 7})
    prompts = [str(d.prompt) for d in load_task_data(config)]
    args = miles_args(rollout_batch_size=HALF, n_samples_per_prompt=1, rollout_shuffle=True)
    fn = world.start(args, config)

    rollouts = trained_prompts(world, fn, args, prompts, range(2 * EPOCHS))

    first_halves = []
    for epoch in range(EPOCHS):
        first, second = rollouts[2 * epoch], rollouts[2 * epoch + 1]
        assert sorted(first + second) == sorted(prompts), (
            f"epoch {epoch} does not use every task once"
        )
        first_halves.append(frozenset(first))
    assert len(set(first_halves)) > 1, (
        f"all {EPOCHS} shuffled epochs start with the same {HALF} tasks: one order repeated"
    )
