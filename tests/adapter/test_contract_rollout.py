"""The port of Miles' rollout-function inputs/outputs and of its dynamic-filter hooks."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from miles_verifiers_testkit.miles.contract import (
    DynamicFilterOutput,
    MetricGatherer,
    RolloutFnBaseInput,
    RolloutFnConstructorInput,
    RolloutFnEvalInput,
    RolloutFnEvalOutput,
    RolloutFnTrainInput,
    RolloutFnTrainOutput,
    Sample,
    call_dynamic_filter,
    call_rollout_fn,
    check_no_aborted,
    check_reward_nonzero_std,
)

NO_KEY = argparse.Namespace(reward_key=None)


def fields(cls) -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_constructor_input_carries_args_and_data_source_only():
    assert list(fields(RolloutFnConstructorInput)) == ["args", "data_source"]


@pytest.mark.parametrize(
    "cls", [RolloutFnConstructorInput, RolloutFnBaseInput, RolloutFnTrainInput, RolloutFnEvalInput]
)
def test_inputs_are_frozen(cls):
    assert cls.__dataclass_params__.frozen


def test_base_input_has_no_evaluation_mode():
    with pytest.raises(NotImplementedError):
        _ = RolloutFnBaseInput(rollout_id=0).evaluation


def test_train_input_defaults_weight_version_to_none_and_is_not_evaluation():
    assert fields(RolloutFnTrainInput) == {
        "rollout_id": dataclasses.MISSING,
        "weight_version": None,
    }
    assert RolloutFnTrainInput(rollout_id=3).evaluation is False


def test_eval_input_snapshot_fields_default_to_none_and_is_evaluation():
    assert fields(RolloutFnEvalInput) == {
        "rollout_id": dataclasses.MISSING,
        "generate_state": None,
        "weight_version": None,
        "hf_dir": None,
    }
    assert RolloutFnEvalInput(rollout_id=3).evaluation is True


def test_outputs_default_metrics_to_none():
    assert RolloutFnTrainOutput(samples=[]).metrics is None
    assert RolloutFnEvalOutput(data={}).metrics is None


def test_call_rollout_fn_wraps_untyped_train_result_as_samples():
    groups = [[Sample()]]
    out = call_rollout_fn(lambda args, rid, ds, evaluation: groups, None, 0, None, evaluation=False)
    assert out == RolloutFnTrainOutput(samples=groups)


def test_call_rollout_fn_wraps_untyped_eval_result_as_data():
    data = {"env": {"rewards": [1.0], "truncated": [False], "samples": []}}
    out = call_rollout_fn(lambda evaluation: data, evaluation=True)
    assert out == RolloutFnEvalOutput(data=data)


def test_call_rollout_fn_passes_typed_output_through():
    typed = RolloutFnTrainOutput(samples=[], metrics={"m": 1})
    assert call_rollout_fn(lambda evaluation: typed, evaluation=False) is typed


# -- dynamic filters -------------------------------------------------------------------------


def test_no_filter_keeps_the_group():
    assert call_dynamic_filter(None, NO_KEY, []) == DynamicFilterOutput(keep=True)


@pytest.mark.parametrize(("returned", "keep"), [(True, True), (False, False), (0, 0), (1, 1)])
def test_bare_filter_result_is_read_as_keep(returned, keep):
    out = call_dynamic_filter(lambda args, group: returned, NO_KEY, [])
    assert out.keep == keep and out.reason is None


def test_filter_output_passes_through_with_its_reason():
    out = call_dynamic_filter(lambda args, group: DynamicFilterOutput(False, "why"), NO_KEY, [])
    assert out == DynamicFilterOutput(keep=False, reason="why")


def test_metric_gatherer_counts_drops_per_reason_and_ignores_missing_reasons():
    gatherer = MetricGatherer()
    for reason in ["zero_std_1.0", None, "zero_std_1.0", "", "trace_error"]:
        gatherer.on_dynamic_filter_drop(reason)
    assert gatherer.collect() == {
        "rollout/dynamic_filter/drop_zero_std_1.0": 2,
        "rollout/dynamic_filter/drop_trace_error": 1,
    }


def test_nonzero_std_filter_keeps_a_group_with_different_rewards():
    group = [Sample(reward=0.0), Sample(reward=1.0)]
    assert check_reward_nonzero_std(NO_KEY, group) == DynamicFilterOutput(keep=True)


def test_nonzero_std_filter_drops_equal_rewards_with_rounded_reason():
    group = [Sample(reward=0.66), Sample(reward=0.66)]
    assert check_reward_nonzero_std(NO_KEY, group) == DynamicFilterOutput(
        keep=False, reason="zero_std_0.7"
    )


def test_nonzero_std_filter_drops_a_single_sample_group():
    assert not check_reward_nonzero_std(NO_KEY, [Sample(reward=1.0)]).keep


def test_nonzero_std_filter_flattens_one_nesting_level_and_uses_reward_key():
    args = argparse.Namespace(reward_key="correct")
    group = [[Sample(reward={"correct": 1.0})], [Sample(reward={"correct": 0.0})]]
    assert check_reward_nonzero_std(args, group).keep


def test_no_aborted_filter_drops_a_group_with_an_aborted_sample():
    group = [Sample(status=Sample.Status.COMPLETED), [Sample(status=Sample.Status.ABORTED)]]
    assert check_no_aborted(NO_KEY, group) == DynamicFilterOutput(
        keep=False, reason="group_has_aborted"
    )


def test_no_aborted_filter_keeps_a_group_without_aborts():
    group = [Sample(status=Sample.Status.FAILED), Sample(status=Sample.Status.TRUNCATED)]
    assert check_no_aborted(NO_KEY, group).keep
