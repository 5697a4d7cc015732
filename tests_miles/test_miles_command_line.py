"""The adapter built from arguments Miles' own ``parse_args`` produced for a documented
Verifiers command line (external engine, no global dataset, eval placeholder), then run for a
few rollouts with eval, the way ``train.py`` schedules them.

This is as far up Miles' stack as runs on CPU without Ray's GPU placement: the README
section for ``tox -e miles`` says where the full entry point stops and why.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest import mock

from tests.rollout.rollout_support import RecordingEngine, write_config
from tests_miles.support import (
    build,
    evaluate,
    in_worker_thread,
    miles_command_line,
    train,
    train_data,
)


def _parse_miles_command_line(config: Path, port: int) -> Any:
    from miles.utils.arguments import parse_args

    argv = miles_command_line(str(config), port)
    with mock.patch.object(sys, "argv", argv):
        return parse_args()


def test_a_run_parsed_by_miles_trains_and_evaluates_through_the_adapter(
    engine: RecordingEngine, engine_port: int, tmp_path: Path, use_config: Any
) -> None:
    from miles.ray.rollout.metrics import log_eval_rollout_data
    from miles.utils.misc import should_run_periodic_action

    config = write_config(tmp_path, "mv_arith", taskset={"num_tasks": 4})
    use_config(config)
    args = in_worker_thread(_parse_miles_command_line, config, engine_port)
    assert (
        args.rollout_function_path
        == args.eval_function_path
        == "miles_verifiers.VerifiersRolloutFn"
    )

    fn = build(args.rollout_function_path, args, engine_port)
    evaluated = []
    for rollout_id in range(args.num_rollout):
        output = train(fn, rollout_id)
        flat, data = train_data(args, output)
        assert len(flat) == len(data["tokens"]) == 4
        if should_run_periodic_action(rollout_id, args.eval_interval, None):
            result = evaluate(fn, rollout_id)
            logged = log_eval_rollout_data(rollout_id, args, result.data, result.metrics)
            evaluated.append(
                sorted(k for k in logged if k.startswith("eval/") and k.count("/") == 1)
            )
    assert len(evaluated) == 2
    assert all(any(key.endswith("-truncated_ratio") for key in keys) for keys in evaluated)
