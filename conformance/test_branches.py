"""Graph branches: one converts, zero drops the group, two or more are rejected under the
reject policy (trained as siblings under the siblings policy: ``test_siblings.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from miles_verifiers_conformance.branching import branching_batch
from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import (
    check_round_trip,
    check_sample,
    check_train_shape,
    check_untrained_replies,
    sampled_runs,
)
from miles_verifiers_conformance.miles_side import CallDeadlineExceeded, miles_args
from miles_verifiers_conformance.order import (
    check_no_dropped_task_returned,
    check_rollout_order,
    check_rollout_task_sets,
    trained_prompts,
)
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import (
    MilesWorld,
    identify,
    load_task_data,
    require_taskset,
    write_config,
)


def branch_count_of(error: BaseException) -> int | None:
    """The ``branch_count`` an adapter's rejection carries, on the error or its causes."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:  # bounded: each error once
        seen.add(id(current))
        count = getattr(current, "branch_count", None)
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        current = current.__cause__ or current.__context__
    return None


# The adapter's setting for the reject branch policy (an adapter that always rejects ignores it).
REJECT_POLICY = {"MILES_VERIFIERS_BRANCH_POLICY": "reject"}


@pytest.mark.clause("BR-1")
@budget(ci=3)
@given(
    steps=st.sampled_from([4, 6, 14]),
    batch=st.integers(1, 3),
    n=st.integers(1, 2),
    extra=st.integers(0, 2),
    first_rollout=st.integers(0, 3),
    slot=st.integers(0, 2),
)
# The cases a derandomized CI run must not miss: many branches, last and first in the batch.
@example(steps=14, batch=3, n=1, extra=1, first_rollout=1, slot=2)
@example(steps=4, batch=3, n=2, extra=0, first_rollout=0, slot=0)
def test_multi_branch_traces_are_rejected_wherever_they_fall_when_asked(
    world: MilesWorld,
    workdir: Path,
    steps: int,
    batch: int,
    n: int,
    extra: int,
    first_rollout: int,
    slot: int,
) -> None:
    world.engine.reset()
    run = branching_batch(
        workdir, steps=steps, batch=batch, n=n, extra=extra, first_rollout=first_rollout, slot=slot
    )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in REJECT_POLICY.items():
            patch.setenv(name, value)
        fn = world.start(run.args, run.config)

    with pytest.raises(Exception) as caught:
        world.train(fn, first_rollout)

    assert not isinstance(caught.value, CallDeadlineExceeded), str(caught.value)
    assert branch_count_of(caught.value) == run.branches, (
        f"the rejection should carry branch_count={run.branches}: {caught.value!r}"
    )


def prompt_lengths(
    world: MilesWorld, config: Path, prompts: list[str], decode: Any
) -> dict[str, int]:
    """Each task's first prompt length as the adapter sends it, observed on the engine."""
    world.engine.reset()
    args = miles_args(rollout_batch_size=len(prompts))
    world.train(world.start(args, config), 0)
    lengths: dict[str, int] = {}
    for call in world.engine.calls():
        text = decode(call.input_ids)
        for prompt in prompts:
            if prompt.rsplit("\n", 1)[-1] in text:
                lengths[prompt] = min(lengths.get(prompt, 10**9), len(call.input_ids))
    return lengths


@pytest.mark.clause("BR-2", "GRP-2")
@budget(ci=2)
@given(
    seed=st.integers(0, 200), batch=st.integers(1, 2), rollouts=st.integers(1, 2), data=st.data()
)
def test_zero_branch_traces_drop_their_group(
    world: MilesWorld,
    workdir: Path,
    qwen_tokenizer: Any,
    verdicts: ClauseBook,
    seed: int,
    batch: int,
    rollouts: int,
    data: st.DataObject,
) -> None:
    # An overlong first prompt ends the rollout before any model call: a trace with no branch.
    config = write_config(
        workdir, "mv_longprompt", taskset={"num_tasks": 5, "seed": seed, "filler_words": 40}
    )
    prompts = [str(d.prompt) for d in load_task_data(config)]
    lengths = prompt_lengths(world, config, prompts, qwen_tokenizer.decode)
    distinct = sorted(set(lengths.values()))
    assume(len(lengths) == len(prompts) and len(distinct) >= 2)
    cap = data.draw(st.sampled_from(distinct[:-1]), label="prompt_cap")
    dropped = {p for p, length in lengths.items() if length > cap}
    world.engine.reset()
    args = miles_args(rollout_batch_size=batch, rollout_max_prompt_len=cap)
    fn = world.start(args, config)

    per_rollout = trained_prompts(world, fn, args, prompts, range(rollouts))

    with verdicts.check("BR-2"):
        check_no_dropped_task_returned(per_rollout, dropped)
        check_rollout_task_sets(per_rollout, prompts, dropped, shuffled=False)
    with verdicts.check("GRP-2"):
        check_rollout_order(per_rollout, prompts, dropped)


