"""Miles-style flags: typed flags, JSON values, and the passthrough for every other option."""

from __future__ import annotations

import pytest

from miles_verifiers.cli.flags import PassthroughError, parse_passthrough, parse_scalar


def test_typed_flags_land_on_their_miles_attribute(parse):
    cli = parse(
        ["rollout", "--rollout-batch-size", "8", "--rollout-top-p", "0.9", "--rollout-shuffle"]
    )
    assert (cli.rollout_batch_size, cli.rollout_top_p, cli.rollout_shuffle) == (8, 0.9, True)


def test_untyped_flags_are_absent_rather_than_defaulted(parse):
    cli = parse(["rollout"])
    assert not hasattr(cli, "rollout_batch_size")
    assert not hasattr(cli, "rollout_temperature")


def test_disable_rollout_global_dataset_stores_false_into_rollout_global_dataset(parse):
    assert parse(["rollout", "--disable-rollout-global-dataset"]).rollout_global_dataset is False


def test_negative_values_are_accepted_for_typed_flags(parse):
    assert parse(["rollout", "--rollout-top-k", "-1"]).rollout_top_k == -1


def test_stop_token_ids_take_several_integers(parse):
    assert parse(["rollout", "--rollout-stop-token-ids", "7", "9"]).rollout_stop_token_ids == [7, 9]


def test_a_non_integer_batch_size_is_a_usage_error_naming_the_flag(parse, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(["rollout", "--rollout-batch-size", "four"])
    assert exit_info.value.code == 2
    assert "--rollout-batch-size" in capsys.readouterr().err


def test_chat_template_kwargs_are_parsed_as_a_json_object(parse):
    cli = parse(["rollout", "--apply-chat-template-kwargs", '{"enable_thinking": false}'])
    assert cli.apply_chat_template_kwargs == {"enable_thinking": False}


def test_chat_template_kwargs_that_are_not_json_are_refused(parse, capsys):
    with pytest.raises(SystemExit):
        parse(["rollout", "--apply-chat-template-kwargs", "{enable_thinking: false}"])
    err = capsys.readouterr().err
    assert "--apply-chat-template-kwargs" in err and "not valid JSON" in err


def test_chat_template_kwargs_that_are_not_an_object_are_refused(parse, capsys):
    with pytest.raises(SystemExit):
        parse(["rollout", "--apply-chat-template-kwargs", "[1, 2]"])
    assert "expected a JSON object" in capsys.readouterr().err


def test_untyped_miles_flags_are_kept_for_the_passthrough(parse):
    cli = parse(["rollout", "--rollout-batch-size", "2", "--use-kl-loss", "--kl-coef", "0.01"])
    assert cli.miles_passthrough == ["--use-kl-loss", "--kl-coef", "0.01"]


def test_unknown_prefix_of_a_known_flag_is_refused_not_expanded(parse, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(["rollout", "--rollout-batch", "3"])
    assert exit_info.value.code == 2
    assert "did you mean --rollout-batch-size?" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["rollout", "demo", "check"])
def test_a_misspelled_miles_flag_is_a_usage_error_suggesting_the_real_one(parse, capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        parse([command, "--n-sample-per-prompt", "4"])
    assert exit_info.value.code == 2
    assert "--n-sample-per-prompt (did you mean --n-samples-per-prompt?)" in capsys.readouterr().err


def test_a_misspelled_runner_option_is_refused_suggesting_the_real_one(parse, capsys):
    with pytest.raises(SystemExit):
        parse(["rollout", "--outptu", "x.jsonl"])
    assert "--outptu (did you mean --output?)" in capsys.readouterr().err


def test_every_unknown_flag_is_named_in_one_error(parse, capsys):
    with pytest.raises(SystemExit):
        parse(["rollout", "--n-sample-per-prompt", "4", "--outptu", "x.jsonl"])
    err = capsys.readouterr().err
    assert "--n-sample-per-prompt" in err and "--outptu" in err


def test_the_refusal_says_how_to_pass_a_newer_miles_flag(parse, capsys):
    with pytest.raises(SystemExit):
        parse(["rollout", "--brand-new-miles-option", "1"])
    assert "--extra-miles-flag brand-new-miles-option" in capsys.readouterr().err


def test_a_flag_named_with_extra_miles_flag_is_passed_through(parse):
    cli = parse(
        ["rollout", "--extra-miles-flag", "brand-new-miles-option", "--brand-new-miles-option", "1"]
    )
    assert cli.miles_passthrough == ["--brand-new-miles-option", "1"]


def test_extra_miles_flag_accepts_the_dashed_spelling_and_repeats(parse):
    cli = parse(
        ["rollout", "--extra-miles-flag=--new-a", "--extra-miles-flag", "new_b",
         "--new-a", "--new-b=2"]
    )  # fmt: skip
    assert cli.miles_passthrough == ["--new-a", "--new-b=2"]


def test_a_known_miles_flag_with_underscores_still_gets_the_dashed_spelling_hint(parse):
    cli = parse(["rollout", "--use_kl_loss"])
    with pytest.raises(PassthroughError, match="write --use-kl-loss"):
        parse_passthrough(cli.miles_passthrough)


def test_passthrough_values_are_read_as_json_when_they_parse():
    parsed = parse_passthrough(
        ["--kl-coef", "0.01", "--micro-batch-size", "2", "--flag-b", "false"]
    )
    assert parsed == {"kl_coef": 0.01, "micro_batch_size": 2, "flag_b": False}


def test_passthrough_values_that_are_not_json_stay_text():
    assert parse_scalar("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"


def test_a_bare_passthrough_flag_is_true():
    assert parse_passthrough(["--colocate"]) == {"colocate": True}


def test_a_bare_disable_flag_turns_the_named_option_off():
    parsed = parse_passthrough(["--disable-rewards-normalization"])
    assert parsed["rewards_normalization"] is False


def test_several_passthrough_values_become_a_list():
    parsed = parse_passthrough(["--eval-prompt-data", "aime", "/data/aime.jsonl"])
    assert parsed == {"eval_prompt_data": ["aime", "/data/aime.jsonl"]}


def test_passthrough_accepts_the_equals_spelling():
    assert parse_passthrough(["--rm-type=deepscaler"]) == {"rm_type": "deepscaler"}


def test_passthrough_negative_number_is_a_value_not_a_flag():
    assert parse_passthrough(["--eval-top-k", "-1"]) == {"eval_top_k": -1}


def test_passthrough_flag_given_twice_is_an_error():
    with pytest.raises(PassthroughError, match="more than once"):
        parse_passthrough(["--kl-coef", "0.1", "--kl-coef", "0.2"])


def test_passthrough_value_without_a_flag_is_an_error():
    with pytest.raises(PassthroughError, match="positional"):
        parse_passthrough(["stray"])


def test_passthrough_flag_with_underscores_is_refused_with_the_dashed_spelling():
    with pytest.raises(PassthroughError, match="--kl-coef"):
        parse_passthrough(["--kl_coef", "0.1"])


def test_each_miles_flag_is_one_row_of_the_table():
    from miles_verifiers.trainer.miles_flags import MILES_FLAGS

    flags = [row.flag for row in MILES_FLAGS if row.flag is not None]
    dests = [row.dest for row in MILES_FLAGS]
    assert (len(flags), len(dests)) == (len(set(flags)), len(set(dests)))
