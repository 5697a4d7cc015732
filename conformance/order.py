"""The documented task order, and what a run actually trained on.

The order: the taskset is cycled epoch after epoch (each epoch in load order, or its own
permutation with --rollout-shuffle); a rollout returns the first --rollout-batch-size kept
groups in that order; a dropped group is replaced by the next task; tasks started but not
needed come first in the next rollout. So the tasks trained on are the task stream with the
dropped tasks removed, whatever the over-sampling and the timing.
"""

from __future__ import annotations

import itertools
from collections import Counter
from contextlib import nullcontext
from typing import Any

from miles_verifiers_conformance.checks import check_train_output
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import MilesWorld, identify


def trained_prompts(
    world: MilesWorld,
    fn: Any,
    args: Any,
    prompts: list[str],
    rollout_ids: range,
    verdicts: ClauseBook | None = None,
) -> list[list[str]]:
    """The task of every returned group, rollout by rollout (GRP-1 checked on the way: in
    its own block when the test marks GRP-1, else as a precondition)."""
    per_rollout = []
    for rollout_id in rollout_ids:
        groups = check_train_output(world.train(fn, rollout_id), args, world.contract)
        tasks = []
        for position, group in enumerate(groups):
            found = {identify(sample, prompts) for sample in group}
            decides = verdicts is not None and "GRP-1" in verdicts.marked
            with verdicts.check("GRP-1", hard=True) if decides else nullcontext():  # type: ignore[union-attr]
                assert len(found) == 1 and None not in found, (
                    f"rollout {rollout_id} group {position} mixes tasks or has an unknown "
                    f"prompt: {found}"
                )
            tasks.append(found.pop())
        per_rollout.append(tasks)
    return per_rollout


def check_epoch_order(
    trained: list[str], prompts: list[str], dropped: set[str], shuffled: bool
) -> None:
    kept = [p for p in prompts if p not in dropped]
    if not shuffled:
        expected = list(
            itertools.islice(
                (p for p in itertools.cycle(prompts) if p not in dropped), len(trained)
            )
        )
        assert trained == expected, (
            "the tasks trained on do not follow the taskset order with only the dropped tasks removed:\n"
            f"  got      {trained}\n  expected {expected}"
        )
        return
    for epoch, start in enumerate(range(0, len(trained), len(kept))):
        chunk = Counter(trained[start : start + len(kept)])
        if start + len(kept) <= len(trained):
            assert chunk == Counter(kept), (
                f"epoch {epoch} does not use every kept task exactly once: {chunk}"
            )
        else:
            assert not chunk - Counter(kept), f"epoch {epoch} repeats a task: {chunk}"


# -- one clause per aspect of the task stream ------------------------------------------------
# ``check_epoch_order`` judges the whole stream at once; the checks below split it so that
# each aspect decides its own clause: which tasks a rollout got (per-epoch coverage, and the
# replacement of dropped ones) is apart from the order of the groups within the rollout.


def check_no_dropped_task_returned(per_rollout: list[list[str]], dropped: set[str]) -> None:
    returned = [
        (rollout_id, task)
        for rollout_id, tasks in enumerate(per_rollout)
        for task in tasks
        if task in dropped
    ]
    assert not returned, f"dropped tasks were returned instead of replaced: {returned}"


def expected_chunks(
    per_rollout: list[list[str]], prompts: list[str], dropped: set[str]
) -> list[list[str]]:
    """The kept-task stream (load order) cut into rollouts of the sizes each one returned."""
    kept_stream = (p for p in itertools.cycle(prompts) if p not in dropped)
    return [list(itertools.islice(kept_stream, len(tasks))) for tasks in per_rollout]


def check_rollout_task_sets(
    per_rollout: list[list[str]], prompts: list[str], dropped: set[str], shuffled: bool
) -> None:
    """Each rollout holds the next tasks of the epoch stream, whatever their order in it."""
    kept = [p for p in prompts if p not in dropped]
    if not kept:
        return
    if not shuffled:
        for rollout_id, (got, want) in enumerate(
            zip(per_rollout, expected_chunks(per_rollout, prompts, dropped), strict=True)
        ):
            assert Counter(got) == Counter(want), (
                f"rollout {rollout_id} trained on {sorted(got)}; the taskset order with only "
                f"the dropped tasks removed gives {sorted(want)}"
            )
        return
    # Shuffled: every epoch is a permutation of the kept tasks, so a rollout first uses up
    # what is left of the current epoch, then starts the next one.
    left = Counter(kept)
    for rollout_id, tasks in enumerate(per_rollout):
        chunk = Counter(t for t in tasks if t not in dropped)
        while chunk:
            if chunk.total() >= left.total():
                assert not left - chunk, (
                    f"rollout {rollout_id} starts a new epoch before using {sorted(left - chunk)}"
                )
                chunk -= left
                left = Counter(kept)
            else:
                assert not chunk - left, (
                    f"rollout {rollout_id} repeats {sorted(chunk - left)} within an epoch"
                )
                left -= chunk
                chunk = Counter()


def check_rollout_order(
    per_rollout: list[list[str]], prompts: list[str], dropped: set[str]
) -> None:
    """Within each rollout (load order), groups come in task order; only meaningful once
    each rollout holds the expected tasks."""
    for rollout_id, (got, want) in enumerate(
        zip(per_rollout, expected_chunks(per_rollout, prompts, dropped), strict=True)
    ):
        if Counter(got) == Counter(want):
            assert got == want, (
                f"rollout {rollout_id} returned its groups as {got}; task order is {want}"
            )
