"""Miles option validation and the typed options view."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from miles_verifiers.trainer.miles_flags import MILES_FLAG_NAMES
from miles_verifiers.trainer.options import (
    FLAGS,
    InvalidOptionsError,
    MilesOptions,
    OptionsError,
    UnsupportedOptionsError,
    read_options,
    validate_options,
)


def find_option_problems(args) -> list:
    return list(read_options(args)[1])


def flags_of(args) -> list[str]:
    return [p.flag for p in find_option_problems(args)]


def test_a_valid_namespace_has_no_problems(make_args):
    assert find_option_problems(make_args()) == []


def test_prompt_data_loading_left_on_is_rejected_by_its_disable_flag(make_args):
    assert flags_of(make_args(rollout_global_dataset=True)) == ["--disable-rollout-global-dataset"]


def test_missing_global_dataset_attribute_counts_as_miles_default_on(make_args):
    args = make_args()
    del args.rollout_global_dataset
    assert flags_of(args) == ["--disable-rollout-global-dataset"]


@pytest.mark.parametrize(
    ("attribute", "value", "flag"),
    [
        ("partial_rollout", True, "--partial-rollout"),
        ("multimodal_keys", {"image": "images"}, "--multimodal-keys"),
        ("chat_template_path", "/tmp/t.jinja", "--chat-template-path"),
        ("use_opd", True, "--use-opd"),
        ("use_rollout_routing_replay", True, "--use-rollout-routing-replay"),
        ("use_rollout_indexer_replay", True, "--use-rollout-indexer-replay"),
        ("multi_lora", True, "--multi-lora"),
    ],
)
def test_unsupported_option_is_rejected_by_flag(make_args, attribute, value, flag):
    with pytest.raises(UnsupportedOptionsError) as caught:
        validate_options(make_args(**{attribute: value}))
    assert caught.value.flags == [flag]


def test_chat_template_path_error_points_to_apply_chat_template_kwargs(make_args):
    with pytest.raises(UnsupportedOptionsError, match="--apply-chat-template-kwargs"):
        validate_options(make_args(chat_template_path="/tmp/t.jinja"))


def test_all_offending_flags_are_named_together(make_args):
    args = make_args(
        rollout_global_dataset=True,
        partial_rollout=True,
        use_opd=True,
        multi_lora=True,
        rollout_max_response_len=None,
    )
    with pytest.raises(UnsupportedOptionsError) as caught:
        validate_options(args)
    assert caught.value.flags == [
        "--disable-rollout-global-dataset",
        "--partial-rollout",
        "--use-opd",
        "--multi-lora",
        "--rollout-max-response-len",
    ]
    message = str(caught.value)
    assert message.startswith("5 Miles options need changing")
    assert message.count("Fix:") == 5


def test_unset_switches_with_miles_defaults_are_accepted(make_args):
    args = make_args(
        partial_rollout=False, multimodal_keys=None, chat_template_path=None, use_opd=False
    )
    assert find_option_problems(args) == []


def test_missing_max_response_len_is_a_clear_invalid_option(make_args):
    with pytest.raises(InvalidOptionsError) as caught:
        validate_options(make_args(rollout_max_response_len=None))
    assert caught.value.flags == ["--rollout-max-response-len"]
    assert "has no default" in str(caught.value)


def test_engine_count_without_rollout_num_gpus_is_a_clear_error(make_args):
    with pytest.raises(InvalidOptionsError) as caught:
        validate_options(make_args(rollout_num_gpus=None))
    assert caught.value.flags == ["--rollout-num-gpus"]
    assert "--colocate" in str(caught.value)


def test_fewer_gpus_than_one_engine_is_rejected(make_args):
    assert flags_of(make_args(rollout_num_gpus=2, rollout_num_gpus_per_engine=4)) == [
        "--rollout-num-gpus"
    ]


def test_zero_gpus_per_engine_is_rejected(make_args):
    assert flags_of(make_args(rollout_num_gpus_per_engine=0)) == ["--rollout-num-gpus-per-engine"]


@pytest.mark.parametrize(
    ("attribute", "flag"),
    [
        ("rollout_batch_size", "--rollout-batch-size"),
        ("n_samples_per_prompt", "--n-samples-per-prompt"),
        ("n_samples_per_eval_prompt", "--n-samples-per-eval-prompt"),
        ("sglang_server_concurrency", "--sglang-server-concurrency"),
    ],
)
def test_non_positive_counts_are_rejected(make_args, attribute, flag):
    assert flags_of(make_args(**{attribute: 0})) == [flag]


def test_over_sampling_below_batch_size_is_rejected(make_args):
    assert flags_of(make_args(rollout_batch_size=8, over_sampling_batch_size=4)) == [
        "--over-sampling-batch-size"
    ]


def test_chat_template_kwargs_that_are_not_a_json_object_are_rejected(make_args):
    assert flags_of(make_args(apply_chat_template_kwargs="[1, 2]")) == [
        "--apply-chat-template-kwargs"
    ]


def test_options_errors_are_value_errors_with_problem_details(make_args):
    with pytest.raises(ValueError) as caught:
        validate_options(make_args(rollout_batch_size=None))
    assert isinstance(caught.value, OptionsError)
    assert caught.value.problems[0].kind == "invalid"


# -- sampling values SGLang and its router would refuse ----------------------------------------


@pytest.mark.parametrize(
    ("attribute", "value", "flag"),
    [
        ("rollout_temperature", -1.0, "--rollout-temperature"),
        ("rollout_temperature", float("nan"), "--rollout-temperature"),
        ("rollout_temperature", float("inf"), "--rollout-temperature"),
        ("rollout_top_p", 2.0, "--rollout-top-p"),
        ("rollout_top_p", 0.0, "--rollout-top-p"),
        ("rollout_top_k", 0, "--rollout-top-k"),
        ("rollout_top_k", -2, "--rollout-top-k"),
        ("rollout_top_k", 2**31, "--rollout-top-k"),
        ("eval_temperature", -0.5, "--eval-temperature"),
        ("eval_top_p", 1.5, "--eval-top-p"),
        ("eval_top_k", 0, "--eval-top-k"),
        ("eval_min_new_tokens", -1, "--eval-min-new-tokens"),
        ("eval_min_new_tokens", 129, "--eval-min-new-tokens"),
        ("eval_max_response_len", 0, "--eval-max-response-len"),
    ],
)
def test_sampling_values_the_engine_refuses_are_rejected_naming_the_flag(
    make_args, attribute, value, flag
):
    with pytest.raises(InvalidOptionsError) as caught:
        validate_options(make_args(**{attribute: value}))
    assert caught.value.flags == [flag]


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("rollout_temperature", 0.0),
        ("rollout_top_p", 1.0),
        ("rollout_top_k", -1),
        ("rollout_top_k", None),
        ("eval_top_k", 1),
        ("eval_min_new_tokens", 128),
    ],
)
def test_sampling_values_at_the_edge_of_what_the_engine_takes_are_accepted(
    make_args, attribute, value
):
    assert find_option_problems(make_args(**{attribute: value})) == []


def test_eval_minimum_tokens_are_compared_with_the_eval_response_cap(make_args):
    assert flags_of(make_args(eval_max_response_len=16, eval_min_new_tokens=17)) == [
        "--eval-min-new-tokens"
    ]


@pytest.mark.parametrize("seed", [2**64, 2**63, -1])
def test_a_seed_the_router_cannot_carry_is_rejected_under_deterministic_inference(make_args, seed):
    args = make_args(rollout_seed=seed, sglang_enable_deterministic_inference=True)
    with pytest.raises(InvalidOptionsError) as caught:
        validate_options(args)
    assert caught.value.flags == ["--rollout-seed"]


def test_a_large_seed_only_shuffles_without_deterministic_inference(make_args):
    assert find_option_problems(make_args(rollout_seed=2**64)) == []


def test_a_seed_that_is_not_an_integer_is_rejected(make_args):
    assert flags_of(make_args(rollout_seed="42")) == ["--rollout-seed"]


# -- typed view ---------------------------------------------------------------------------------


def test_typed_view_is_frozen(make_args):
    options = validate_options(make_args())
    with pytest.raises(ValidationError):
        options.rollout_batch_size = 3  # type: ignore[misc]


def test_typed_view_fills_miles_defaults_for_absent_attributes(make_args):
    options = validate_options(make_args())
    assert options.rollout_seed == 42
    assert options.rollout_shuffle is False
    assert options.train.temperature == 1.0 and options.train.top_p == 1.0
    assert options.train.top_k == -1
    assert options.train.chat_template_kwargs == {}
    assert options.sglang_server_concurrency == 512
    assert options.train.min_new_tokens is None


def test_over_sampling_defaults_to_batch_size(make_args):
    assert validate_options(make_args(rollout_batch_size=6)).over_sampling_batch_size == 6


def test_engine_count_and_concurrency_follow_gpus(make_args):
    options = validate_options(
        make_args(rollout_num_gpus=8, rollout_num_gpus_per_engine=2, sglang_server_concurrency=16)
    )
    assert (options.engine_count, options.max_concurrency) == (4, 64)


def test_eval_sampling_overrides_only_when_set(make_args):
    options = validate_options(
        make_args(
            rollout_temperature=0.7,
            rollout_top_p=0.9,
            eval_temperature=0.0,
            rollout_max_context_len=4096,
        )
    )
    assert options.eval.temperature == 0.0
    assert options.eval.top_p == 0.9
    assert options.eval.max_context_len == 4096
    assert options.eval.max_response_len == 128


def test_eval_prompt_cap_and_min_tokens_come_from_eval_flags_only(make_args):
    options = validate_options(make_args(rollout_max_prompt_len=100, eval_min_new_tokens=3))
    assert options.train.max_prompt_len == 100
    assert options.eval.max_prompt_len is None
    assert options.eval.min_new_tokens == 3


def test_eval_reward_key_falls_back_to_reward_key(make_args):
    assert validate_options(make_args(reward_key="correct")).eval.reward_key == "correct"
    assert validate_options(make_args(reward_key="a", eval_reward_key="b")).eval.reward_key == "b"


def test_chat_template_kwargs_accept_parsed_and_raw_json(make_args):
    assert validate_options(
        make_args(apply_chat_template_kwargs={"enable_thinking": False})
    ).train.chat_template_kwargs == {"enable_thinking": False}
    assert validate_options(
        make_args(apply_chat_template_kwargs='{"a": 1}')
    ).train.chat_template_kwargs == {"a": 1}


def test_stop_lists_become_tuples(make_args):
    options = validate_options(make_args(rollout_stop=["</answer>"], rollout_stop_token_ids=[7, 8]))
    assert options.train.stop == ("</answer>",)
    assert options.train.stop_token_ids == (7, 8)


def test_modes_follow_num_rollout_and_eval_interval(make_args):
    eval_only = validate_options(make_args(num_rollout=0, eval_interval=5))
    assert (eval_only.train_enabled, eval_only.eval_enabled) == (False, True)
    train_only = validate_options(make_args())
    assert (train_only.train_enabled, train_only.eval_enabled) == (True, False)


def test_routing_and_reward_model_switches(make_args):
    options = validate_options(
        make_args(sglang_router_policy="consistent_hashing", rm_type=" math ")
    )
    assert options.routes_by_key
    assert options.rm_type == "math" and options.uses_miles_reward_model
    assert not validate_options(make_args(sglang_router_policy="round_robin")).routes_by_key


def test_tokenizer_source_prefers_sglang_tokenizer_path(make_args):
    assert (
        validate_options(
            make_args(hf_checkpoint="/m/x", sglang_tokenizer_path="Qwen/Qwen3-0.6B")
        ).tokenizer_source
        == "Qwen/Qwen3-0.6B"
    )
    assert validate_options(make_args(hf_checkpoint="/m/x")).tokenizer_source == "/m/x"


def test_save_directory_is_carried(make_args):
    assert validate_options(make_args(save="/ckpt")).save_dir == "/ckpt"


def test_options_are_read_from_a_real_argparse_namespace():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollout-batch-size", type=int)
    parser.add_argument("--rollout-max-response-len", type=int)
    parser.add_argument("--rollout-num-gpus", type=int)
    parser.add_argument("--hf-checkpoint")
    parser.add_argument(
        "--disable-rollout-global-dataset", dest="rollout_global_dataset", action="store_false"
    )
    args = parser.parse_args(
        "--rollout-batch-size 2 --rollout-max-response-len 64 --rollout-num-gpus 1 "
        "--hf-checkpoint /models/policy --disable-rollout-global-dataset".split()
    )
    options = validate_options(args)
    assert isinstance(options, MilesOptions)
    assert (options.rollout_batch_size, options.train.max_response_len) == (2, 64)


# -- one model, one field-to-flag map -----------------------------------------------------------


def test_every_field_names_the_miles_flag_it_comes_from():
    assert set(FLAGS) == set(MilesOptions.model_fields)
    unknown = [
        flag
        for flag in FLAGS.values()
        if flag.removeprefix("--") not in MILES_FLAG_NAMES and flag != "args.rollout_min_new_tokens"
    ]
    assert unknown == []


# -- the engine's length limits and stops, among the other option problems ------------------------


@pytest.mark.parametrize(
    ("values", "flag", "fix"),
    [
        (
            {"rollout_max_context_len": 100, "rollout_max_prompt_len": 100},
            "--rollout-max-prompt-len",
            "pass --rollout-max-prompt-len at most 99 (--rollout-max-context-len minus one",
        ),
        (
            {"eval_max_context_len": 50, "eval_max_prompt_len": 60},
            "--eval-max-prompt-len",
            "pass --eval-max-prompt-len at most 49 (--eval-max-context-len minus one",
        ),
        (
            {"eval_max_context_len": 1},
            "--eval-max-context-len",
            "pass --eval-max-context-len N with N >= 2",
        ),
        (
            {"rollout_stop": [f"<stop{i}>" for i in range(33)]},
            "--rollout-stop",
            "pass at most 32 strings to --rollout-stop",
        ),
        ({"rollout_stop": [""]}, "--rollout-stop", "drop the empty string from --rollout-stop"),
        ({"rollout_stop_token_ids": [7, -1]}, "--rollout-stop-token-ids", "token ids of 0 or more"),
    ],
)
def test_a_limit_the_engine_would_refuse_is_an_option_problem_with_its_fix(
    make_args, values, flag, fix
):
    (problem,) = find_option_problems(make_args(**values))
    assert problem.flag == flag
    assert problem.fix.startswith(fix) or fix in problem.fix


def test_limit_problems_are_reported_together_with_the_other_option_problems(make_args):
    args = make_args(partial_rollout=True, rollout_stop=[""], rollout_top_p=2.0)
    assert flags_of(args) == ["--partial-rollout", "--rollout-top-p", "--rollout-stop"]


def test_an_eval_prompt_cap_is_measured_against_the_training_context_cap_it_inherits(make_args):
    args = make_args(rollout_max_context_len=100, eval_max_prompt_len=100)
    args.eval_max_context_len = None  # hand-built: Miles itself copies the training cap over
    (problem,) = find_option_problems(args)
    assert problem.flag == "--eval-max-prompt-len"
    assert "raise --rollout-max-context-len above 100" in problem.fix


def test_a_missing_tokenizer_is_an_option_problem_unless_a_tokenizer_path_is_given(make_args):
    assert flags_of(make_args(hf_checkpoint=None)) == ["--hf-checkpoint"]
    assert flags_of(make_args(hf_checkpoint=None, sglang_tokenizer_path="/tok")) == []


def test_invalid_options_leave_a_view_with_miles_defaults_in_place_of_the_offending_ones(
    make_args,
):
    view, problems = read_options(make_args(rollout_top_p=2.0, custom_rm_path="my.reward"))
    assert [p.flag for p in problems] == ["--rollout-top-p"]
    assert view is not None
    assert (view.train.top_p, view.custom_rm_path) == (1.0, "my.reward")


def test_a_group_reward_model_with_evaluation_is_an_option_problem(make_args):
    args = make_args(group_rm=True, custom_rm_path="my.group_reward", eval_interval=5)
    assert flags_of(args) == ["--group-rm"]


def test_a_group_reward_model_without_a_reward_model_is_an_option_problem(make_args):
    assert flags_of(make_args(group_rm=True)) == ["--group-rm"]
    assert flags_of(make_args(group_rm=True, rm_type="math")) == []
