import pytest
import verifiers.v1 as vf
from mv_group import GroupConfig, GroupData, GroupTask, GroupTaskset

from tests.fixtures_env.fixture_env_support import conversation, reply, user

pytestmark = pytest.mark.anyio

DATA = GroupData(idx=0, prompt="What is 20 + 22?", label="42")


def _trace(text: str) -> vf.Trace:
    return conversation(DATA, ([user(DATA.prompt)], reply(text)))


async def test_correct_compares_the_answer_with_the_label():
    task = GroupTask(DATA)
    assert await task.correct(_trace("<answer>42</answer>")) == 1.0
    assert await task.correct(_trace("<answer>24</answer>")) == 0.0


async def test_agreement_pays_the_share_of_peers_with_the_same_answer():
    traces = [
        _trace("<answer>42</answer>"),
        _trace("<answer>42</answer>"),
        _trace("<answer>41</answer>"),
        _trace("no idea"),
    ]
    assert await GroupTask(DATA).agreement(traces) == [1 / 3, 1 / 3, 0.0, 0.0]


async def test_group_scoring_records_agreement_at_half_weight():
    traces = [_trace("<answer>42</answer>"), _trace("<answer>42</answer>")]
    await GroupTask(DATA).score_group(traces)
    assert [t.rewards for t in traces] == [{"agreement": 0.5}, {"agreement": 0.5}]


def test_taskset_tasks_carry_a_label():
    tasks = GroupTaskset(GroupConfig(id="mv-group", num_tasks=5)).load()
    assert len(tasks) == 5
    assert all(t.data.label.isdigit() for t in tasks)
