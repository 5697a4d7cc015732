import pytest
import verifiers.v1 as vf
from mv_arith import ArithConfig, ArithData, ArithTask, ArithTaskset

from miles_verifiers_testkit.harness.protocol import ANSWER_INSTRUCTIONS, find_questions
from tests.fixtures_env.fixture_env_support import conversation, reply, user

pytestmark = pytest.mark.anyio

DATA = ArithData(idx=0, prompt="What is 6 * 7?", answer="42")


def _scored_trace(text: str) -> vf.Trace:
    return conversation(DATA, ([user(DATA.prompt)], reply(text)))


async def _scored(text: str) -> vf.Trace:
    """The trace of a reply ``text`` to DATA, scored by its task."""
    trace = _scored_trace(text)
    await ArithTask(DATA).score(trace)
    return trace


async def test_correct_answer_scores_one():
    trace = await _scored("Six sevens. <answer>42</answer>")
    assert trace.rewards == {"correct": 1.0}
    assert trace.metrics == {"answered": 1.0}


async def test_wrong_answer_scores_zero_but_counts_as_answered():
    trace = await _scored("<answer>41</answer>")
    assert trace.rewards == {"correct": 0.0}
    assert trace.metrics == {"answered": 1.0}


async def test_reply_without_answer_tag_is_neither_correct_nor_answered():
    trace = await _scored("It is 42.")
    assert trace.rewards == {"correct": 0.0}
    assert trace.metrics == {"answered": 0.0}


async def test_only_the_last_answer_tag_counts():
    task = ArithTask(DATA)
    assert await task.correct(_scored_trace("<answer>42</answer> hmm, <answer>40</answer>")) == 0.0
    assert await task.correct(_scored_trace("<answer>40</answer> hmm, <answer>42</answer>")) == 1.0


def test_taskset_loads_num_tasks_protocol_questions_with_their_answers():
    tasks = ArithTaskset(ArithConfig(id="mv-arith", num_tasks=20, seed=3)).load()
    assert [t.data.idx for t in tasks] == list(range(20))
    for task in tasks:
        [question] = find_questions(task.data.prompt)
        assert task.data.prompt == question.text
        assert task.data.answer == str(question.answer)
        assert task.data.system_prompt == ANSWER_INSTRUCTIONS


def test_taskset_is_deterministic_per_seed():
    def prompts(seed):
        return [t.data.prompt for t in ArithTaskset(ArithConfig(id="mv-arith", seed=seed)).load()]

    assert prompts(1) == prompts(1)
    assert prompts(1) != prompts(2)


def test_num_tasks_must_be_positive():
    with pytest.raises(ValueError, match="num_tasks"):
        ArithConfig(id="mv-arith", num_tasks=0)
