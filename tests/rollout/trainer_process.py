"""A trainer for kill tests: ``python -m tests.rollout.trainer_process CONFIG PORT SAMPLES``.

Builds the rollout function on two local episode workers against the loopback engine on
``PORT`` (as the ``build_rollout_fn`` fixture does) and runs training calls of ``SAMPLES``
samples per prompt, one after the other, until it is killed (or has run out of rollouts).
"""

from __future__ import annotations

import os
import sys

from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers_testkit.miles import MilesLoop, construct_rollout_fn
from tests.rollout.rollout_support import call, miles_args, point_at, train_input

ROLLOUTS = 100  # far more than a test waits for


def main(config: str, port: int, samples: int) -> None:
    os.environ["VERIFIERS_CONFIG"] = config
    args = miles_args(
        rollout_batch_size=2, over_sampling_batch_size=2, n_samples_per_prompt=samples
    )
    settings = AdapterSettings(episode_workers=2)
    fn = construct_rollout_fn(VerifiersRolloutFn, contract(), args, settings=settings)
    point_at(args, port)
    loop = MilesLoop()
    for rollout_id in range(ROLLOUTS):
        call(fn, train_input(rollout_id), loop)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
