"""The port of Miles' Sample: every field and default, Status, validate(), reward access."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from miles_verifiers_testkit.miles.contract import AdapterRef, RewardSpec, Sample

EXPECTED_FIELDS = [
    ("group_index", None),
    ("index", None),
    ("rollout_id", None),
    ("prompt", ""),
    ("tokens", []),
    ("multimodal_inputs", None),
    ("multimodal_train_inputs", None),
    ("response", ""),
    ("response_length", 0),
    ("label", None),
    ("reward", None),
    ("loss_mask", None),
    ("weight_versions", []),
    ("rollout_log_probs", None),
    ("rollout_routed_experts", None),
    ("rollout_indexer_topk", None),
    ("remove_sample", False),
    ("teacher_log_probs", None),
    ("opd_reverse_kl", None),
    ("status", Sample.Status.PENDING),
    ("metadata", {}),
    ("generate_function_path", None),
    ("train_metadata", None),
    ("adapter", None),
    ("reward_spec", None),
    ("routing_key", None),
    ("non_generation_time", 0.0),
    ("spec_info", Sample.SpecInfo()),
    ("prefix_cache_info", Sample.PrefixCacheInfo()),
]


def test_fields_are_the_contract_fields_in_contract_order():
    assert [f.name for f in dataclasses.fields(Sample)] == [name for name, _ in EXPECTED_FIELDS]


@pytest.mark.parametrize(("name", "default"), EXPECTED_FIELDS)
def test_field_default_matches_contract(name, default):
    assert getattr(Sample(), name) == default


def test_mutable_defaults_are_not_shared_between_samples():
    first, second = Sample(), Sample()
    first.tokens.append(1)
    first.metadata["x"] = 1
    first.weight_versions.append("3")
    first.spec_info.spec_verify_ct += 1
    assert second.tokens == [] and second.metadata == {} and second.weight_versions == []
    assert second.spec_info.spec_verify_ct == 0


def test_status_values_are_the_contract_strings():
    assert {s.name: s.value for s in Sample.Status} == {
        "PENDING": "pending",
        "COMPLETED": "completed",
        "TRUNCATED": "truncated",
        "ABORTED": "aborted",
        "FAILED": "failed",
    }


def test_spec_info_counters_start_at_zero_and_rates_guard_division():
    info = Sample.SpecInfo()
    assert dataclasses.asdict(info) == {
        "spec_accept_token_num": 0,
        "spec_draft_token_num": 0,
        "spec_verify_ct": 0,
        "completion_token_num": 0,
    }
    assert info.spec_accept_rate == 0.0 and info.spec_accept_length == 0.0


def test_spec_info_add_accumulates_engine_meta_info():
    info = Sample.SpecInfo()
    meta = {
        "spec_accept_token_num": 6,
        "spec_draft_token_num": 8,
        "spec_verify_ct": 2,
        "completion_tokens": 10,
    }
    info.add(meta)
    info.add(meta)
    assert info.spec_accept_rate == 0.75
    assert info.spec_accept_length == 5.0


def test_prefix_cache_info_hit_rate_is_cached_over_prompt_tokens():
    info = Sample.PrefixCacheInfo()
    assert info.prefix_cache_hit_rate == 0.0
    info.add({"cached_tokens": 30, "prompt_tokens": 40})
    assert info.prefix_cache_hit_rate == 0.75


# -- validate() ---------------------------------------------------------------------------------


def valid_sample(**overrides) -> Sample:
    values = dict(
        tokens=[1, 2, 3, 4, 5], response_length=2, loss_mask=[1, 1], rollout_log_probs=[-0.1, -0.2]
    )
    values.update(overrides)
    return Sample(**values)


def test_validate_accepts_a_consistent_sample():
    valid_sample().validate()


def test_validate_accepts_the_default_sample():
    Sample().validate()


def test_validate_rejects_negative_response_length():
    with pytest.raises(AssertionError, match="response_length"):
        valid_sample(response_length=-1, loss_mask=None, rollout_log_probs=None).validate()


def test_validate_rejects_response_longer_than_tokens():
    with pytest.raises(AssertionError, match="6"):
        valid_sample(response_length=6, loss_mask=None, rollout_log_probs=None).validate()


@pytest.mark.parametrize(
    "name", ["loss_mask", "rollout_log_probs", "teacher_log_probs", "opd_reverse_kl"]
)
def test_validate_rejects_per_response_token_field_of_wrong_length(name):
    with pytest.raises(AssertionError, match=name):
        valid_sample(**{name: [0.0, 0.0, 0.0]}).validate()


@pytest.mark.parametrize(
    "name", ["loss_mask", "rollout_log_probs", "teacher_log_probs", "opd_reverse_kl"]
)
def test_validate_accepts_per_response_token_field_of_response_length(name):
    valid_sample(**{name: [0, 0]}).validate()


def test_validate_checks_routed_experts_against_tokens_minus_one():
    valid_sample(rollout_routed_experts=[[0]] * 4).validate()
    with pytest.raises(AssertionError, match="rollout_routed_experts"):
        valid_sample(rollout_routed_experts=[[0]] * 5).validate()


def test_validate_accepts_routed_experts_with_media_placeholders_expanded():
    # Two images of 3 and 4 patches each occupy one token but 3 and 4 engine positions.
    sample = valid_sample(
        multimodal_train_inputs={"mm_vision_num_patches": [3, 4]},
        rollout_routed_experts=[[0]] * (4 + 2 + 3),
    )
    sample.validate()


def test_validate_checks_indexer_topk_against_tokens_minus_one():
    valid_sample(rollout_indexer_topk=[[0]] * 4).validate()
    with pytest.raises(AssertionError, match="rollout_indexer_topk"):
        valid_sample(rollout_indexer_topk=[[0]] * 3).validate()


# -- rewards ------------------------------------------------------------------------------------


def test_get_reward_value_without_key_returns_the_reward_itself():
    assert Sample(reward=0.5).get_reward_value(argparse.Namespace(reward_key=None)) == 0.5


def test_get_reward_value_treats_empty_key_as_no_key():
    reward = {"a": 1.0}
    assert Sample(reward=reward).get_reward_value(argparse.Namespace(reward_key="")) is reward


def test_get_reward_value_with_key_reads_that_key():
    sample = Sample(reward={"reward": 1.5, "correct": 1.0})
    assert sample.get_reward_value(argparse.Namespace(reward_key="correct")) == 1.0


def test_get_reward_value_with_key_on_scalar_reward_raises_type_error():
    with pytest.raises(TypeError):
        Sample(reward=1.0).get_reward_value(argparse.Namespace(reward_key="correct"))


def test_get_reward_value_with_missing_key_raises_key_error():
    with pytest.raises(KeyError):
        Sample(reward={"reward": 1.0}).get_reward_value(argparse.Namespace(reward_key="correct"))


# -- derived views and helpers ----------------------------------------------------------------


def test_effective_response_length_sums_loss_mask_or_falls_back_to_response_length():
    assert valid_sample(loss_mask=[1, 0]).effective_response_length == 1
    assert valid_sample(loss_mask=None).effective_response_length == 2


def test_oldest_weight_version_is_the_smallest_numeric_version():
    assert Sample(weight_versions=["7", "5", "x", "9"]).oldest_weight_version == 5
    assert Sample(weight_versions=["x"]).oldest_weight_version is None


@pytest.mark.parametrize(
    ("finish", "status"),
    [
        ("length", Sample.Status.TRUNCATED),
        ("abort", Sample.Status.ABORTED),
        ("stop", Sample.Status.COMPLETED),
    ],
)
def test_update_from_meta_info_maps_finish_reason_to_status(finish, status):
    sample = Sample()
    sample.update_from_meta_info(
        argparse.Namespace(sglang_speculative_algorithm=None),
        {
            "finish_reason": {"type": finish},
            "weight_version": "4",
            "cached_tokens": 2,
            "prompt_tokens": 4,
        },
    )
    assert sample.status is status
    assert sample.weight_versions == ["4"]
    assert sample.prefix_cache_info.prefix_cache_hit_rate == 0.5


def test_reset_for_retry_keeps_identity_and_marks_aborted():
    sample = valid_sample(
        group_index=3, index=9, prompt="p", label="l", reward=1.0, status=Sample.Status.COMPLETED
    )
    sample.reset_for_retry()
    assert (sample.group_index, sample.index, sample.prompt, sample.label) == (3, 9, "p", "l")
    assert sample.tokens == [] and sample.response_length == 0 and sample.reward is None
    assert sample.status is Sample.Status.ABORTED


def test_strip_last_output_tokens_trims_every_aligned_field():
    class Decoder:
        def decode(self, ids):
            return ",".join(map(str, ids))

    sample = valid_sample(
        response_length=3, loss_mask=[1, 1, 1], rollout_log_probs=[-1.0, -2.0, -3.0]
    )
    sample.strip_last_output_tokens(1, Decoder())
    assert sample.tokens == [1, 2, 3, 4]
    assert (sample.response_length, sample.loss_mask, sample.rollout_log_probs) == (
        2,
        [1, 1],
        [-1.0, -2.0],
    )
    assert sample.response == "3,4"
    sample.validate()


# -- (de)serialisation -------------------------------------------------------------------------


def test_to_dict_turns_status_and_nested_records_into_plain_values():
    sample = valid_sample(
        status=Sample.Status.TRUNCATED, adapter=AdapterRef("a", 1), reward_spec=RewardSpec("math")
    )
    data = sample.to_dict()
    assert data["status"] == "truncated"
    assert data["spec_info"] == Sample.SpecInfo().to_dict()
    assert data["prefix_cache_info"] == {"cached_tokens": 0, "total_prompt_tokens": 0}
    assert data["adapter"] == {"name": "a", "slot": 1}
    assert data["reward_spec"] == {"rm_type": "math", "custom_rm_path": None}


def test_from_dict_round_trips_to_dict():
    sample = valid_sample(
        status=Sample.Status.FAILED, routing_key="k", metadata={"m": 1}, adapter=AdapterRef("a", 0)
    )
    sample.spec_info.add({"spec_verify_ct": 2})
    assert Sample.from_dict(sample.to_dict()) == sample


def test_from_dict_sets_unknown_keys_as_attributes():
    data = Sample().to_dict() | {"extra_field": 3}
    assert Sample.from_dict(data).extra_field == 3
