"""Evaluation entries are judged rollout by rollout, from each rollout's own trace record."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from miles_verifiers.errors import UNSUPPORTED_REQUEST_CODE, tag_with_code
from miles_verifiers.protocol.records import (
    EpisodeErrorRecord,
    ErrorRecord,
    TraceRecord,
    trace_record,
)
from miles_verifiers.trainer.evaluation import EvalSetup, evaluate, group_entries
from miles_verifiers.trainer.groups import GroupRun
from miles_verifiers.trainer.hooks import MilesHooks
from miles_verifiers.trainer.training import UnsupportedRequestRunError
from miles_verifiers_testkit.miles.contract import Sample


@pytest.fixture
def record(single_turn_trace) -> TraceRecord:
    return trace_record(single_turn_trace)


def setup_for(record: TraceRecord, n: int) -> EvalSetup:
    return EvalSetup(
        tasks=[record.task],
        n_samples_per_eval_prompt=n,
        reward_key=None,
        max_groups_in_flight=1,
        env_id="env",
        hooks=MilesHooks(),
        sample_cls=Sample,
    )


def entries_of(records: list[TraceRecord], n: int, **run: object) -> list:
    return group_entries(
        GroupRun(tuple(records), **run), records[0].task, 0, setup_for(records[0], n), None
    )


def at(record: TraceRecord, rollout: int, **update: object) -> TraceRecord:
    return record.model_copy(update={"rollout": rollout, "id": f"t{rollout}", **update})


SEAT_FAILED = EpisodeErrorRecord(type="EpisodeError", message="seat 'judge' failed", seat="judge")


def test_a_rollout_whose_episode_failed_fails_its_own_entry_only(record):
    entries = entries_of([at(record, 0, episode_error=SEAT_FAILED), at(record, 1)], 2)

    assert [e.failed for e in entries] == [True, False]
    assert entries[0].sample.status is Sample.Status.FAILED
    assert "judge" in entries[0].sample.metadata["verifiers"]["episode_error"]
    assert entries[1].sample.status is Sample.Status.COMPLETED
    assert entries[1].sample.reward == record.reward


def test_a_failed_rollout_before_a_healthy_one_leaves_it_its_trace(record):
    failed = at(record, 0, ok=False, error=ErrorRecord(type="HarnessError", message="exit 3"))

    entries = entries_of([failed, at(record, 1)], 2)

    assert not entries[1].empty and entries[1].trace is not None
    assert entries[1].trace.id == "t1"


def test_entries_follow_the_rollout_each_record_names(record):
    entries = entries_of([at(record, 1), at(record, 0, episode_error=SEAT_FAILED)], 2)

    assert [e.trace.id for e in entries] == ["t0", "t1"]
    assert [e.failed for e in entries] == [True, False]


def test_a_rollout_with_no_record_is_failed_with_the_groups_error(record):
    error = EpisodeErrorRecord(type="TrainableTraceCountError", message="no trainable trace")
    entries = entries_of([at(record, 0)], 2, failure="episode_error", error=error)

    assert [e.failed for e in entries] == [False, True]
    assert entries[1].empty and entries[1].sample.status is Sample.Status.FAILED


def test_a_recovered_rollout_is_a_healthy_entry(record):
    recovered = at(
        record,
        0,
        ok=True,
        error=ErrorRecord(type="HarnessError", message="retried"),
        recovered_errors=1,
    )

    [entry] = entries_of([recovered], 1)

    assert not entry.failed and entry.sample.status is Sample.Status.COMPLETED


class _RefusingRunner:
    """Every group comes back refused as a request the token path cannot serve."""

    async def run(self, slot: int, task_index: int) -> GroupRun:
        message = tag_with_code(UNSUPPORTED_REQUEST_CODE, "rollout 0 yielded 2 trainable traces")
        error = EpisodeErrorRecord(type="TrainableTraceCountError", message=message)
        return GroupRun((), "episode_error", error)


def test_a_refusal_every_episode_would_repeat_stops_the_evaluation(record):
    scope = SimpleNamespace(spawn=asyncio.ensure_future, run=_RefusingRunner().run)

    async def run() -> None:
        await evaluate(scope, setup_for(record, 2), None, weight_version=None)

    with pytest.raises(UnsupportedRequestRunError, match="2 trainable traces"):
        asyncio.run(run())


def test_a_rollout_stopped_by_its_agent_timeout_before_any_turn_is_a_truncated_entry(record):
    timed_out = at(record, 0, ok=True, is_timeout=True, branches=[], stop_condition="agent_timeout")

    [entry] = entries_of([timed_out], 1)

    assert entry.empty and not entry.failed
    assert entry.sample.status is Sample.Status.TRUNCATED
