import pytest
import verifiers.v1 as vf

from mv_compact import CompactConfig, CompactData, CompactTask, CompactTaskset
from tests.fixtures_env.fixture_env_support import commit, new_trace, reply, user

pytestmark = pytest.mark.anyio

DATA = CompactData(
    idx=0,
    system_prompt="S",
    prompt="What is 1 + 1?",
    followups=("What is 2 + 2?", "What is 3 + 3?"),
    answers=(2, 4, 6),
    answer="6",
)


def _compacted_trace(answers: list[str]) -> vf.Trace:
    """Two model turns in one context, then a compacted context for the third."""
    system = vf.SystemMessage(content="S")
    trace = new_trace(DATA)
    first = [system, user("What is 1 + 1?")]
    commit(trace, first, reply(answers[0]))
    second = [*first, reply(answers[0]), user("What is 2 + 2?")]
    commit(trace, second, reply(answers[1]))
    commit(
        trace,
        [system, user(f"notes: {answers[0]} {answers[1]}\n\nWhat is 3 + 3?")],
        reply(answers[2]),
    )
    return trace


async def test_correct_steps_scores_every_step_across_branches():
    trace = _compacted_trace(["<answer>2</answer>", "<answer>4</answer>", "<answer>6</answer>"])
    assert await CompactTask(DATA).correct_steps(trace) == 1.0


async def test_correct_steps_is_the_share_of_steps_answered_right():
    trace = _compacted_trace(["<answer>2</answer>", "<answer>5</answer>", "<answer>6</answer>"])
    assert await CompactTask(DATA).correct_steps(trace) == pytest.approx(2 / 3)


async def test_branches_metric_counts_the_trace_branches():
    trace = _compacted_trace(["a", "b", "c"])
    assert trace.num_branches == 2
    assert await CompactTask(DATA).branches(trace) == 2.0


def test_taskset_queues_steps_minus_one_followups():
    tasks = CompactTaskset(CompactConfig(id="mv-compact", num_tasks=3, steps=4)).load()
    assert len(tasks) == 3
    for task in tasks:
        assert len(task.data.followups) == 3 and len(task.data.answers) == 4


def test_steps_by_task_lengthens_only_the_named_tasks():
    config = CompactConfig(id="mv-compact", num_tasks=3, steps=2, steps_by_task={"1": 6})
    tasks = CompactTaskset(config).load()
    assert [len(task.data.answers) for task in tasks] == [2, 6, 2]


def test_steps_by_task_refuses_fewer_than_two_steps():
    with pytest.raises(ValueError, match="steps_by_task"):
        CompactConfig(id="mv-compact", steps_by_task={0: 1})


def test_compaction_needs_at_least_two_steps():
    with pytest.raises(ValueError, match="steps"):
        CompactConfig(id="mv-compact", steps=1)
