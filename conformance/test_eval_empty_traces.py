"""Eval output stays aligned per trace when rollouts never reach the model (EVL-1's hard case)."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.test_eval import check_eval_entry
from miles_verifiers_conformance.world import MilesWorld, write_config


@pytest.mark.clause("EVL-1")
def test_eval_stays_aligned_per_trace_when_traces_are_empty(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    # Every prompt is longer than the eval prompt limit: each rollout ends before its first
    # model call, a trace with no tokens at all.
    config = write_config(workdir, "mv_longprompt", taskset={"num_tasks": 2, "filler_words": 200})
    args = miles_args(n_samples_per_eval_prompt=2, eval_interval=1, eval_max_prompt_len=32)
    fn = world.start(args, config)

    check_eval_entry(world.evaluate(fn, 0), world, config, expected_traces=4)
