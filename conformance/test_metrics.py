"""Metric names: Miles logs train and eval metrics on different step axes."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.world import MilesWorld, write_config


@pytest.mark.clause("EVL-3")
def test_eval_metrics_share_no_key_with_train_metrics(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    args = miles_args(rollout_batch_size=2, eval_interval=1)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 2}))

    train = world.train(fn, 0).metrics or {}
    evaluation = world.evaluate(fn, 0).metrics or {}

    shared = sorted(set(train) & set(evaluation))
    assert not shared, f"train and eval metrics log under the same keys: {shared}"
