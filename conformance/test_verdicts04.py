"""Verifiers 0.4's own verdicts reach Miles as Verifiers means them (VER).

0.4 stamps every trace and episode ``ok`` itself: a retry that recovers keeps the failed
attempts' errors and is ok; an episode is not ok when any seat's trace failed, an untrainable
one (a user simulator) included; an agent timeout is a stop, not a failure (the trace is ok
and scored); and the n slots of a task are independent episodes. The faults come from the 0.4
fixture ports: mv-faulty04's ``flaky_trace`` / ``flaky_episode`` (recovered under the config's
``[agent.retries]`` / ``[retries]`` rules), ``timeout`` and ``slot_error`` (slot 0 of its task
only), and mv-dialogue04's quiz master that crashes mid-dialogue (``master_fails_every``).
These clauses run where the fixture configs are Verifiers 0.4's (``tox -e verifiers04``); with
0.2's they are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.checks import check_train_output, status_name
from miles_verifiers_conformance.miles_side import CallDeadlineExceeded, miles_args
from miles_verifiers_conformance.world import (
    MilesWorld,
    identify,
    load_task_data,
    require_taskset,
    write_config,
)

FAULTY_TASKSET = "mv-faulty04"
DIALOGUE_TASKSET = "mv-dialogue04"


def faulty_config(workdir: Path, faults: list[str], **taskset: Any) -> Path:
    config = write_config(workdir, "mv_faulty", taskset={"faults": faults, **taskset})
    require_taskset(config, FAULTY_TASKSET)
    return config


def dialogue_config(workdir: Path, **taskset: Any) -> Path:
    config = write_config(workdir, "mv_dialogue", taskset=taskset)
    require_taskset(config, DIALOGUE_TASKSET)
    return config


def train_or_fail(world: MilesWorld, fn: Any, why: str) -> Any:
    """A train call's output; a call that gave up (the replacement budget spent on groups
    that should have been kept) fails the test naming ``why``."""
    try:
        return world.train(fn, 0)
    except CallDeadlineExceeded:
        raise
    except Exception as error:
        pytest.fail(f"the train call gave up ({type(error).__name__}: {error}); {why}")


def eval_entry(world: MilesWorld, fn: Any, expected: int) -> dict[str, Any]:
    """The one environment's eval entry (EVL-1 checks its key), of ``expected`` rollouts."""
    output = world.evaluate(fn, 0)
    assert len(output.data) == 1, f"one environment, one entry: {list(output.data)}"
    [entry] = output.data.values()
    assert len(entry["samples"]) == len(entry["rewards"]) == expected, (
        f"expected {expected} eval entries, got {len(entry['samples'])} samples and "
        f"{len(entry['rewards'])} rewards"
    )
    return entry  # type: ignore[no-any-return]


def verifiers_metadata(sample: Any) -> Any:
    """What the adapter says of a rollout in its metadata, for failure messages only."""
    metadata = getattr(sample, "metadata", None) or {}
    return metadata.get("verifiers", metadata) if isinstance(metadata, dict) else metadata


def is_normal_entry(sample: Any, reward: Any) -> bool:
    """A rollout that ran and was scored: not failed, a response, and its reward."""
    return (
        status_name(sample) in ("completed", "truncated")
        and sample.response_length > 0
        and reward is not None
    )


# -- VER-1: recovered retries train ----------------------------------------------------------


@pytest.mark.clause("VER-1")
def test_a_recovered_trace_and_a_recovered_episode_are_trained_not_replaced(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    # Task 0's trace and task 1's episode each fail their first attempt in every slot and
    # succeed when Verifiers retries them; both tasks must come back, in order.
    config = faulty_config(workdir, ["flaky_trace", "flaky_episode"], num_tasks=2, fault_rate=1.0)
    tasks = load_task_data(config)
    assert [t.fault for t in tasks] == ["flaky_trace", "flaky_episode"]
    prompts = [str(t.prompt) for t in tasks]
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, config)

    output = train_or_fail(
        world, fn, "a trace or episode Verifiers 0.4 recovered by retrying must be trained"
    )

    groups = check_train_output(output, args, world.contract)
    assert [identify(group[0], prompts) for group in groups] == prompts, (
        "the groups of recovered traces and episodes were dropped and replaced"
    )


@pytest.mark.clause("VER-1")
def test_recovered_rollouts_are_normal_eval_entries(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    config = faulty_config(workdir, ["flaky_trace", "flaky_episode"], num_tasks=2, fault_rate=1.0)
    args = miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=2, eval_interval=1)
    fn = world.start(args, config)

    entry = eval_entry(world, fn, 4)

    statuses = [status_name(s) for s in entry["samples"]]
    assert all(
        is_normal_entry(s, r) for s, r in zip(entry["samples"], entry["rewards"], strict=True)
    ), f"recovered rollouts must be normal entries: statuses {statuses}, rewards {entry['rewards']}"


# -- VER-2: a failed untrainable seat is never trained ------------------------------------------


