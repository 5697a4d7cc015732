"""The Verifiers 0.4 episode worker's own logic, on stand-ins shaped like 0.4 objects.

Which runner a worker uses follows its Verifiers version; a 0.4 trace becomes the same record the
0.2.0 worker sends; a group that cannot be trained as it is comes back failed with a named
error; the transport loan is what the wrapped client resolution hands out. (Episodes against
the real 0.4.0 wheel run in ``tox -e verifiers04``.)
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from miles_verifiers.episodes.v02.episodes import Generation02
from miles_verifiers.episodes.v04.episodes import (
    EPISODE_ERROR,
    NOT_OK_ERROR,
    TRAINABLE_COUNT_ERROR,
    UNSCORED_ERROR,
    Generation04,
    judge_episodes,
    run_slots,
    trace_record04,
)
from miles_verifiers.episodes.v04.upstream import CallEndedError, TransportLoans, _hooked
from miles_verifiers.episodes.worker import WorkerHandler, generation_for
from miles_verifiers.errors import is_unsupported_request
from miles_verifiers.protocol.messages import GroupResult
from miles_verifiers.protocol.records import TraceRecord
from miles_verifiers.trainer.backends.pool import group_run
from miles_verifiers.trainer.training import UnsupportedRequestRunError, judge_group
from miles_verifiers.versions import WORKER_VERSIONS_04, check_versions, uses_slots_api

# -- stand-ins ----------------------------------------------------------------------------------


def node(tokens: list[int], mask: list[bool], logprobs: list[float]) -> Any:
    return SimpleNamespace(token_ids=tokens, mask=mask, logprobs=logprobs)


def branch(nodes: list[Any], *, trainable: bool = True) -> Any:
    token_ids = [t for n in nodes for t in n.token_ids]
    spread: list[float] = []
    for n in nodes:
        values = iter(n.logprobs)
        spread += [next(values) if m else 0.0 for m in n.mask]
    return SimpleNamespace(
        index=0, nodes=nodes, token_ids=token_ids, logprobs=spread, trainable=trainable
    )


def trace(
    *,
    ok: bool = True,
    rewards: dict[str, Any] | None = None,
    errors: list[Any] | None = None,
    agent: str = "agent",
    trainable: bool = True,
    trace_id: str = "t0",
    is_timeout: bool = False,
) -> Any:
    prompt = node([1, 2, 3], [False, False, False], [])
    reply = node([4, 5], [True, True], [-0.5, -0.25])
    rewards = {"correct": SimpleNamespace(score=1.0, weight=2.0)} if rewards is None else rewards
    errors = errors or []
    return SimpleNamespace(
        id=trace_id,
        task=SimpleNamespace(type="ArithTask", data=SimpleNamespace(idx=3, prompt="q", answer="7")),
        nodes=[prompt, reply],
        branches=[branch([prompt, reply])],
        rewards=rewards,
        metrics={"answered": 1.0, "skipped": None},
        reward=sum(r.score * r.weight for r in rewards.values() if r is not None),
        num_turns=1,
        num_output_tokens=2,
        num_total_tokens=5,
        stop_condition="agent_completed" if ok else "provider_error",
        is_truncated=False,
        last_reply="<answer>7</answer>",
        errors=errors,
        last_error=errors[-1] if errors else None,
        ok=ok,
        is_timeout=is_timeout,
        agent=SimpleNamespace(name=agent, trainable=trainable),
    )


def error(kind: str = "ProviderError", message: str = "boom") -> Any:
    return SimpleNamespace(type=kind, message=message, traceback=None)


def episode(
    *traces: Any, ok: bool = True, errors: list[Any] | None = None, is_timeout: bool = False
) -> Any:
    """An episode with Verifiers' stamps as given (the test says what Verifiers decided)."""
    return SimpleNamespace(
        traces=list(traces),
        ok=ok,
        errors=errors or [],
        is_timeout=is_timeout,
        task=SimpleNamespace(data=SimpleNamespace(idx=3)),
    )


