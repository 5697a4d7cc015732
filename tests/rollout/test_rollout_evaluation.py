"""Evaluation calls: every task in order, one aligned entry per rollout, failures recorded."""

from __future__ import annotations

import pytest

from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers_testkit.engine import FaultPlan
from tests.rollout.rollout_support import Rollouts, miles_args, task_data

HOOKS = "tests.rollout.hooks_for_tests"


def test_eval_covers_every_task_in_order_with_rewards_truncation_and_samples_aligned(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 3})
    tasks = task_data(config)
    fn = rollouts.build(
        miles_args(n_samples_per_eval_prompt=2, eval_interval=1, rollout_shuffle=True), config
    )

    output = rollouts.evaluate(fn)

    assert isinstance(output, contract().RolloutFnEvalOutput)
    assert list(output.data) == ["mv-arith"]
    entry = output.data["mv-arith"]
    samples = entry["samples"]
    assert len(entry["rewards"]) == len(entry["truncated"]) == len(samples) == 6
    assert [s.metadata["verifiers"]["task_index"] for s in samples] == [
        t.idx for t in tasks for _ in range(2)
    ]
    assert [s.index for s in samples] == list(range(6))
    assert entry["rewards"] == [float(s.reward) for s in samples]
    assert entry["truncated"] == [s.status.value == "truncated" for s in samples]
    assert all(key.startswith("eval/") for key in output.metrics)
    assert output.metrics["eval/verifiers/num_traces"] == 6


def test_a_multi_branch_rollout_is_one_eval_entry_holding_its_last_branch(
    rollouts: Rollouts,
) -> None:
    # Task 0 compacts once (2 branches); task 1 never branches.
    config = rollouts.config(
        "mv_compact",
        taskset={"num_tasks": 2, "steps": 2, "steps_by_task": {"0": 4}},
        harness={"compact_every": 2},
    )
    fn = rollouts.build(miles_args(n_samples_per_eval_prompt=2, eval_interval=1), config)

    samples = rollouts.evaluate(fn).data["mv-compact"]["samples"]

    assert [s.index for s in samples] == [0, 1, 2, 3]
    branched = [s.metadata["verifiers"] for s in samples[:2]]
    assert all(info["branch"] == {"graph_branches": 2} for info in branched)
    assert all(info["branch_index"] == 1 for info in branched)
    assert all("branch" not in s.metadata["verifiers"] for s in samples[2:])


def test_a_failed_eval_group_keeps_its_episode_error_on_each_sample(rollouts: Rollouts) -> None:
    # That failing eval episodes become failed entries is the conformance suite's (EVL-2).
    config = rollouts.config(
        "mv_faulty",
        taskset={"num_tasks": 1, "fault_rate": 1.0, "faults": ["group_reward_error"]},
    )
    fn = rollouts.build(
        miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=2, eval_interval=1), config
    )

    samples = rollouts.evaluate(fn).data["mv-faulty"]["samples"]

    assert [s.status.value for s in samples] == ["failed", "failed"]
    assert all("group_reward_error" in s.metadata["verifiers"]["episode_error"] for s in samples)


def test_a_rollout_without_a_model_turn_is_an_empty_truncated_entry(rollouts: Rollouts) -> None:
    config = rollouts.config("mv_longprompt", taskset={"num_tasks": 2, "filler_words": 200})
    fn = rollouts.build(miles_args(eval_interval=1, eval_max_prompt_len=32), config)

    entry = rollouts.evaluate(fn).data["mv-longprompt"]

    assert entry["truncated"] == [True, True]
    for sample in entry["samples"]:
        sample.validate()
        assert sample.tokens == [] and sample.response_length == 0
        assert sample.status.value == "truncated"
        assert sample.metadata["verifiers"]["empty_trace"] is True
    assert rollouts.engine.stats().generate_calls == 0


def test_eval_uses_the_eval_sampling_flags(rollouts: Rollouts) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 1})
    fn = rollouts.build(
        miles_args(
            eval_interval=1,
            eval_temperature=0.25,
            eval_max_response_len=48,
            rollout_temperature=0.9,
        ),
        config,
    )

    rollouts.evaluate(fn)

    params = [body["sampling_params"] for body in rollouts.engine.bodies]
    assert params and all(p["temperature"] == 0.25 and p["max_new_tokens"] <= 48 for p in params)


def test_eval_reads_the_eval_reward_key_from_a_dict_reward_model(rollouts: Rollouts) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(
        miles_args(eval_interval=1, custom_rm_path=f"{HOOKS}.dict_reward", eval_reward_key="score"),
        config,
    )

    entry = rollouts.evaluate(fn).data["mv-arith"]

    assert entry["rewards"] == [0.75, 0.75]
    assert all(s.reward == {"score": 0.75, "details": "ok"} for s in entry["samples"])


def test_a_wrong_eval_reward_key_is_reported_under_the_eval_flag(rollouts: Rollouts) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 1})
    fn = rollouts.build(miles_args(eval_interval=1, eval_reward_key="no_such_reward"), config)

    with pytest.raises(ValueError, match="--eval-reward-key 'no_such_reward'"):
        rollouts.evaluate(fn)


def test_an_eval_rollout_whose_generation_was_aborted_is_an_aborted_entry(
    rollouts: Rollouts,
) -> None:
    rollouts.engine.set_faults(FaultPlan.always("abort"))
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(miles_args(eval_interval=1), config)

    entry = rollouts.evaluate(fn).data["mv-arith"]

    assert [s.status.value for s in entry["samples"]] == ["aborted", "aborted"]


def test_a_failed_eval_rollout_reports_none_as_its_reward(rollouts: Rollouts) -> None:
    config = rollouts.config(
        "mv_faulty",
        taskset={"num_tasks": 4, "fault_rate": 0.5, "faults": ["harness_error", "reward_error"]},
    )
    tasks = task_data(config)
    fn = rollouts.build(
        miles_args(n_samples_per_prompt=2, n_samples_per_eval_prompt=2, eval_interval=1), config
    )

    entry = rollouts.evaluate(fn).data["mv-faulty"]

    faulty = [t.fault is not None for t in tasks for _ in range(2)]
    assert any(faulty) and not all(faulty)
    assert [r is None for r in entry["rewards"]] == faulty
    assert all(isinstance(r, float) for r in entry["rewards"] if r is not None)
