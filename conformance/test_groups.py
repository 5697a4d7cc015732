"""Groups and group rewards, under arbitrary completion orders (latency jitter, reversal).

mv-group pays each rollout ``correct`` (1.0 when its answer is right) plus 0.5 x
``agreement`` (the share of its peers that gave the same answer), so a group reward put on
the wrong sample, or a sample moved to another group, changes the numbers. The suite
recomputes each reward from the sample's own sampled tokens.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import check_train_output
from miles_verifiers_conformance.miles_side import (
    flatten,
    group_advantages,
    miles_args,
    normalized_rewards,
)
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import (
    MilesWorld,
    identify,
    load_task_data,
    skip_for_verifiers04,
    write_config,
)
from miles_verifiers_testkit.engine import CompletionOrder, FaultPlan, PolicyConfig
from miles_verifiers_testkit.harness.protocol import parse_answer, peer_agreement

# Why these clauses are not decided with Verifiers 0.4 workers (the report shows it).
NO_GROUP_REWARDS = (
    "0.4 has no group rewards: a task's rollouts are independent episodes, so no reward is "
    "computed across them (mv-group's agreement); there GRP-1 and GRP-2 are decided by "
    "test_cycling.py and an episode's own judgement (Env.finalize) by FIN-1 and FIN-2"
)
CORRECT_WEIGHT = 1.0
AGREEMENT_WEIGHT = 0.5


def expected_rewards(group: list[Any], label: str, decode: Any) -> list[float]:
    answers = [parse_answer(decode(s.tokens[len(s.tokens) - s.response_length :])) for s in group]
    agreement = peer_agreement(answers)
    return [
        CORRECT_WEIGHT * float(a == int(label)) + AGREEMENT_WEIGHT * g
        for a, g in zip(answers, agreement, strict=True)
    ]


@pytest.mark.clause("GRP-1", "GRP-2", "GRP-3", "GRP-4")
@budget(ci=3)
@given(
    num_tasks=st.integers(1, 4),
    batch=st.integers(1, 3),
    n=st.integers(2, 4),
    extra=st.integers(0, 2),
    accuracy=st.sampled_from([0.3, 0.6, 0.9]),
    policy_seed=st.integers(0, 1000),
    jitter_seed=st.integers(0, 10**6),
    order=st.sampled_from(["free", "reversed"]),
)
# Groups that finish in the reverse of the order they were asked for: a completion-order
# defect shows whatever the machine's timing.
@example(
    num_tasks=3, batch=2, n=2, extra=1, accuracy=0.6, policy_seed=7, jitter_seed=0, order="reversed"
).via("every burst of calls finishes last arrival first")
def test_groups_keep_their_task_rewards_and_order_whatever_the_completion_order(
    world: MilesWorld,
    workdir: Path,
    qwen_tokenizer: Any,
    verdicts: ClauseBook,
    num_tasks: int,
    batch: int,
    n: int,
    extra: int,
    accuracy: float,
    policy_seed: int,
    jitter_seed: int,
    order: CompletionOrder,
) -> None:
    world.engine.reset(
        policy=PolicyConfig(accuracy=accuracy, seed=policy_seed),
        # Random delays reorder completions; a forced order does it whatever the load.
        faults=FaultPlan(delay=0.6, delay_s=0.02, seed=jitter_seed, completion_order=order),
    )
    config = write_config(workdir, "mv_group", taskset={"num_tasks": num_tasks, "seed": 11})
    skip_for_verifiers04(config, NO_GROUP_REWARDS)
    tasks = load_task_data(config)
    prompts = [str(t.prompt) for t in tasks]
    label_of = {str(t.prompt): t.label for t in tasks}
    args = miles_args(
        rollout_batch_size=batch, n_samples_per_prompt=n, over_sampling_batch_size=batch + extra
    )
    fn = world.start(args, config)
    stream = itertools.cycle(prompts)

    for rollout_id in range(2):
        output = world.train(fn, rollout_id)
        groups = check_train_output(output, args, world.contract)  # precondition (TRN-1/2)
        for position, group in enumerate(groups):
            found = {identify(s, prompts) for s in group}
            with verdicts.check("GRP-1") as one_task:
                assert len(found) == 1 and None not in found, (
                    f"rollout {rollout_id}: group {position} mixes tasks: {found}"
                )
            expected_task = next(stream)
            if not one_task.ok:
                continue  # its order and rewards cannot be judged
            task = found.pop()
            with verdicts.check("GRP-2"):
                assert task == expected_task, (
                    f"rollout {rollout_id}: group {position} is out of task order"
                )
            rewards = [float(s.get_reward_value(args)) for s in group]
            expected = expected_rewards(group, label_of[task], qwen_tokenizer.decode)
            with verdicts.check("GRP-3"):
                assert rewards == pytest.approx(expected), (
                    f"group {position}: rewards {rewards} are not those of its own samples "
                    f"({expected})"
                )
        # Miles flattens, segments and normalises; it must equal the per-task computation.
        flat = flatten(output.samples)
        per_task = [
            a
            for group in groups
            for a in group_advantages([float(s.get_reward_value(args)) for s in group], args)
        ]
        miles = normalized_rewards(flat, args)
        with verdicts.check("GRP-4"):
            assert all(
                math.isclose(a, b, abs_tol=1e-9) for a, b in zip(miles, per_task, strict=True)
            ), f"Miles' group-relative advantages {miles} differ from the per-task ones {per_task}"
