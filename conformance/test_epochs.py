"""Epochs under --rollout-shuffle: each epoch its own order (see order.py for the rest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.miles_side import miles_args
from conformance.order import trained_prompts
from conformance.world import MilesWorld, load_task_data, write_config

NUM_TASKS = 6  # 720 orders: with distinct per-epoch seeds three equal epochs are not luck
EPOCHS = 3


@pytest.mark.clause("CYC-3")
def test_each_shuffled_epoch_has_its_own_order(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": NUM_TASKS, "seed": 7})
    prompts = [str(d.prompt) for d in load_task_data(config)]
    args = miles_args(
        rollout_batch_size=NUM_TASKS, n_samples_per_prompt=1, rollout_shuffle=True
    )
    fn = world.start(args, config)

    epochs = trained_prompts(world, fn, args, prompts, range(EPOCHS))

    for epoch, order in enumerate(epochs):
        assert sorted(order) == sorted(prompts), f"epoch {epoch} does not use every task once"
    assert len({tuple(order) for order in epochs}) > 1, (
        f"all {EPOCHS} shuffled epochs use one and the same task order"
    )
