"""Miles' reward models, filters and sample hooks, each loaded by Miles' loader from its flag,
acting on what the adapter returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.rollout.rollout_support import RecordingEngine, task_prompts, write_config
from tests_miles.support import build, evaluate, run_args, train, train_data

CLASS_PATH = "miles_verifiers.VerifiersRolloutFn"
HOOKS = "tests.rollout.hooks_for_tests"
MILES_FILTERS = "miles.rollout.filter_hub.dynamic_sampling_filters"


@pytest.fixture
def arith(tmp_path: Path, use_config: Any) -> Path:
    config = write_config(tmp_path, "mv_arith", taskset={"num_tasks": 4})
    use_config(config)
    return config


def _flat(output: Any) -> list[Any]:
    return [sample for group in output.samples for sample in group]


@pytest.mark.parametrize("rm_type", ["math", "deepscaler", "f1"])
def test_a_rule_based_rm_type_scores_every_sample_as_miles_rm_hub_does(
    rm_type: str, engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.rm_hub import async_rm
    from miles.utils.async_utils import run

    args = run_args(rm_type=rm_type)
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    samples = _flat(output)
    assert all(s.label is not None for s in samples)
    assert [s.reward for s in samples] == [run(async_rm(args, s)) for s in samples]
    assert all("correct" in s.metadata["verifiers"]["rewards"] for s in samples)


def test_a_rule_based_rm_type_also_scores_eval_samples(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.rm_hub import async_rm
    from miles.utils.async_utils import run

    args = run_args(rm_type="math", eval_interval=1)
    output = evaluate(build(CLASS_PATH, args, engine_port), rollout_id=0)

    (entry,) = output.data.values()
    assert entry["rewards"] == [run(async_rm(args, s)) for s in entry["samples"]]


def test_a_custom_rm_path_is_loaded_and_called_by_miles_rm_hub(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args(custom_rm_path=f"{HOOKS}.length_reward")
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    assert all(s.reward == float(s.response_length) for s in _flat(output))


def test_a_group_rm_scores_each_group_through_miles_batched_rm(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args(
        n_samples_per_prompt=3, group_rm=True, custom_rm_path=f"{HOOKS}.group_size_reward"
    )
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    assert [s.reward for s in _flat(output)] == [3.0] * 6


def test_miles_own_dynamic_filter_keeps_groups_with_no_aborted_sample(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args(dynamic_sampling_filter_path=f"{MILES_FILTERS}.check_no_aborted")
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    assert [g[0].group_index for g in output.samples] == [0, 1]


def test_miles_own_nonzero_std_filter_drops_a_group_whose_rewards_are_all_equal(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    # Every group gets the same reward, so Miles' filter (real torch std) drops every group and
    # the adapter stops at its replacement budget, naming Miles' drop reason.
    args = run_args(
        group_rm=True,
        custom_rm_path=f"{HOOKS}.group_size_reward",
        dynamic_sampling_filter_path=f"{MILES_FILTERS}.check_reward_nonzero_std",
    )
    from miles_verifiers.trainer.training import ReplacementBudgetError

    with pytest.raises(ReplacementBudgetError, match="zero_std_2.0"):
        train(build(CLASS_PATH, args, engine_port), rollout_id=0)


def test_a_user_dynamic_filter_loaded_by_miles_replaces_the_dropped_group(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args(dynamic_sampling_filter_path=f"{HOOKS}.drop_listed_prompts")
    args.test_drop_prompts = [task_prompts(arith)[0]]
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    assert [g[0].group_index for g in output.samples] == [1, 2]
    assert output.metrics["rollout/dynamic_filter/drop_listed_prompt"] == 1


def test_a_sample_filter_removal_reaches_miles_train_data_as_a_zero_loss_mask(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args(rollout_sample_filter_path=f"{HOOKS}.remember_returned_groups")
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)
    flat, data = train_data(args, output)

    assert args.test_sample_filter_calls == [[[s.index for s in g] for g in output.samples]]
    assert flat[0].remove_sample is True
    assert set(data["loss_masks"][0]) == {0}
    assert all(set(mask) == {1} for mask in data["loss_masks"][1:])


def test_the_all_samples_hook_gets_every_group_and_miles_data_source(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.data_source import RolloutDataSourceWithBuffer

    args = run_args(rollout_all_samples_process_path=f"{HOOKS}.remember_all_groups")
    data_source = RolloutDataSourceWithBuffer(args)
    output = train(build(CLASS_PATH, args, engine_port, data_source=data_source), rollout_id=0)

    ((groups, given),) = args.test_all_groups_calls
    assert groups == [[s.index for s in g] for g in output.samples]
    assert given is data_source


def test_every_hook_flag_is_resolved_by_miles_own_load_function(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from unittest import mock

    import miles.utils.misc

    paths = {
        "dynamic_sampling_filter_path": f"{MILES_FILTERS}.check_no_aborted",
        "rollout_sample_filter_path": f"{HOOKS}.remember_returned_groups",
        "rollout_all_samples_process_path": f"{HOOKS}.remember_all_groups",
    }
    real = miles.utils.misc.load_function
    with mock.patch.object(miles.utils.misc, "load_function", wraps=real) as spy:
        build(CLASS_PATH, run_args(**paths), engine_port)

    assert set(paths.values()) <= {call.args[0] for call in spy.call_args_list}
