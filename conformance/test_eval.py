"""Eval output: every task, in order, aligned per trace; failures recorded, not raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import status_name
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.world import (
    MilesWorld,
    env_id,
    identify,
    load_task_data,
    write_config,
)


def check_eval_entry(
    output: Any, world: MilesWorld, config: Path, expected_traces: int
) -> dict[str, Any]:
    assert isinstance(output, world.contract.RolloutFnEvalOutput), type(output).__name__
    assert set(output.data) == {env_id(config)}, (
        f"eval data must be keyed by the environment id, got {list(output.data)}"
    )
    entry = output.data[env_id(config)]
    lengths = {key: len(entry[key]) for key in ("rewards", "truncated", "samples")}
    assert set(lengths.values()) == {expected_traces}, (
        f"rewards, truncated and samples must hold one entry per trace ({expected_traces}): {lengths}"
    )
    assert all(isinstance(flag, bool) for flag in entry["truncated"]), "truncated holds booleans"
    return entry


@pytest.mark.clause("EVL-1")
@budget(ci=3)
@given(num_tasks=st.integers(1, 5), n_eval=st.integers(1, 3), rollout_id=st.integers(0, 5))
def test_eval_covers_every_task_in_order_aligned_per_trace(
    world: MilesWorld, workdir: Path, num_tasks: int, n_eval: int, rollout_id: int
) -> None:
    world.engine.reset()
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": num_tasks})
    prompts = [str(d.prompt) for d in load_task_data(config)]
    args = miles_args(n_samples_per_eval_prompt=n_eval, eval_interval=1)
    fn = world.start(args, config)

    entry = check_eval_entry(world.evaluate(fn, rollout_id), world, config, num_tasks * n_eval)

    order = [identify(sample, prompts) for sample in entry["samples"]]
    assert order == [p for p in prompts for _ in range(n_eval)], (
        "eval samples are not in task order"
    )
    values = [float(sample.get_reward_value(args)) for sample in entry["samples"]]
    assert entry["rewards"] == pytest.approx(values), "eval rewards do not match their samples"


@pytest.mark.clause("EVL-2")
def test_failing_eval_episodes_are_recorded_not_raised(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    config = write_config(
        workdir,
        "mv_faulty",
        taskset={
            "num_tasks": 4,
            "fault_rate": 0.5,
            "faults": ["harness_error", "group_reward_error"],
        },
    )
    tasks = load_task_data(config)
    args = miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=2, eval_interval=1)
    fn = world.start(args, config)

    entry = check_eval_entry(world.evaluate(fn, 0), world, config, len(tasks) * 2)

    statuses = [status_name(s) for s in entry["samples"]]
    faulty = [2 * i + k for i, task in enumerate(tasks) if task.fault is not None for k in range(2)]
    assert faulty, "the fixture config should make some tasks fail"
    assert all(statuses[i] == "failed" for i in faulty), (
        f"failed episodes must be marked failed: {statuses}"
    )
    rewards = entry["rewards"]
    assert all(rewards[i] is None for i in faulty), (
        f"a failed rollout's reward must be None (Miles logs their share as "
        f"none_reward_ratio): {rewards}"
    )
