import pytest
import verifiers.v1 as vf

from miles_verifiers_testkit.harness.protocol import find_questions
from mv_tools import ToolConfig, ToolData, ToolTask, ToolTaskset
from mv_tools.calculator import Calculator
from tests.fixtures_env.fixture_env_support import conversation, reply, user

pytestmark = pytest.mark.anyio

DATA = ToolData(idx=0, prompt="Use the calculator tool to compute: What is 2 + 3?", answer="5")


def _tool_trace(*calls: int, final: str = "<answer>5</answer>") -> vf.Trace:
    """A rollout that makes ``len(calls)`` tool-call turns, then answers ``final``."""
    turns = [
        ([user(DATA.prompt)], reply(None, *(("calculator_add", {"a": 2, "b": 3}),) * calls[0]))
    ]
    for i, count in enumerate(calls[1:], start=1):
        results = [
            vf.ToolMessage(tool_call_id=f"call_{j}", content="5") for j in range(calls[i - 1])
        ]
        turns.append((results, reply(None, *(("calculator_add", {"a": 2, "b": 3}),) * count)))
    results = [vf.ToolMessage(tool_call_id=f"call_{j}", content="5") for j in range(calls[-1])]
    turns.append((results, reply(final)))
    return conversation(DATA, *turns)


async def test_calculator_add_sums_its_arguments():
    assert await Calculator(vf.ToolsetConfig()).add(a=2, b=3) == 5


def test_calculator_is_exposed_under_the_calculator_prefix():
    assert Calculator(vf.ToolsetConfig()).server_name == "calculator"


async def test_correct_checks_the_final_answer_after_the_tool_call():
    task = ToolTask(DATA)
    assert await task.correct(_tool_trace(1)) == 1.0
    assert await task.correct(_tool_trace(1, final="<answer>6</answer>")) == 0.0


async def test_tool_calls_counts_every_call_across_turns():
    task = ToolTask(DATA)
    assert await task.tool_calls(_tool_trace(1)) == 1.0
    assert await task.tool_calls(_tool_trace(2, 1)) == 3.0


async def test_tool_calls_is_zero_when_the_model_skips_the_tool():
    trace = conversation(DATA, ([user(DATA.prompt)], reply("<answer>5</answer>")))
    assert await ToolTask(DATA).tool_calls(trace) == 0.0


def test_prompts_ask_for_the_calculator_on_an_addition():
    for task in ToolTaskset(ToolConfig(id="mv-tools", num_tasks=8)).load():
        assert task.data.prompt.startswith("Use the calculator tool to compute: What is ")
        [question] = find_questions(task.data.prompt)
        assert question.op == "+" and task.data.answer == str(question.answer)