# -- which runner -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.3.0", "0.3.1", "0.4.0", "0.4.1.dev3", "1.0"])
def test_verifiers_from_0_3_uses_the_slots_api(version):
    assert uses_slots_api(version)


@pytest.mark.parametrize("version", ["0.2.0", "0.2.1", "not-a-version", None])
def test_verifiers_0_2_or_unknown_keeps_the_0_2_path(version):
    assert not uses_slots_api(version)


def test_the_0_4_worker_stack_passes_its_gate():
    found = {"verifiers": "0.4.0", "renderers": "0.1.12", "mcp": "2.0.0"}
    assert check_versions(found, WORKER_VERSIONS_04) == []


@pytest.mark.parametrize("verifiers", ["0.3.1", "0.4.1", "0.5.0"])
def test_the_0_4_worker_refuses_other_verifiers_with_the_reason(verifiers):
    found = {"verifiers": verifiers, "renderers": "0.1.12", "mcp": "2.0.0"}
    [problem] = check_versions(found, WORKER_VERSIONS_04)
    assert problem.distribution == "verifiers" and "0.4.0" in problem.reason


def test_a_0_4_trainer_side_process_is_still_refused_by_the_in_process_gate():
    found = {"verifiers": "0.4.0", "renderers": "0.1.12", "mcp": "2.0.0"}
    problems = check_versions(found)
    assert "verifiers" in {p.distribution for p in problems}
    [verifiers] = [p for p in problems if p.distribution == "verifiers"]
    assert "MILES_VERIFIERS_EPISODE_WORKER_PYTHON" in verifiers.fix


def test_a_worker_on_verifiers_0_4_runs_the_slots_generation():
    assert isinstance(generation_for("0.4.0"), Generation04)


def test_a_worker_on_verifiers_0_2_runs_its_own_generation():
    assert isinstance(generation_for("0.2.0"), Generation02)
    assert isinstance(WorkerHandler()._generation, Generation02)  # this environment has 0.2.0


# -- traces to records --------------------------------------------------------------------------


def test_a_0_4_trace_becomes_the_record_the_trainer_reads():
    record = trace_record04(trace())
    [only] = record.branches
    assert only.token_ids == [1, 2, 3, 4, 5]
    assert [m for n in only.nodes for m in n.mask] == [False, False, False, True, True]
    assert only.logprobs == [0.0, 0.0, 0.0, -0.5, -0.25]
    assert only.num_turns == 1  # sampled nodes (0.4 has no Branch.num_turns)
    assert record.rewards == {"correct": 1.0} and record.reward == 2.0
    assert record.metrics == {"answered": 1.0}  # unscored metrics are left out
    assert record.ok
    assert record.error is None and record.unscored == []


def test_the_record_survives_the_protocol_as_the_trainer_reads_it():
    record = TraceRecord.model_validate_json(trace_record04(trace()).model_dump_json())
    assert record.branches[0].sampled_mask == [False, False, False, True, True]
    assert not record.failed and record.reward == 2.0


def test_a_trace_not_ok_without_an_error_still_carries_one():
    record = trace_record04(trace(ok=False))
    assert record.error is not None and record.error.type == NOT_OK_ERROR
    assert record.failed


def test_a_recorded_error_is_the_latest_one():
    record = trace_record04(trace(ok=False, errors=[error("A"), error("ProviderError", "late")]))
    assert record.error is not None
    assert (record.error.type, record.error.message) == ("ProviderError", "late")


def test_unscored_rewards_are_named_and_left_out_of_the_total():
    record = trace_record04(trace(rewards={"correct": None}))
    assert record.unscored == ["correct"] and record.rewards == {} and record.reward == 0.0


def test_the_branch_trainable_flag_is_kept():
    t = trace()
    t.branches = [branch(t.nodes, trainable=False)]
    assert trace_record04(t).branches[0].trainable is False


# -- a group's verdict --------------------------------------------------------------------------


def test_one_trainable_trace_per_slot_is_a_clean_group():
    run = judge_episodes([episode(trace(trace_id="a")), episode(trace(trace_id="b"))])
    assert run.failure is None and [r.id for r in run.traces] == ["a", "b"]