@pytest.mark.clause("VER-2")
def test_an_episode_whose_user_simulator_failed_is_never_trained_on(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    # The quiz master (untrainable) crashes in round 2 of tasks 0 and 2; the assistant's trace,
    # cut short there, is ok. A batch of 2 is then tasks 1 and 3, in that order.
    config = dialogue_config(workdir, num_tasks=4, master_fails_every=2, master_fails_at_round=2)
    prompts = [str(t.prompt) for t in load_task_data(config)]
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, config)

    groups = check_train_output(world.train(fn, 0), args, world.contract)

    found = [identify(group[0], prompts) for group in groups]
    assert found == [prompts[1], prompts[3]], (
        f"expected the groups of tasks 1 and 3 (the quiz master failed tasks 0 and 2), got tasks "
        f"{[prompts.index(p) if p in prompts else None for p in found]}"
    )


@pytest.mark.clause("VER-2")
def test_an_episode_whose_user_simulator_failed_is_a_failed_eval_entry(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    config = dialogue_config(workdir, num_tasks=2, master_fails_every=2, master_fails_at_round=2)
    args = miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=2, eval_interval=1)
    fn = world.start(args, config)

    entry = eval_entry(world, fn, 4)

    statuses = [status_name(s) for s in entry["samples"]]
    rewards = entry["rewards"]
    assert statuses[:2] == ["failed", "failed"] and rewards[:2] == [None, None], (
        f"task 0's quiz master failed: its entries must be failed with reward None, got "
        f"statuses {statuses[:2]}, rewards {rewards[:2]}"
    )
    assert all(
        is_normal_entry(s, r) for s, r in zip(entry["samples"][2:], rewards[2:], strict=True)
    ), f"task 1 ran cleanly: statuses {statuses[2:]}, rewards {rewards[2:]}"


# -- VER-3: a timeout is not COMPLETED ----------------------------------------------------------

# The agent timeout: long enough for the conversation itself, a worker's first model call
# (which loads its renderer) on a busy 2-core machine included, or the timeout would cut the
# trace before its first turn (an empty trace, a different case); the harness then sleeps
# past it.
TIMEOUT = {"timeout_s": 10.0, "slow_step_s": 12.0}


@pytest.mark.clause("VER-3")
def test_a_timed_out_rollout_trains_as_truncated_not_completed(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    config = faulty_config(workdir, ["timeout"], num_tasks=1, fault_rate=1.0, **TIMEOUT)
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=2)
    fn = world.start(args, config)

    groups = check_train_output(world.train(fn, 0), args, world.contract)

    statuses = [status_name(s) for group in groups for s in group]
    assert statuses and all(s == "truncated" for s in statuses), (
        f"every rollout's agent timed out (0.4 stops it: a stop, not a completion), so every "
        f"sample must be truncated: {statuses}"
    )


@pytest.mark.clause("VER-3")
def test_a_timed_out_rollout_is_a_truncated_scored_eval_entry(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    config = faulty_config(workdir, ["timeout"], num_tasks=1, fault_rate=1.0, **TIMEOUT)
    args = miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=2, eval_interval=1)
    fn = world.start(args, config)

    entry = eval_entry(world, fn, 2)

    statuses = [status_name(s) for s in entry["samples"]]
    assert statuses == ["truncated", "truncated"], (
        f"every rollout's agent timed out: a stop, not a completion nor a failure, got "
        f"{statuses} ({[verifiers_metadata(s) for s in entry['samples']]})"
    )
    assert entry["truncated"] == [True, True], entry["truncated"]
    assert None not in entry["rewards"], f"a timed-out trace is scored: {entry['rewards']}"


# -- VER-4: eval entries are independent --------------------------------------------------------


@pytest.mark.clause("VER-4")
def test_a_failed_rollout_fails_its_own_eval_entry_only(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    # In slot 0 only, task 0's trace fails (slot_error) and task 1's episode fails as a whole
    # (slot_episode_error: its finalize raises); their slots 1 and 2 run cleanly.
    faults = ["slot_error", "slot_episode_error"]
    config = faulty_config(workdir, faults, num_tasks=2, fault_rate=1.0)
    n = 3
    args = miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=n, eval_interval=1)
    fn = world.start(args, config)

    entry = eval_entry(world, fn, 2 * n)

    for position, fault in enumerate(faults):
        samples = entry["samples"][position * n : (position + 1) * n]
        rewards = entry["rewards"][position * n : (position + 1) * n]
        statuses = [status_name(s) for s in samples]
        failed = [k for k, r in enumerate(rewards) if r is None]
        normal = [
            k
            for k, (s, r) in enumerate(zip(samples, rewards, strict=True))
            if is_normal_entry(s, r)
        ]
        assert len(failed) == 1 and statuses[failed[0]] == "failed", (
            f"task {position} ({fault}) had exactly one rollout fail (slot 0): exactly one entry "
            f"must be failed with reward None, got statuses {statuses}, rewards {rewards}"
        )
        assert normal == [k for k in range(n) if k != failed[0]], (
            f"task {position} ({fault}): its other rollouts ran cleanly and must be normal "
            f"entries with their rewards, got statuses {statuses}, rewards {rewards}"
        )
