"""What each train sample carries for Miles beyond tokens: its weight version, a readable reward."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.checks import check_train_output
from miles_verifiers_conformance.hooks import CONSTANT_REWARD_PATH
from miles_verifiers_conformance.miles_side import flatten, miles_args, normalized_rewards
from miles_verifiers_conformance.world import LegacyRolloutFn, MilesWorld, write_config


@pytest.mark.clause("TRN-4")
def test_train_samples_record_the_weight_version_they_were_generated_under(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 3}))
    if isinstance(fn, LegacyRolloutFn):
        pytest.skip("Miles calls a legacy rollout function without the weight version")

    groups = check_train_output(world.train(fn, 0, weight_version=7), args, world.contract)

    missing = [
        (s.group_index, s.index, list(s.weight_versions))
        for group in groups
        for s in group
        if "7" not in [str(v) for v in s.weight_versions]
    ]
    assert not missing, (
        "samples of a train call made with weight_version=7 must list '7' in "
        f"Sample.weight_versions (Miles' staleness metrics read it); (group, index, versions): {missing}"
    )


@pytest.mark.clause("GRP-5")
def test_a_scalar_reward_model_under_reward_key_never_reaches_normalisation_unreadable(
    world: MilesWorld, workdir: Path
) -> None:
    world.engine.reset()
    args = miles_args(
        rollout_batch_size=2,
        n_samples_per_prompt=2,
        custom_rm_path=CONSTANT_REWARD_PATH,
        reward_key="correct",
    )
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 3}))

    try:
        output = world.train(fn, 0)
    except AssertionError:
        raise
    except Exception as error:
        # Refusing the combination is fine, as long as the error says which flag to change.
        assert "--reward-key" in str(error), (
            f"the train call failed without naming --reward-key: {type(error).__name__}: {error}"
        )
        return
    samples = flatten(check_train_output(output, args, world.contract))
    try:
        normalized_rewards(samples, args)
    except (TypeError, KeyError) as error:
        pytest.fail(
            "with --reward-key 'correct' and a reward model returning a number, Miles cannot "
            f"read the rewards it was given ({type(error).__name__}: {error}); return rewards "
            "holding the key, or refuse the combination naming --reward-key"
        )
