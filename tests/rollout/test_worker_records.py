"""A trace record that crossed the worker protocol converts to exactly the sample the record
made in this process does: the backends differ only in where the record is made.

Real episodes of the fixture tasksets run in this process; each record is then sent the way a
worker sends it and read back, and both go through conversion, evaluation entries and
metrics."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from miles_verifiers.protocol.messages import GroupResult, Reply, read_reply
from miles_verifiers.protocol.records import TraceRecord
from miles_verifiers.trainer.conversion import trace_to_sample
from miles_verifiers.trainer.evaluation import group_entries
from miles_verifiers.trainer.metrics import trace_metrics
from miles_verifiers_testkit.engine import FaultPlan
from tests.rollout.rollout_support import (
    MilesLoop,
    Rollouts,
    miles_args,
)

pytestmark = pytest.mark.slow


def real_groups(fn: Any, miles_loop: MilesLoop, count: int) -> list[Any]:
    """``count`` groups run in this process."""

    async def run() -> list[Any]:
        async with fn._scope("eval") as scope:
            return [await scope.run(slot, slot) for slot in range(count)]

    return miles_loop.run(run(), timeout_s=120)


def through_the_wire(trace: TraceRecord) -> TraceRecord:
    reply = Reply(id=1, body=GroupResult(traces=[trace]))
    body = read_reply(reply.model_dump_json().encode()).body
    assert isinstance(body, GroupResult)
    return body.traces[0]


def as_dict(sample: Any) -> dict[str, Any]:
    return dataclasses.asdict(sample) if dataclasses.is_dataclass(sample) else dict(vars(sample))


@pytest.mark.parametrize("taskset", ["mv_arith", "mv_tools", "mv_dialogue"])
def test_a_record_from_a_worker_converts_to_exactly_the_sample_of_one_made_here(
    taskset: str,
    rollouts: Rollouts,
) -> None:
    config = rollouts.config(taskset, taskset={"num_tasks": 2})
    # Each trace is checked alone: one per group (mv-tools and mv-dialogue start a process per
    # rollout, seconds of CPU each).
    fn = rollouts.build(miles_args(eval_interval=1, n_samples_per_eval_prompt=1), config)
    runs = real_groups(fn, rollouts.loop, 2)
    traces = [t for r in runs for t in r.traces]
    assert traces and all(t.branches for t in traces)

    assert any(t.prefix_cache is not None for t in traces)
    for position, trace in enumerate(traces):
        sent = through_the_wire(trace)
        options = {"group_index": 0, "index": position, "weight_version": 3}
        for reward_key in (None, "reward"):
            real = trace_to_sample(trace, reward_key=reward_key, **options)
            again = trace_to_sample(sent, reward_key=reward_key, **options)
            assert as_dict(again) == as_dict(real)
        assert trace_metrics([sent]) == trace_metrics([trace])


def test_a_record_of_a_failed_trace_from_a_worker_gives_the_same_evaluation_entries(
    rollouts: Rollouts,
) -> None:
    from miles_verifiers.trainer.groups import GroupRun

    config = rollouts.config("mv_arith", taskset={"num_tasks": 1})
    fn = rollouts.build(miles_args(eval_interval=1, n_samples_per_eval_prompt=2), config)
    rollouts.engine.reset(faults=FaultPlan.always("abort"))
    runs = real_groups(fn, rollouts.loop, 1)
    rollouts.engine.reset()
    real = runs[0]
    assert any(t.failed for t in real.traces)
    sent = GroupRun(tuple(through_the_wire(t) for t in real.traces))
    task = fn._eval.tasks[0]

    expected = group_entries(real, task, 0, fn._eval, 1)
    got = group_entries(sent, task, 0, fn._eval, 1)

    assert [as_dict(e.sample) for e in got] == [as_dict(e.sample) for e in expected]
    assert [(e.failed, e.empty) for e in got] == [(e.failed, e.empty) for e in expected]
