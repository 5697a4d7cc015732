from collections import Counter

import pytest
import verifiers.v1 as vf
from mv_faulty import (
    FAULT_KINDS,
    FaultyConfig,
    FaultyData,
    FaultyTask,
    FaultyTaskset,
    InjectedFault,
    assign_faults,
)

from tests.fixtures_env.fixture_env_support import conversation, reply, user

pytestmark = pytest.mark.anyio


def _data(fault=None) -> FaultyData:
    return FaultyData(idx=3, prompt="What is 2 + 2?", answer="4", fault=fault)


def _trace(data: FaultyData, text: str = "<answer>4</answer>") -> vf.Trace:
    return conversation(data, ([user(data.prompt)], reply(text)))


async def test_healthy_task_scores_normally():
    data = _data()
    task = FaultyTask(data)
    assert await task.correct(_trace(data)) == 1.0
    assert await task.agreement([_trace(data), _trace(data, "<answer>5</answer>")]) == [0.0, 0.0]


async def test_reward_error_task_raises_from_its_reward():
    data = _data("reward_error")
    with pytest.raises(InjectedFault, match="reward_error.*task 3"):
        await FaultyTask(data).correct(_trace(data))


async def test_reward_error_leaves_the_trace_without_rewards():
    data = _data("reward_error")
    trace = _trace(data)
    with pytest.raises(vf.TaskError, match="injected fault reward_error"):
        await FaultyTask(data).score(trace)
    assert trace.rewards == {}


async def test_group_reward_error_task_raises_from_its_group_reward():
    data = _data("group_reward_error")
    with pytest.raises(vf.TaskError, match="group_reward_error"):
        await FaultyTask(data).score_group([_trace(data), _trace(data)])


async def test_group_reward_error_task_still_scores_per_rollout():
    data = _data("group_reward_error")
    assert await FaultyTask(data).correct(_trace(data)) == 1.0


def test_fault_rate_picks_that_share_of_tasks_with_kinds_dealt_round_robin():
    faults = assign_faults(FaultyConfig(id="mv-faulty", num_tasks=16, fault_rate=0.5))
    counts = Counter(faults)
    assert counts[None] == 8
    assert all(counts[kind] == 2 for kind in FAULT_KINDS)


def test_fault_selection_is_seeded():
    def faults(seed):
        return assign_faults(FaultyConfig(id="mv-faulty", num_tasks=32, seed=seed))

    assert faults(5) == faults(5)
    assert faults(5) != faults(6)


@pytest.mark.parametrize(("rate", "faulty"), [(0.0, 0), (1.0, 10)])
def test_fault_rate_bounds_give_no_or_all_faulty_tasks(rate, faulty):
    faults = assign_faults(FaultyConfig(id="mv-faulty", num_tasks=10, fault_rate=rate))
    assert sum(f is not None for f in faults) == faulty


def test_faults_knob_limits_the_kinds():
    faults = assign_faults(
        FaultyConfig(id="mv-faulty", num_tasks=10, fault_rate=1.0, faults=["timeout"])
    )
    assert set(faults) == {"timeout"}


def test_only_timeout_tasks_carry_a_harness_timeout_and_a_slow_step():
    config = FaultyConfig(id="mv-faulty", num_tasks=16, timeout_s=0.5, slow_step_s=3.0)
    for task in FaultyTaskset(config).load():
        slow = task.data.fault == "timeout"
        assert task.data.timeout.harness == (0.5 if slow else None)
        assert task.data.slow_step_s == (3.0 if slow else 0.0)


def test_slow_step_must_outlast_the_timeout():
    with pytest.raises(ValueError, match="slow_step_s.*greater than.*timeout_s"):
        FaultyConfig(id="mv-faulty", timeout_s=5.0, slow_step_s=5.0)


def test_unknown_fault_kind_is_rejected():
    with pytest.raises(ValueError, match="faults"):
        FaultyConfig(id="mv-faulty", faults=["segfault"])
