"""--rollout-num-gpus unset: Miles leaves it None outside --colocate unless the flag is given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from miles_verifiers_conformance.checks import check_train_output
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.world import MilesWorld, write_config

# The flag itself, not --rollout-num-gpus-per-engine.
FLAG = re.compile(r"--rollout-num-gpus(?![-\w])")


@pytest.mark.clause("OPT-6")
def test_rollout_num_gpus_unset_works_or_is_refused_by_name(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    args = miles_args(rollout_num_gpus=None, colocate=False, rollout_batch_size=1)
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 2})

    try:
        # A legacy function builds at its first call, so the call is part of the attempt.
        output = world.train(world.start(args, config), 0)
    except Exception as error:
        assert FLAG.search(str(error)), (
            "a run with --rollout-num-gpus unset failed without naming the flag: "
            f"{type(error).__name__}: {error}"
        )
        return
    check_train_output(output, args, world.contract)
