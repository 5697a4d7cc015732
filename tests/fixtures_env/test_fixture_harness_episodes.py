"""The fixture harness and tasksets running whole episodes through Verifiers' real rollout
machinery (interception server, trace graph, tool and user-simulator servers), with a
scripted model client standing in for the language model."""

import asyncio
from collections.abc import Awaitable, Iterator
from contextvars import ContextVar
from typing import Any

import pytest
import verifiers.v1 as vf
from mv_arith import ArithData, ArithTask

from miles_verifiers_testkit.harness import FixtureHarness, FixtureHarnessConfig
from miles_verifiers_testkit.harness.context import NOTES_HEADER
from tests.fixtures_env.fixture_env_support import (
    ScriptedClient,
    load_config,
    model_context,
    reply,
    run_episode,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _roles(messages) -> list[str]:
    return [m.role for m in messages]


async def test_single_turn_rollout_answers_and_completes():
    client = ScriptedClient()
    [trace] = await run_episode(load_config("mv_arith"), client)
    assert trace.error is None
    assert trace.stop_condition == "agent_completed"
    assert trace.rewards == {"correct": 1.0}
    assert [_roles(b.messages) for b in trace.branches] == [["system", "user", "assistant"]]
    assert _roles(client.prompts[0]) == ["system", "user"]


async def test_message_prompt_is_sent_as_given():
    data = ArithData(
        idx=0,
        system_prompt="S",
        prompt=[
            vf.UserMessage(content="Warm up."),
            vf.AssistantMessage(content="Ready."),
            vf.UserMessage(content="What is 2 + 5?"),
        ],
        answer="7",
    )
    client = ScriptedClient()
    harness = FixtureHarness(FixtureHarnessConfig(id="mv-arith"))
    rollout = vf.Rollout(ArithTask(data), harness, model_context(client), vf.SubprocessConfig())
    trace = await rollout.run()
    assert trace.error is None and trace.rewards == {"correct": 1.0}
    assert _roles(client.prompts[0]) == ["system", "user", "assistant", "user"]


async def test_followups_are_asked_one_per_turn_in_one_context_without_compaction():
    client = ScriptedClient()
    config = load_config("mv_compact", taskset={"steps": 3}, harness={"compact_every": None})
    [trace] = await run_episode(config, client)
    assert [len(p) for p in client.prompts] == [2, 4, 6]
    assert trace.num_branches == 1
    assert trace.rewards == {"correct_steps": 1.0}


async def test_compaction_restarts_the_context_with_notes_and_forks_the_trace():
    client = ScriptedClient()
    config = load_config("mv_compact", taskset={"steps": 4}, harness={"compact_every": 2})
    [trace] = await run_episode(config, client)
    assert [_roles(p) for p in client.prompts] == [
        ["system", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user"],
        ["system", "user", "assistant", "user"],
    ]
    notes = client.prompts[2][1].content
    assert notes.startswith(NOTES_HEADER)
    assert notes.endswith(trace.task.data.followups[1])
    assert trace.num_branches == 2
    assert trace.error is None and trace.rewards == {"correct_steps": 1.0}
    assert trace.metrics == {"branches": 2.0}


async def test_refused_model_call_ends_the_rollout_cleanly():
    client = ScriptedClient()
    [trace] = await run_episode(load_config("mv_compact", max_turns=1), client)
    assert trace.stop_condition == "max_turns"
    assert trace.error is None
    assert len(client.prompts) == 1


async def test_turn_budget_stops_a_runaway_conversation_with_an_error():
    client = ScriptedClient(lambda prompt, tools: reply(None, ("calculator_add", {"a": 1, "b": 1})))
    config = load_config("mv_arith", max_turns=None, harness={"max_turns": 3})
    [trace] = await run_episode(config, client)
    assert len(client.prompts) == 3
    assert trace.error.type == "HarnessError"
    assert "max_turns=3" in trace.error.message
    assert "unknown tool" in client.prompts[-1][-1].content


async def test_failed_model_call_is_not_retried_by_the_harness():
    client = ScriptedClient(fail_with=vf.ProviderError("engine unavailable", status_code=503))
    [trace] = await run_episode(load_config("mv_arith"), client)
    assert len(client.prompts) == 1
    assert trace.error.type == "ProviderError"


async def test_user_simulator_drives_every_round_then_stops_the_rollout():
    client = ScriptedClient()
    [trace] = await run_episode(load_config("mv_dialogue", taskset={"rounds": 3}), client)
    assert trace.error is None
    assert trace.stop_condition == "user_done"
    assert trace.num_turns == 3
    assert trace.rewards == {"correct_rounds": 1.0}
    assert trace.metrics == {"rounds": 3.0}
    [branch] = trace.branches
    assert _roles(branch.messages) == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_user_simulator_can_open_a_promptless_conversation():
    client = ScriptedClient()
    [trace] = await run_episode(
        load_config("mv_dialogue", taskset={"rounds": 2, "user_opens": True}), client
    )
    assert trace.error is None
    assert _roles(client.prompts[0]) == ["system", "user"]
    assert client.prompts[0][1].content == trace.task.data.questions[0]
    assert trace.stop_condition == "user_done"
    assert trace.rewards == {"correct_rounds": 1.0}


async def test_mcp_tool_call_runs_on_the_calculator_server():
    client = ScriptedClient()
    [trace] = await run_episode(load_config("mv_tools"), client)
    assert trace.error is None
    assert trace.rewards == {"correct": 1.0}
    assert trace.metrics == {"tool_calls": 1.0}
    [branch] = trace.branches
    assert _roles(branch.messages) == ["system", "user", "assistant", "tool", "assistant"]
    assert [t["function"]["name"] for t in client.offered_tools[0]] == ["calculator_add"]


async def test_group_episode_adds_agreement_to_each_rollout():
    [first, second] = await run_episode(load_config("mv_group"), ScriptedClient(), n=2)
    assert first.rewards == second.rewards == {"correct": 1.0, "agreement": 0.5}


def _faulty(fault: str) -> vf.EnvConfig:
    return load_config(
        "mv_faulty",
        taskset={"fault_rate": 1.0, "faults": [fault], "timeout_s": 0.5, "slow_step_s": 60.0},
    )


async def test_harness_error_fault_fails_the_rollout_after_its_conversation():
    [first, _] = await run_episode(_faulty("harness_error"), ScriptedClient(), n=2)
    assert first.error.type == "HarnessError"
    assert "injected fault harness_error" in first.error.message
    assert first.num_turns == 1


_conversation_over: ContextVar[asyncio.Event | None] = ContextVar(
    "_conversation_over", default=None
)


class _HarnessTimeoutAfterTheConversation:
    """Stands in for ``asyncio`` in Verifiers' rollout module: the harness timeout starts once
    the harness's conversation is over instead of with the harness.

    Verifiers counts a task's harness timeout from the harness's start, conversation included;
    on a loaded machine the conversation alone can outlast a short timeout, and the rollout then
    stops before its answer. Counted from the conversation's end, only the fault's slow step
    runs against the timeout, so which ends first no longer depends on the machine.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def wait_for(self, awaitable: Awaitable[Any], timeout: float | None) -> Any:
        if timeout is None or getattr(awaitable, "__name__", "") != "run":  # not Harness.run
            return await asyncio.wait_for(awaitable, timeout)
        over = asyncio.Event()
        token = _conversation_over.set(over)
        try:
            harness = asyncio.ensure_future(awaitable)  # runs with `over` in its context
        finally:
            _conversation_over.reset(token)
        conversation = asyncio.ensure_future(over.wait())
        try:
            await asyncio.wait({harness, conversation}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            conversation.cancel()
        return await asyncio.wait_for(harness, timeout)


@pytest.fixture
def harness_timeout_after_the_conversation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import verifiers.v1.rollout as rollout_module

    launch = FixtureHarness.launch
    marked: list[bool] = []

    async def launch_then_mark(self: FixtureHarness, *args: Any, **kwargs: Any) -> Any:
        result = await launch(self, *args, **kwargs)
        if (over := _conversation_over.get()) is not None:
            over.set()
            marked.append(True)
        return result

    monkeypatch.setattr(FixtureHarness, "launch", launch_then_mark)
    monkeypatch.setattr(rollout_module, "asyncio", _HarnessTimeoutAfterTheConversation())
    yield
    # Should Verifiers stop calling Harness.run under asyncio.wait_for, say so here rather
    # than let the test race the machine again.
    assert marked, "no harness timeout was counted from the conversation's end"


@pytest.mark.usefixtures("harness_timeout_after_the_conversation")
async def test_timeout_fault_stops_the_rollout_as_harness_timeout_and_still_scores_it():
    [first, _] = await run_episode(_faulty("timeout"), ScriptedClient(), n=2)
    assert first.error is None
    assert first.stop_condition == "harness_timeout"
    assert first.is_truncated
    assert first.rewards["correct"] == 1.0
