"""Graph branches trained as siblings of one rollout (the siblings policy).

In a file of its own: an adapter that never returns from such a call (Miles' own, whose
bridged turns hang) keeps that call running in the background, and the upstream run gives each
file a process of its own so the other branch clauses are not starved by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from miles_verifiers_conformance.branching import branching_batch
from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import (
    check_round_trip,
    check_sample,
    check_untrained_replies,
    rollouts_of,
    trained_replies,
)
from miles_verifiers_conformance.miles_side import flatten, miles_args
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import MilesWorld, require_taskset, write_config

SIBLING_CLAUSES = ("BR-4", "BR-5", "BR-6", "BR-7")


@pytest.mark.clause(*SIBLING_CLAUSES)
@budget(ci=3)
@given(
    steps=st.sampled_from([4, 6]),
    batch=st.integers(1, 3),
    n=st.integers(1, 2),
    extra=st.integers(0, 2),
    first_rollout=st.integers(0, 2),
    slot=st.integers(0, 2),
)
@example(steps=6, batch=3, n=2, extra=1, first_rollout=1, slot=1)
def test_multi_branch_traces_train_as_siblings_of_one_rollout(
    world: MilesWorld,
    workdir: Path,
    verdicts: ClauseBook,
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
    args, position, branches = run.args, run.position, run.branches
    fn = world.start(args, run.config)

    groups: Any = None
    try:
        groups = world.train(fn, first_rollout).samples
    except Exception as error:  # a rejection (or any failure) fails every sibling clause
        for clause in SIBLING_CLAUSES:
            with verdicts.check(clause):
                raise AssertionError(
                    f"the train call raised instead of returning siblings: {error!r}"
                ) from error
        verdicts.raise_failures_now()
    calls = world.engine.calls()

    with verdicts.check("BR-7"):
        check_train_shape_of_rollouts(groups, args)
    with verdicts.check("BR-4"):
        # Miles' manager flattens the whole output a level at a time: every group nests alike.
        flatten(groups)
        nested = groups[position]
        rollouts = rollouts_of(nested)
        assert all(isinstance(r, list) for r in nested), (
            f"group {position} has a multi-branch rollout, so each of its rollouts must be a "
            "list of samples (Miles' compact-rollout shape)"
        )
        for k, siblings in enumerate(rollouts):
            assert len(siblings) == branches, (
                f"rollout {k} of group {position} has {len(siblings)} samples, expected one per "
                f"branch ({branches})"
            )
            ids = {s.rollout_id for s in siblings}
            assert len(ids) == 1 and None not in ids, f"siblings carry rollout_ids {ids}"
            rewards = {repr(s.reward) for s in siblings}
            assert len(rewards) == 1, f"siblings carry rewards {rewards}"
    for g, group in enumerate(groups):
        for k, siblings in enumerate(rollouts_of(group)):
            with verdicts.check("BR-5"):
                seen = [r for s in siblings for r in trained_replies(s)]
                assert len(seen) == len(set(seen)), (
                    f"group {g} rollout {k}: a sampled turn is trained in two siblings"
                )
            for sample in siblings:
                with verdicts.check("BR-6"):
                    check_sample(sample, where=f"group {g} rollout {k}")
                    check_round_trip(sample, calls, where=f"group {g} rollout {k}")


def check_train_shape_of_rollouts(groups: Any, args: Any) -> None:
    """--rollout-batch-size groups, each of --n-samples-per-prompt distinct rollout_ids (or
    indices), unique within the call."""
    assert len(groups) == args.rollout_batch_size, f"expected {args.rollout_batch_size} groups"
    seen: set[Any] = set()
    for g, group in enumerate(groups):
        rollouts = rollouts_of(group)
        assert len(rollouts) == args.n_samples_per_prompt, (
            f"group {g} holds {len(rollouts)} rollouts, expected {args.n_samples_per_prompt}"
        )
        ids = {
            s.rollout_id if getattr(s, "rollout_id", None) is not None else s.index
            for r in rollouts
            for s in r
        }
        assert len(ids) == args.n_samples_per_prompt, (
            f"group {g}: its rollouts carry {len(ids)} distinct ids, expected one per rollout"
        )
        assert not ids & seen, f"group {g} reuses rollout ids of an earlier group"
        seen |= ids


# mv-compact04's harness asks "Summarise the conversation so far ... (summary attempt i of k)"
# at each compaction and resumes from attempt k only.
REJECTED_ATTEMPT = "(summary attempt 1 of 2)"
ATTEMPTING_TASKSET = "mv-compact04"


@pytest.mark.clause("BR-8")
def test_a_compaction_attempt_the_harness_rejected_is_never_trained(
    world: MilesWorld, workdir: Path, qwen_tokenizer: Any
) -> None:
    world.engine.reset()
    config = write_config(
        workdir,
        "mv_compact",
        taskset={"num_tasks": 4, "steps": 6},
        harness={"compact_every": 2, "summary_attempts": 2},
        top={"max_turns": 24},  # six steps and two compactions of two summaries each
    )
    require_taskset(config, ATTEMPTING_TASKSET)
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, config)

    groups = world.train(fn, 0).samples

    check_untrained_replies(
        flatten(groups),
        world.engine.calls(),
        lambda call: REJECTED_ATTEMPT in qwen_tokenizer.decode(call.input_ids),
        "rejected compaction attempts",
    )
