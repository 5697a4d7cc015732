"""Credentials given as flags never reach what a run records."""

from __future__ import annotations

import pytest

from miles_verifiers_testkit.runner.redaction import REDACTED, looks_secret, redact


@pytest.mark.parametrize(
    "name",
    ["wandb_key", "wandb-key", "--wandb-api-key", "hf_token", "db_password",
     "aws_secret_access_key", "client_secret", "credentials_file", "MY_API_KEY"],
)  # fmt: skip
def test_credential_names_are_recognised(name):
    assert looks_secret(name)


@pytest.mark.parametrize(
    "name",
    ["reward_key", "eval_reward_key", "rollout_stop_token_ids", "eval_min_new_tokens",
     "multimodal_keys", "sglang_tokenizer_path", "rollout_batch_size"],
)  # fmt: skip
def test_ordinary_miles_option_names_are_not_credentials(name):
    assert not looks_secret(name)


def test_credentials_are_replaced_at_any_depth_and_the_rest_is_kept():
    args = {"wandb_key": "k-123", "reward_key": "acc", "extra": {"hf_token": "t-9", "n": 1}}
    assert redact(args) == {
        "wandb_key": REDACTED,
        "reward_key": "acc",
        "extra": {"hf_token": REDACTED, "n": 1},
    }


def test_an_unset_credential_stays_null():
    assert redact({"wandb_key": None}) == {"wandb_key": None}
