"""Verifiers 0.4's episode judgement (``Env.finalize``): the counterpart of 0.2's group rewards.

0.4 has no group rewards; an episode is judged on its own, once its traces are done, by the
environment's ``finalize``. mv-group04 pays each trace ``correct`` (1.0 when its answer is
right), and its ``finalize`` adds 0.5 x ``well_formed`` (1.0 when the reply holds a
well-formed answer) to the episode's trace, or raises for the tasks its config names. These
clauses run where the fixture configs are Verifiers 0.4's (``tox -e verifiers04``); with 0.2's,
``mv_group`` is the group-reward taskset of ``test_groups.py`` and they are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.checks import check_train_output
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.world import (
    MilesWorld,
    identify,
    load_task_data,
    require_taskset,
    write_config,
)
from miles_verifiers_testkit.engine import PolicyConfig
from miles_verifiers_testkit.harness.protocol import parse_answer

CORRECT_WEIGHT = 1.0
WELL_FORMED_WEIGHT = 0.5
JUDGED_TASKSET = "mv-group04"


def judged_config(workdir: Path, **taskset: Any) -> Path:
    config = write_config(workdir, "mv_group", taskset=taskset)
    require_taskset(config, JUDGED_TASKSET)
    return config


def expected_reward(sample: Any, label: str, decode: Any) -> float:
    answer = parse_answer(decode(sample.tokens[len(sample.tokens) - sample.response_length :]))
    return CORRECT_WEIGHT * float(answer == int(label)) + WELL_FORMED_WEIGHT * float(
        answer is not None
    )


@pytest.mark.clause("FIN-1")
def test_rewards_recorded_by_finalize_count_in_the_reward_of_their_traces_sample(
    world: MilesWorld, workdir: Path, qwen_tokenizer: Any
) -> None:
    world.engine.reset(policy=PolicyConfig(accuracy=0.5, seed=3))
    config = judged_config(workdir, num_tasks=3)
    tasks = load_task_data(config)
    prompts = [str(t.prompt) for t in tasks]
    label_of = {str(t.prompt): t.label for t in tasks}
    args = miles_args(rollout_batch_size=3, n_samples_per_prompt=2)
    fn = world.start(args, config)

    groups = check_train_output(world.train(fn, 0), args, world.contract)

    for position, group in enumerate(groups):
        task = identify(group[0], prompts)
        assert task is not None, f"group {position} matches no task"
        rewards = [float(s.get_reward_value(args)) for s in group]
        expected = [expected_reward(s, label_of[task], qwen_tokenizer.decode) for s in group]
        assert rewards == pytest.approx(expected), (
            f"group {position}: rewards {rewards}, expected {expected} (correct plus "
            "finalize's well_formed)"
        )


@pytest.mark.clause("FIN-2")
def test_an_episode_whose_finalize_raised_is_never_trained_on_and_its_group_is_replaced(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    # Task 0's finalize raises; a batch of 2 is then tasks 1 and 2, in that order.
    config = judged_config(workdir, num_tasks=4, fail_finalize_every=4)
    prompts = [str(t.prompt) for t in load_task_data(config)]
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, config)

    groups = check_train_output(world.train(fn, 0), args, world.contract)

    assert [identify(group[0], prompts) for group in groups] == prompts[1:3]