def test_untrainable_agents_traces_are_not_sent():
    user = trace(agent="user", trainable=False, trace_id="u")
    run = judge_episodes([episode(user, trace(trace_id="a"))])
    assert run.failure is None and [r.id for r in run.traces] == ["a"]


def test_a_rollout_with_several_trainable_traces_stops_the_training_call_naming_the_fix():
    run = judge_episodes([episode(trace(trace_id="a"), trace(trace_id="b"))])
    assert run.error is not None and run.error.type == TRAINABLE_COUNT_ERROR
    relayed = group_run(GroupResult(traces=list(run.traces), failure=run.failure, error=run.error))

    with pytest.raises(UnsupportedRequestRunError) as caught:
        asyncio.run(judge_group(relayed, 0, SimpleNamespace(), None, None))

    assert "yielded 2 traces of trainable agents" in str(caught.value)
    assert "untrainable" in str(caught.value)


def test_a_rollout_with_no_trainable_trace_fails_its_group_by_name():
    run = judge_episodes([episode(trace(trainable=False))])
    assert run.failure == "episode_error"
    assert run.error is not None and run.error.type == TRAINABLE_COUNT_ERROR
    assert not is_unsupported_request(run.error)


def test_a_clean_trace_with_an_unscored_reward_carries_its_rollouts_failure_by_name():
    run = judge_episodes([episode(trace(rewards={"correct": None}))])
    [record] = run.traces
    assert record.episode_error is not None and record.episode_error.type == UNSCORED_ERROR


def test_an_errored_trace_with_unscored_rewards_is_left_to_the_trace_error_drop():
    failed = trace(ok=False, rewards={"correct": None}, errors=[error()])
    run = judge_episodes([episode(failed, ok=False)])
    [record] = run.traces
    assert run.failure is None and record.failed and record.episode_error is None


def test_an_episode_hook_failure_is_its_rollouts_episode_error():
    hook = error("EnvError", "finalize raised")
    run = judge_episodes([episode(trace(), ok=False, errors=[hook])])
    [record] = run.traces
    assert record.episode_error is not None and record.episode_error.type == EPISODE_ERROR
    assert "finalize raised" in record.episode_error.message


def test_an_episode_past_its_own_deadline_is_a_timeout():
    timeout = error("TimeoutError")
    run = judge_episodes([episode(trace(), ok=False, errors=[timeout], is_timeout=True)])
    [record] = run.traces
    assert record.episode_error is not None and record.episode_error.timeout


# -- Verifiers' verdicts, read and not inferred --------------------------------------------------


def test_a_trace_that_recovered_under_retries_is_ok_and_counts_its_errors():
    recovered = trace(errors=[error("HarnessError", "attempt 1"), error("HarnessError", "2")])
    record = trace_record04(recovered)
    assert not record.failed and record.recovered_errors == 2


def test_a_recovered_trace_trains():
    recovered = trace(errors=[error("HarnessError", "attempt 1")])
    run = judge_episodes([episode(recovered, errors=[])])
    [record] = run.traces
    assert run.failure is None and not record.rollout_failed


def test_an_episode_that_recovered_under_retries_trains_and_counts_its_errors():
    run = judge_episodes([episode(trace(), ok=True, errors=[error("EnvError", "first try")])])
    [record] = run.traces
    assert record.episode_error is None and record.episode_recovered_errors == 1


def test_a_failed_untrainable_seat_fails_the_episode_naming_the_seat():
    simulator = trace(agent="quiz_master", trainable=False, ok=False, errors=[error("Crash", "x")])
    run = judge_episodes([episode(simulator, trace(agent="assistant"), ok=False)])
    [record] = run.traces
    assert not record.failed  # the trainable trace itself closed normally
    assert record.episode_error is not None and record.episode_error.seat == "quiz_master"
    assert (
        "quiz_master" in record.episode_error.message and "Crash: x" in record.episode_error.message
    )


def test_an_episode_not_ok_is_failed_even_with_no_error_recorded():
    run = judge_episodes([episode(trace(), ok=False)])
    [record] = run.traces
    assert record.episode_error is not None


