"""The Miles namespace: Miles' defaults, the launcher's settings, flags and derived values."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers.cli.arguments import cli_namespace
from miles_verifiers.cli.namespace import (
    EVAL_PLACEHOLDER_NAME,
    NamespaceError,
    build_namespace,
)
from miles_verifiers.trainer.options import miles_defaults


def test_unset_options_take_miles_defaults():
    args = build_namespace({})
    assert args.n_samples_per_prompt == 1
    assert args.rollout_top_k == -1
    assert args.rollout_temperature == 1.0
    assert args.sglang_server_concurrency == 512
    assert args.apply_chat_template_kwargs == {}
    assert args.rollout_batch_size is None


def test_every_attribute_the_adapter_reads_is_present():
    args = build_namespace({})
    assert set(miles_defaults()) <= set(vars(args))


def test_global_dataset_is_off_as_the_verifiers_launcher_passes_it():
    assert build_namespace({}).rollout_global_dataset is False


def test_checkpoint_defaults_to_the_fixture_model():
    assert build_namespace({}).hf_checkpoint == "Qwen/Qwen3-0.6B"


def test_over_sampling_defaults_to_the_batch_size():
    assert build_namespace({"rollout_batch_size": 6}).over_sampling_batch_size == 6


def test_given_over_sampling_is_kept():
    args = build_namespace({"rollout_batch_size": 6, "over_sampling_batch_size": 9})
    assert args.over_sampling_batch_size == 9


def test_passthrough_sets_options_without_a_typed_flag():
    args = build_namespace({}, {"use_kl_loss": True, "kl_coef": 0.01})
    assert (args.use_kl_loss, args.kl_coef) == (True, 0.01)


def test_passthrough_wins_over_a_typed_flag_for_the_same_attribute():
    assert build_namespace({"rollout_seed": 1}, {"rollout_seed": 2}).rollout_seed == 2


def test_preset_values_sit_below_given_flags():
    args = build_namespace({"num_rollout": 7}, preset={"num_rollout": 3, "rollout_batch_size": 4})
    assert (args.num_rollout, args.rollout_batch_size) == (7, 4)


def test_eval_reward_key_defaults_to_the_reward_key():
    assert build_namespace({"reward_key": "correct"}).eval_reward_key == "correct"


def test_eval_context_cap_defaults_to_the_training_one():
    assert build_namespace({"rollout_max_context_len": 4096}).eval_max_context_len == 4096


def test_first_prompt_cap_defaults_to_one_below_the_context_cap():
    assert build_namespace({"rollout_max_context_len": 4096}).rollout_max_prompt_len == 4095


def test_first_prompt_cap_at_the_context_cap_is_refused():
    with pytest.raises(NamespaceError, match="--rollout-max-prompt-len 4096"):
        build_namespace({"rollout_max_context_len": 4096, "rollout_max_prompt_len": 4096})


def test_eval_interval_adds_the_launchers_eval_dataset_placeholder():
    args = build_namespace({"eval_interval": 2}, config_path=Path("/cfg/env.toml"))
    assert args.eval_prompt_data == [EVAL_PLACEHOLDER_NAME, "/cfg/env.toml"]


def test_defaults_are_copies_that_runs_cannot_share():
    first = build_namespace({})
    first.apply_chat_template_kwargs["enable_thinking"] = False
    assert build_namespace({}).apply_chat_template_kwargs == {}


def test_command_line_to_namespace(parse):
    cli = parse(
        [
            "rollout",
            "--rollout-batch-size", "4",
            "--n-samples-per-prompt", "2",
            "--apply-chat-template-kwargs", '{"enable_thinking": false}',
            "--lr", "1e-6",
        ]
    )  # fmt: skip
    args = cli_namespace(cli, None)
    assert args.rollout_batch_size == 4
    assert args.n_samples_per_prompt == 2
    assert args.over_sampling_batch_size == 4
    assert args.apply_chat_template_kwargs == {"enable_thinking": False}
    assert args.lr == 1e-6


def test_without_rollout_num_gpus_the_runner_counts_its_one_engine():
    assert build_namespace({}).rollout_num_gpus == 1
    assert build_namespace({"rollout_num_gpus_per_engine": 2}).rollout_num_gpus == 2


def test_a_given_rollout_num_gpus_is_kept():
    assert build_namespace({"rollout_num_gpus": 8}).rollout_num_gpus == 8


def test_the_test_kit_namespace_has_the_runners_miles_defaults():
    from miles_verifiers.cli.namespace import build_namespace
    from miles_verifiers_testkit.miles import SMALL_RUN
    from miles_verifiers_testkit.miles import miles_args as kit_miles_args

    runner = vars(build_namespace({}))
    kit = vars(kit_miles_args())

    differing = (
        {name for name in runner.keys() & kit.keys() if runner[name] != kit[name]}
        - set(SMALL_RUN)
        - {"over_sampling_batch_size"}
    )  # derived from the batch size
    assert differing == set()
    assert runner.keys() <= kit.keys()
