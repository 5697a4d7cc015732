"""The run summary: counts from the samples, drops and replacements from the metrics."""

from __future__ import annotations

import argparse

from rich.console import Console

from miles_verifiers_testkit.miles.contract import Sample
from miles_verifiers_testkit.runner.summary import RunTally, eval_table, id_ranges, summary_table


def _sample(reward, *, truncated: bool = False, mask=None, response_length: int = 4) -> Sample:
    return Sample(
        tokens=[0] * (response_length + 2),
        response_length=response_length,
        reward=reward,
        loss_mask=mask,
        status=Sample.Status.TRUNCATED if truncated else Sample.Status.COMPLETED,
    )


def _args(reward_key=None) -> argparse.Namespace:
    return argparse.Namespace(reward_key=reward_key)


def _tally() -> RunTally:
    tally = RunTally(reward_args=_args())
    tally.add_train(
        0,
        [[_sample(1.0), _sample(0.0, truncated=True)], [_sample(1.0, mask=[1, 0, 0, 1])]],
        {"rollout/dynamic_filter/drop_trace_error": 2.0, "verifiers/groups_replaced": 2.0},
        wall_s=2.0,
    )
    tally.add_train(
        1,
        [[_sample(0.5), _sample(0.5)]],
        {
            "rollout/dynamic_filter/drop_trace_error": 1.0,
            "rollout/dynamic_filter/drop_zero_std": 1.0,
        },
        wall_s=2.0,
    )
    tally.add_eval(
        1,
        {
            "mv-arith": {
                "rewards": [1.0, 0.0, None],
                "truncated": [False, True, False],
                "samples": [],
            }
        },
        {},
        1.0,
    )
    return tally


def test_groups_and_samples_are_counted_over_training_calls():
    summary = _tally().finish(wall_s=6.0)
    assert (summary.train_rollouts, summary.groups, summary.samples) == (2, 3, 5)


def test_reward_mean_is_over_every_training_sample():
    assert _tally().finish(6.0).reward_mean == (1.0 + 0.0 + 1.0 + 0.5 + 0.5) / 5


def test_drops_are_summed_per_reason():
    assert _tally().finish(6.0).drops == {"trace_error": 3.0, "zero_std": 1.0}


def test_replacements_are_summed():
    assert _tally().finish(6.0).replacements == 2.0


def test_truncation_rate_is_the_truncated_share_of_samples():
    assert _tally().finish(6.0).truncated_rate == 1 / 5


def test_sampled_tokens_follow_the_loss_mask():
    # 4 + 4 + (1+0+0+1) + 4 + 4
    assert _tally().finish(6.0).sampled_tokens == 18


def test_tokens_per_second_use_training_call_time():
    summary = _tally().finish(6.0)
    assert summary.tokens_per_s == 18 / 4.0


def test_dict_rewards_are_read_through_the_reward_key():
    tally = RunTally(reward_args=_args("correct"))
    tally.add_train(0, [[_sample({"correct": 1.0, "format": 0.0})]], {}, 1.0)
    assert tally.finish(1.0).reward_mean == 1.0


def test_eval_reward_mean_skips_missing_rewards():
    (env,) = _tally().finish(6.0).evals
    assert (env.env_id, env.rewards, env.reward_mean, env.truncated_rate) == (
        "mv-arith",
        3,
        0.5,
        1 / 3,
    )


def _render(table) -> str:
    console = Console(record=True, width=120)
    console.print(table)
    return console.export_text()


def test_summary_table_shows_every_headline_number():
    text = _render(summary_table(_tally().finish(6.0)))
    for expected in ("groups", "samples", "reward mean", "trace_error 3", "zero_std 1",
                     "groups replaced", "truncated", "20.0%", "sampled tokens", "18",
                     "tokens/s", "4.5", "wall time", "6.00 s"):  # fmt: skip
        assert expected in text


def test_eval_table_lists_each_env():
    text = _render(eval_table(_tally().finish(6.0)))
    assert "mv-arith" in text and "0.500" in text


def test_no_eval_table_without_evaluations():
    tally = RunTally(reward_args=_args())
    assert eval_table(tally.finish(0.0)) is None


def test_the_summary_says_whether_the_run_was_interrupted_and_which_rollouts_it_holds():
    text = _render(summary_table(_tally().finish(6.0, "interrupted")))
    assert "interrupted" in text
    assert "rollout ids" in text


def test_rollout_ids_are_shown_as_runs_of_consecutive_ids():
    assert id_ranges([0, 1, 2, 3, 7, 9, 10]) == "0-3, 7, 9-10"
    assert id_ranges([]) == "none"