@pytest.mark.clause("BR-3", "TRP-3")
@budget(ci=3)
@given(
    taskset=st.sampled_from(["mv_arith", "mv_tools"]),
    batch=st.integers(1, 2),
    n=st.integers(1, 2),
    thinking=st.booleans(),
)
def test_one_branch_traces_convert_aligned_with_the_engine_output(
    world: MilesWorld,
    workdir: Path,
    verdicts: ClauseBook,
    taskset: str,
    batch: int,
    n: int,
    thinking: bool,
) -> None:
    from miles_verifiers_testkit.engine import PolicyConfig

    world.engine.reset(policy=PolicyConfig(thinking=thinking))
    config = write_config(workdir, taskset, taskset={"num_tasks": 3})
    prompts = [str(d.prompt) for d in load_task_data(config)]
    args = miles_args(
        rollout_batch_size=batch, n_samples_per_prompt=n, rollout_max_response_len=256
    )
    fn = world.start(args, config)

    groups = check_train_shape(world.train(fn, 0), args, world.contract)  # precondition

    calls = world.engine.calls()
    for position, group in enumerate(groups):
        for sample in group:
            with verdicts.check("BR-3"):
                assert identify(sample, prompts) is not None, (
                    f"group {position}: the sample lost its task prompt"
                )
                check_sample(sample, where=f"group {position}")
            with verdicts.check("TRP-3"):
                check_round_trip(sample, calls, where=f"group {position}")


@pytest.mark.clause("BR-3", "TRP-3")
def test_a_user_simulator_dialogue_converts_aligned(
    world: MilesWorld, workdir: Path, verdicts: ClauseBook
) -> None:
    # mv-dialogue runs a user simulator subprocess per rollout: one small batch only.
    world.engine.reset()
    config = write_config(workdir, "mv_dialogue", taskset={"num_tasks": 1, "rounds": 2})
    args = miles_args(rollout_batch_size=1, rollout_max_response_len=128)
    fn = world.start(args, config)

    groups = check_train_shape(world.train(fn, 0), args, world.contract)  # precondition

    sample = groups[0][0]
    with verdicts.check("BR-3"):
        check_sample(sample)
        assert len(sampled_runs(sample)) >= 2, (
            "both assistant turns should be sampled, with the user turn masked out"
        )
    with verdicts.check("TRP-3"):
        check_round_trip(sample, world.engine.calls())


# mv-dialogue04's quiz master (an untrainable agent played by the model) is told this first.
QUIZ_MASTER_PROMPT = "You are a quiz master."
MODEL_PLAYED_USER = "mv-dialogue04"


@pytest.mark.clause("BR-9")
def test_an_untrainable_agents_turns_are_never_trained(
    world: MilesWorld, workdir: Path, qwen_tokenizer: Any
) -> None:
    world.engine.reset()
    config = write_config(workdir, "mv_dialogue", taskset={"num_tasks": 2, "rounds": 2})
    require_taskset(config, MODEL_PLAYED_USER)
    args = miles_args(rollout_batch_size=2, rollout_max_response_len=128)
    fn = world.start(args, config)

    groups = check_train_shape(world.train(fn, 0), args, world.contract)

    check_untrained_replies(
        [s for group in groups for s in group],
        world.engine.calls(),
        lambda call: QUIZ_MASTER_PROMPT in qwen_tokenizer.decode(call.input_ids),
        "turns of the untrainable quiz master",
    )
