"""Probe: Miles' own entry-point path (parse_args, placement groups, the RolloutManager Ray
actor) against a running loopback engine, as far as it goes on a machine without a GPU.

Usage (a loopback engine on PORT, e.g. ``miles-verifiers engine serve --port PORT``)::

    VERIFIERS_CONFIG=fixtures/configs/mv_arith.toml PYTHONPATH=. \\
        python -m tests_miles.run_miles_manager PORT

Ray is started locally with one GPU *declared* (none exists), so placement succeeds; the
README section for ``tox -e miles`` records where Miles stops and why.
"""

from __future__ import annotations

import os
import sys

from tests_miles.miles_env import install_sglang_shim
from tests_miles.support import miles_command_line

_FORWARDED_ENV = (
    "VERIFIERS_CONFIG",
    "HF_HUB_OFFLINE",
    "HF_HUB_CACHE",
    "MILES_VERIFIERS_CACHE",
    "TRANSFORMERS_OFFLINE",
    "PYTHONPATH",
    "MILES_VERIFIERS_CONTRACT",
)


def main(port: int) -> None:
    install_sglang_shim()
    import ray

    ray.init(
        num_cpus=4,
        num_gpus=1,
        include_dashboard=False,
        runtime_env={
            "worker_process_setup_hook": "tests_miles.miles_env.install_sglang_shim",
            "env_vars": {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ},
        },
    )
    from miles.ray.placement_group import create_placement_groups, create_rollout_manager
    from miles.utils.arguments import parse_args

    # Miles starts its own router unless one is named; the loopback engine stands in for it.
    sys.argv = miles_command_line(
        os.environ["VERIFIERS_CONFIG"],
        port,
        "--sglang-router-ip", "127.0.0.1",
        "--sglang-router-port", str(port),
    )  # fmt: skip
    args = parse_args()
    pgs = create_placement_groups(args)
    manager, _ = create_rollout_manager(args, pgs["rollout"])
    ray.get(manager.set_train_parallel_config.remote({"dp_size": 1}), timeout=600)
    for rollout_id in range(args.num_rollout):
        out = ray.get(manager.generate.remote(rollout_id), timeout=600)
        print(f"rollout {rollout_id}: sample_indices {out['sample_indices']}")
        ray.get(manager.eval.remote(rollout_id), timeout=600)
        print(f"eval {rollout_id}: done")


if __name__ == "__main__":
    main(int(sys.argv[1]))
