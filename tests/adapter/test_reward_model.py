"""Miles' reward model applied to a group's samples (adapter/trainer/hooks.py)."""

from __future__ import annotations

import asyncio

import pytest

from miles_verifiers.trainer.hooks import RewardModel, RewardModelError
from miles_verifiers_testkit.miles.contract import Sample


def test_a_group_reward_model_asked_to_score_evaluation_names_the_flag_and_the_fix() -> None:
    async def by_group(args, samples):
        return [1.0 for _ in samples]

    model = RewardModel(None, by_group, None, None, "--custom-rm-path with --group-rm")

    with pytest.raises(RewardModelError, match="--group-rm scores whole training groups only"):
        asyncio.run(model.apply(None, [Sample(), Sample()], evaluation=True))