def test_a_timed_out_agent_stays_ok_and_is_marked_a_timeout():
    record = trace_record04(trace(is_timeout=True))
    assert not record.failed and record.is_timeout


def test_each_slot_carries_only_its_own_episodes_verdict():
    simulator = trace(agent="quiz_master", trainable=False, ok=False, errors=[error()])
    failing = episode(simulator, trace(trace_id="a"), ok=False)
    healthy = episode(trace(trace_id="b"))
    run = judge_episodes([failing, healthy])
    first, second = run.traces
    assert (first.rollout, second.rollout) == (0, 1)
    assert first.episode_error is not None and second.episode_error is None


def test_a_failed_seat_drops_the_training_group_as_an_episode_error_naming_the_seat():
    simulator = trace(agent="quiz_master", trainable=False, ok=False, errors=[error("Crash", "x")])
    run = judge_episodes([episode(simulator, trace(agent="assistant"), ok=False)])
    relayed = group_run(GroupResult(traces=list(run.traces), failure=run.failure, error=run.error))

    judged = asyncio.run(judge_group(relayed, 0, SimpleNamespace(), None, None))

    assert judged.reason == "episode_error"
    assert judged.example_error is not None and "quiz_master" in judged.example_error


class _SlotsEnv:
    """An environment whose slot 0 finishes at once and whose slot 1 never does."""

    def slots(self, task: Any, n: int) -> list[Any]:
        return [SimpleNamespace(traces=[]) for _ in range(n)]

    async def run_slot(self, slot: Any, context: Any, semaphore: Any) -> Any:
        if context == "slow":
            slot.traces.append(trace(trace_id="late"))
            await asyncio.sleep(3600)
        return episode(trace(trace_id="fast"))


def test_a_slot_past_the_deadline_times_out_alone():
    task = SimpleNamespace(data=SimpleNamespace(idx=3))

    run = asyncio.run(
        run_slots(_SlotsEnv(), task, ["fast", "slow"], semaphore=None, deadline_s=0.2)
    )

    fast, late = run.traces
    assert (fast.id, fast.episode_error) == ("fast", None)
    assert late.id == "late" and late.episode_error is not None and late.episode_error.timeout


# -- the transport loan -------------------------------------------------------------------------


class _Transport:
    base_url = "http://engine/v1"

    def __init__(self) -> None:
        self.posts: list[str] = []
        self.closed = False

    async def get(self, path: str, **_: Any) -> Any:
        return {"path": path}

    async def post(self, path: str, **_: Any) -> Any:
        self.posts.append(path)
        return "answer"

    async def close(self) -> None:
        self.closed = True


def _client_for(config: Any) -> Any:
    return SimpleNamespace(client="AsyncOpenAI", config=config)


def test_a_lent_call_gets_its_transport_and_other_configs_are_untouched():
    loans = TransportLoans()
    transport = _Transport()
    url, _ = loans.lend("call-1", transport)
    resolve = _hooked(_client_for, loans)
    ours = resolve(SimpleNamespace(base_url=url))
    theirs = resolve(SimpleNamespace(base_url="https://judge.example/v1"))
    assert asyncio.run(ours.client.post("/inference/v1/generate")) == "answer"
    assert transport.posts == ["/inference/v1/generate"]
    assert theirs.client == "AsyncOpenAI"


def test_the_marker_address_is_a_loopback_port():
    assert TransportLoans.marker("c").startswith("http://127.0.0.1:")


def test_closing_the_client_leaves_the_calls_transport_open():
    loans = TransportLoans()
    transport = _Transport()
    _, lent = loans.lend("call-1", transport)
    asyncio.run(lent.close())
    assert not transport.closed


def test_nothing_is_sent_once_the_call_has_taken_its_transport_back():
    loans = TransportLoans()
    transport = _Transport()
    url, lent = loans.lend("call-1", transport)
    loans.take_back("call-1")
    assert loans.find(url) is None
    with pytest.raises(CallEndedError):
        asyncio.run(lent.post("/inference/v1/generate"))
    assert transport.posts == []
