"""Metric names and values reported to Miles."""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest
import verifiers.v1 as vf

from miles_verifiers.protocol.records import trace_record
from miles_verifiers.trainer.metrics import (
    drop_metrics,
    merge,
    sample_metrics,
    scheduling_metrics,
    trace_metrics,
    with_eval_prefix,
)
from miles_verifiers_testkit.miles.contract import Sample


def summary(
    reward=1.0, error=False, truncated=False, turns=1, response=10, total=30, **more: Any
) -> Any:
    """What metrics read of a trace record."""
    return SimpleNamespace(
        reward=reward,
        failed=error,
        is_truncated=truncated,
        num_turns=turns,
        num_output_tokens=response,
        num_total_tokens=total,
        **{
            "rewards": {},
            "metrics": {},
            "is_timeout": False,
            "recovered_errors": 0,
            "episode_recovered_errors": 0,
            **more,
        },
    )


def test_trace_metrics_read_a_real_trace(two_turn_trace):
    metrics = trace_metrics([trace_record(two_turn_trace)])
    assert metrics["verifiers/reward_mean"] == 1.0
    assert metrics["verifiers/error_rate"] == 0.0
    assert metrics["verifiers/truncated_rate"] == 0.0
    assert metrics["verifiers/num_turns_mean"] == 2.0
    assert metrics["verifiers/response_tokens_mean"] == 4.0
    assert metrics["verifiers/total_tokens_mean"] == 12.0


def test_trace_metrics_keep_the_upstream_names():
    metrics = trace_metrics([summary()])
    for name in ("reward_mean", "error_rate", "truncated_rate", "num_turns_mean"):
        assert f"verifiers/{name}" in metrics


def test_trace_metrics_are_means_over_the_given_traces():
    metrics = trace_metrics(
        [
            summary(reward=1.0, turns=1, response=10),
            summary(reward=0.0, error=True, truncated=True, turns=3, response=30),
        ]
    )
    assert metrics["verifiers/reward_mean"] == 0.5
    assert metrics["verifiers/error_rate"] == 0.5
    assert metrics["verifiers/truncated_rate"] == 0.5
    assert metrics["verifiers/num_turns_mean"] == 2.0
    assert metrics["verifiers/num_turns_max"] == 3.0
    assert metrics["verifiers/response_tokens_mean"] == 20.0
    assert metrics["verifiers/num_traces"] == 2.0


def test_each_reward_and_metric_name_gets_its_mean_over_the_traces_that_carry_it():
    metrics = trace_metrics(
        [
            summary(1.5, rewards={"correct": 1.0, "well_formed": 1.0}, metrics={"judged": 1.0}),
            summary(0.0, rewards={"correct": 0.0}),
        ]
    )
    assert metrics["verifiers/reward/correct"] == 0.5
    assert metrics["verifiers/reward/well_formed"] == 1.0
    assert metrics["verifiers/metric/judged"] == 1.0


def test_recovered_errors_and_timeouts_are_counted_from_verifiers_verdicts():
    recovered = summary(recovered_errors=2)
    retried_episode = summary(episode_recovered_errors=1)
    timed_out = summary(0.0, is_timeout=True)
    metrics = trace_metrics([recovered, retried_episode, timed_out])
    assert metrics["verifiers/recovered_errors"] == 2.0
    assert metrics["verifiers/episode_recovered_errors"] == 1.0
    assert metrics["verifiers/timeout_rate"] == 1 / 3
    assert metrics["verifiers/error_rate"] == 0.0


def test_no_traces_give_no_metrics():
    assert trace_metrics([]) == {}


def test_sample_metrics_use_the_reward_miles_trains_on():
    samples = [
        Sample(reward={"reward": 1.0, "correct": 0.0}, response_length=4, loss_mask=[1, 1, 0, 0]),
        Sample(
            reward={"reward": 0.0, "correct": 1.0},
            response_length=2,
            loss_mask=[1, 1],
            status=Sample.Status.ABORTED,
        ),
    ]
    metrics = sample_metrics(samples, argparse.Namespace(reward_key="correct"))
    assert metrics == {
        "verifiers/sample_reward_mean": 0.5,
        "verifiers/response_length_mean": 3.0,
        "verifiers/loss_tokens_mean": 2.0,
        "verifiers/aborted_rate": 0.5,
    }


def test_drop_metrics_use_miles_dynamic_filter_keys_and_skip_zero_counts():
    assert drop_metrics({"trace_error": 2, "zero_std_1.0": 1, "empty_trace": 0}) == {
        "rollout/dynamic_filter/drop_trace_error": 2.0,
        "rollout/dynamic_filter/drop_zero_std_1.0": 1.0,
    }


def test_scheduling_metrics_count_replacements_and_carry_over():
    metrics = scheduling_metrics(first_batch=6, dispatched=9, accepted=4, dropped=3, carried_over=2)
    assert metrics == {
        "verifiers/groups_dispatched": 9.0,
        "verifiers/groups_accepted": 4.0,
        "verifiers/groups_dropped": 3.0,
        "verifiers/groups_replaced": 3.0,
        "verifiers/groups_carried_over": 2.0,
    }


def test_eval_metrics_carry_the_eval_prefix():
    metrics = with_eval_prefix(trace_metrics([summary()]))
    assert metrics and all(name.startswith("eval/verifiers/") for name in metrics)


def test_eval_prefix_is_not_doubled():
    assert with_eval_prefix({"eval/x": 1.0}) == {"eval/x": 1.0}


def test_train_and_eval_metrics_never_share_a_key():
    train = trace_metrics([summary()])
    assert not set(train) & set(with_eval_prefix(train))


def test_merge_refuses_a_metric_reported_twice():
    assert merge({"a": 1.0}, {"b": 2.0}) == {"a": 1.0, "b": 2.0}
    with pytest.raises(ValueError, match="'a'"):
        merge({"a": 1.0}, {"a": 2.0})


def test_errored_trace_counts_in_error_rate(task_data):
    trace = vf.Trace(task=vf.TraceTask(type="Task", data=task_data))
    trace.capture_error(vf.ProviderError("down"))
    assert trace_metrics([trace_record(trace)])["verifiers/error_rate"] == 1.0
