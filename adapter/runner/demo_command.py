"""``miles-verifiers demo``: the embedded default end to end, with small settings.

It is ``rollout --config mv-arith`` with :data:`DEMO_FLAGS` under whatever the user passes:
3 training rollouts of 4 groups x 4 samples, then one evaluation over the taskset, all on the
embedded loopback engine with the offline Qwen3 tokenizer, with per-rollout seeds so that two
demo runs give the same samples.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from miles_verifiers.runner.arguments import new_subparser
from miles_verifiers.runner.rollout_command import add_run_arguments, run_with_preset

COMMAND = "demo"
DEMO_CONFIG = "mv-arith"
DEMO_FLAGS: Mapping[str, Any] = {
    "rollout_batch_size": 4,
    "n_samples_per_prompt": 4,
    "num_rollout": 3,
    "rollout_max_response_len": 256,
    "rollout_num_gpus": 1,
    # One evaluation, after the last rollout (ids 0..2; (2 + 1) % 3 == 0).
    "eval_interval": 3,
    "skip_eval_before_train": True,
    "n_samples_per_eval_prompt": 1,
    # Per-rollout sampling seeds, which the loopback engine honours: the demo reproduces.
    "sglang_enable_deterministic_inference": True,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``demo`` to the ``miles-verifiers`` command line."""
    parser = new_subparser(
        subparsers,
        COMMAND,
        help="run the embedded default: mv-arith, 3 rollouts of 4x4 samples plus one eval",
        description=(
            "Train-style rollouts of the mv-arith fixture taskset on the embedded loopback "
            "engine, with small Miles settings (any Miles flag given here overrides them): "
            + " ".join(_as_flag(name, value) for name, value in DEMO_FLAGS.items())
        ),
    )
    add_run_arguments(parser)
    parser.set_defaults(handler=run_demo, config=DEMO_CONFIG)


def _as_flag(name: str, value: Any) -> str:
    flag = f"--{name.replace('_', '-')}"
    return flag if value is True else f"{flag} {value}"


def run_demo(cli: argparse.Namespace) -> int:
    return run_with_preset(cli, COMMAND, DEMO_FLAGS)
