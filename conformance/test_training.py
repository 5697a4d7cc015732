"""Train output: shape, sample consistency, determinism, and Miles' calling convention."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import (
    check_train_output,
    check_train_samples,
    check_train_shape,
    output_fingerprint,
)
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import MilesWorld, identify, task_prompts, write_config
from miles_verifiers_testkit.engine import CompletionOrder, FaultPlan


@pytest.mark.clause("TRN-1", "TRN-2")
@budget(ci=4)
@given(
    num_tasks=st.integers(1, 6),
    batch=st.integers(1, 3),
    n=st.integers(1, 3),
    extra=st.integers(0, 2),
    rollouts=st.integers(1, 2),
)
def test_train_calls_return_full_valid_batches(
    world: MilesWorld,
    workdir: Path,
    verdicts: ClauseBook,
    num_tasks: int,
    batch: int,
    n: int,
    extra: int,
    rollouts: int,
) -> None:
    world.engine.reset()
    args = miles_args(
        rollout_batch_size=batch, n_samples_per_prompt=n, over_sampling_batch_size=batch + extra
    )
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": num_tasks})
    fn = world.start(args, config)

    for rollout_id in range(rollouts):
        output = world.train(fn, rollout_id)
        with verdicts.check("TRN-1", hard=True):  # the samples are judged group by group
            groups = check_train_shape(output, args, world.contract)
        with verdicts.check("TRN-2"):
            check_train_samples(groups)


@pytest.mark.clause("TRN-3")
@budget(ci=2)
@given(batch=st.integers(1, 3), n=st.integers(1, 3))
@example(batch=2, n=2)  # several groups of several samples: any order dependence shows
def test_same_seeds_give_identical_samples_whatever_the_timing(
    world: MilesWorld, workdir: Path, batch: int, n: int
) -> None:
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 5})
    runs = []
    # The engine finishes the calls of one run in arrival order and those of the other in
    # reverse, so the two runs see opposite completion orders however loaded the machine is.
    orders: tuple[CompletionOrder, ...] = ("arrival", "reversed")
    for order in orders:
        world.engine.reset(faults=FaultPlan(completion_order=order))
        args = miles_args(
            rollout_batch_size=batch,
            n_samples_per_prompt=n,
            sglang_enable_deterministic_inference=True,
        )
        fn = world.start(args, config)
        runs.append(
            [
                output_fingerprint(check_train_output(world.train(fn, r), args, world.contract))
                for r in range(2)
            ]
        )

    assert runs[0] == runs[1], (
        "two runs with the same seeds produced different samples when the engine finished "
        "their calls in opposite orders"
    )


@pytest.mark.clause("CALL-2")
def test_calls_from_a_worker_thread_return_typed_outputs(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    args = miles_args(rollout_batch_size=2)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 3}))

    train = world.train(fn, 0, weight_version=None)
    evaluation = world.evaluate(fn, 0)

    assert isinstance(train, world.contract.RolloutFnTrainOutput)
    assert isinstance(evaluation, world.contract.RolloutFnEvalOutput)


@pytest.mark.clause("CALL-3", "GRP-2")
def test_one_instance_serves_train_and_eval_in_any_order(
    world: MilesWorld, workdir: Path, verdicts: ClauseBook
) -> None:
    world.engine.reset()
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 4})
    prompts = task_prompts(config)
    args = miles_args(rollout_batch_size=2)
    fn = world.start(args, config)

    first_eval = world.evaluate(fn, 0)
    first = check_train_output(world.train(fn, 0), args, world.contract)
    second_eval = world.evaluate(fn, 1)
    second = check_train_output(world.train(fn, 1), args, world.contract)

    per_rollout = [[identify(group[0], prompts) for group in groups] for groups in (first, second)]
    expected = [prompts[:2], prompts[2:]]
    with verdicts.check("CALL-3"):
        assert [Counter(r) for r in per_rollout] == [Counter(r) for r in expected], (
            f"eval calls disturbed which tasks training used: {per_rollout}"
        )
        for output in (first_eval, second_eval):
            assert sum(len(entry["rewards"]) for entry in output.data.values()) == len(prompts)
    with verdicts.check("GRP-2"):
        assert per_rollout == expected, f"groups are not in task order: {per_rollout}"
