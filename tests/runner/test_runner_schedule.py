"""The order of rollout and eval calls follows Miles' training loop."""

from __future__ import annotations

import pytest

from miles_verifiers.cli.schedule import PlannedCall, ScheduleError, plan_calls
from miles_verifiers_testkit.runner.resume import ResumePoint, resume_point


def _kinds(calls: list[PlannedCall]) -> list[tuple[str, int]]:
    return [(c.kind, c.rollout_id) for c in calls]


def test_training_only_runs_one_call_per_rollout_id():
    calls = plan_calls(num_rollout=3, start_rollout_id=None, eval_interval=None)
    assert _kinds(calls) == [("train", 0), ("train", 1), ("train", 2)]


def test_eval_runs_before_training_and_every_interval():
    calls = plan_calls(num_rollout=4, start_rollout_id=None, eval_interval=2)
    assert _kinds(calls) == [
        ("eval", 0), ("train", 0), ("train", 1), ("eval", 1), ("train", 2), ("train", 3), ("eval", 3),
    ]  # fmt: skip


def test_skip_eval_before_train_drops_the_first_eval():
    calls = plan_calls(
        num_rollout=3, start_rollout_id=None, eval_interval=3, skip_eval_before_train=True
    )
    assert _kinds(calls) == [("train", 0), ("train", 1), ("train", 2), ("eval", 2)]


def test_start_rollout_id_skips_earlier_ids():
    calls = plan_calls(num_rollout=3, start_rollout_id=1, eval_interval=None)
    assert _kinds(calls) == [("train", 1), ("train", 2)]


def test_zero_rollouts_with_an_eval_interval_is_an_eval_only_run():
    assert _kinds(plan_calls(num_rollout=0, start_rollout_id=None, eval_interval=5)) == [
        ("eval", 0)
    ]


def test_missing_num_rollout_is_refused_with_the_flag():
    with pytest.raises(ScheduleError, match="--num-rollout"):
        plan_calls(num_rollout=None, start_rollout_id=None, eval_interval=None)


def test_zero_rollouts_without_eval_is_refused():
    with pytest.raises(ScheduleError, match="runs nothing"):
        plan_calls(num_rollout=0, start_rollout_id=None, eval_interval=None)


def test_a_start_id_past_the_end_is_refused():
    with pytest.raises(ScheduleError, match="--start-rollout-id"):
        plan_calls(num_rollout=2, start_rollout_id=2, eval_interval=None)


def test_a_zero_eval_interval_is_refused():
    with pytest.raises(ScheduleError, match="--eval-interval"):
        plan_calls(num_rollout=2, start_rollout_id=None, eval_interval=0)


def test_a_run_cut_after_a_training_call_resumes_at_the_next_rollout_without_an_eval_first():
    calls = plan_calls(num_rollout=4, start_rollout_id=None, eval_interval=2)
    # eval 0, train 0, train 1, eval 1, train 2, train 3, eval 3
    assert resume_point(calls, 2) == ResumePoint(start_rollout_id=1, evaluate_first=False)
    assert resume_point(calls, 3) == ResumePoint(start_rollout_id=2, evaluate_first=True)
    assert resume_point(calls, 4) == ResumePoint(start_rollout_id=2, evaluate_first=False)


def test_a_run_missing_only_its_final_evaluation_has_no_resume_point():
    calls = plan_calls(num_rollout=2, start_rollout_id=None, eval_interval=2)
    assert resume_point(calls, len(calls) - 1) is None
