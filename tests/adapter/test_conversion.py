"""Verifiers traces (built with verifiers' own graph code), recorded as the episode side
records them, to Miles samples."""

from __future__ import annotations

import dataclasses

import pytest
import verifiers.v1 as vf

from miles_verifiers.protocol.records import ErrorRecord, trace_record
from miles_verifiers.trainer.conversion import (
    MissingLogprobsError,
    MultipleBranchesError,
    RewardKeyError,
    TokenMetadataMismatchError,
    convert_group,
    trace_to_sample,
)
from miles_verifiers_testkit.miles.contract import Sample


def convert(trace, **kwargs) -> Sample:
    kwargs.setdefault("group_index", 0)
    kwargs.setdefault("index", 0)
    return trace_to_sample(trace_record(trace), **kwargs)


def convert_traces(traces, **kwargs):
    return convert_group([trace_record(t) for t in traces], **kwargs)


# -- tokens, mask and log-probs -------------------------------------------------------------------


def test_single_turn_splits_at_the_first_sampled_token(single_turn_trace):
    sample = convert(single_turn_trace)
    assert sample.tokens == [11, 12, 13, 14, 15, 16, 21, 22, 23]
    assert sample.response_length == 3
    assert sample.loss_mask == [1, 1, 1]
    assert sample.rollout_log_probs == pytest.approx([-0.5, -0.51, -0.52])


def test_multi_turn_masks_tool_and_scaffold_tokens_of_later_turns(two_turn_trace):
    sample = convert(two_turn_trace)
    assert sample.tokens == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31, 32]
    assert sample.response_length == 8
    assert sample.loss_mask == [1, 1, 0, 0, 0, 0, 1, 1]
    assert sample.rollout_log_probs == pytest.approx([-0.5, -0.51, 0, 0, 0, 0, -0.5, -0.51])
    assert sample.effective_response_length == 4


def test_sample_passes_validate(two_turn_trace):
    convert(two_turn_trace).validate()


def test_branch_without_sampled_tokens_has_an_empty_response(task_data, build_trace):
    builder = build_trace(task_data).turn(
        [vf.UserMessage(content="hi")], "", prompt_ids=[1, 2, 3], completion_ids=[], spans=[(0, 2)]
    )
    sample = convert(builder.trace)
    assert (sample.response_length, sample.loss_mask, sample.rollout_log_probs) == (0, [], [])
    assert sample.tokens == [1, 2, 3]


def test_sampled_tokens_without_logprobs_are_refused(single_turn_trace):
    assistant = single_turn_trace.nodes[-1]
    assistant.logprobs = assistant.logprobs[:1]
    with pytest.raises(MissingLogprobsError, match="3 sampled tokens but 1 log-probs"):
        convert(single_turn_trace)


def test_mask_and_tokens_of_different_length_are_refused(single_turn_trace):
    single_turn_trace.nodes[0].mask = [False]
    with pytest.raises(TokenMetadataMismatchError, match=single_turn_trace.id):
        convert(single_turn_trace)


# -- branches -------------------------------------------------------------------------------------


def test_trace_without_branches_signals_an_empty_trace(task_data):
    trace = vf.Trace(task=vf.TraceTask(type="Task", data=task_data))
    trace.stop("context_length")
    assert convert(trace) is None


def test_several_branches_raise_naming_trace_count_and_cause(task_data, build_trace):
    # A compacting harness: every turn sends a fresh [user(notes)] prompt, so each commit
    # starts a new root and the trace ends with one leaf per turn.
    builder = build_trace(task_data)
    builder.turn(
        [vf.UserMessage(content="notes 1")],
        "a",
        prompt_ids=[1, 2],
        completion_ids=[3],
        spans=[(0, 1)],
    )
    builder.turn(
        [vf.UserMessage(content="notes 2")],
        "b",
        prompt_ids=[4, 5],
        completion_ids=[6],
        spans=[(0, 1)],
    )
    assert builder.trace.num_branches == 2
    with pytest.raises(MultipleBranchesError) as caught:
        convert(builder.trace)
    assert (caught.value.trace_id, caught.value.branch_count) == (builder.trace.id, 2)
    message = str(caught.value)
    assert builder.trace.id in message and "2 branches" in message
    assert "compact" in message and "<think>" in message and "Fix:" in message


def test_re_rendered_history_that_diverges_forks_and_is_refused(task_data, build_trace):
    # Turn 2 re-renders turn 1's reply with different tokens (as a template that strips
    # reasoning would), so verifiers forks at the divergent node.
    user = vf.UserMessage(content="q")
    builder = build_trace(task_data)
    builder.turn([user], "r1", prompt_ids=[1, 2], completion_ids=[3, 4], spans=[(0, 1)])
    builder.turn(
        [user, vf.AssistantMessage(content="r1"), vf.UserMessage(content="more")],
        "r2",
        prompt_ids=[1, 2, 9, 5, 6],
        completion_ids=[7],
        spans=[(0, 1), (1, 3), (3, 4)],
    )
    with pytest.raises(MultipleBranchesError):
        convert(builder.trace)


# -- rewards, label, prompt, metadata -------------------------------------------------------------


def test_reward_without_reward_key_is_the_weighted_total(single_turn_trace):
    sample = convert(single_turn_trace)
    assert sample.reward == 1.25 and isinstance(sample.reward, float)


def test_reward_key_gives_every_component_plus_the_total(single_turn_trace):
    sample = convert(single_turn_trace, reward_key="correct")
    assert sample.reward == {"correct": 1.0, "brevity": 0.25, "reward": 1.25}
    assert sample.get_reward_value(type("A", (), {"reward_key": "correct"})) == 1.0


def test_unknown_reward_key_names_the_available_rewards(single_turn_trace):
    with pytest.raises(RewardKeyError, match=r"\['brevity', 'correct', 'reward'\]"):
        convert(single_turn_trace, reward_key="exact")


def test_errored_trace_reads_zero_for_a_reward_key_it_never_recorded(single_turn_trace):
    single_turn_trace.rewards.clear()
    single_turn_trace.capture_error(vf.TaskError("reward crashed"))
    assert convert(single_turn_trace, reward_key="correct").reward == {
        "reward": 0.0,
        "correct": 0.0,
    }


def test_label_comes_from_answer_as_text(single_turn_trace):
    assert convert(single_turn_trace).label == "5"


def test_label_field_wins_over_answer(build_trace):
    data = vf.WireTaskData(idx=1, prompt="p", label="L", answer="A")
    builder = build_trace(data).turn(
        [vf.UserMessage(content="p")], "x", prompt_ids=[1], completion_ids=[2]
    )
    assert convert(builder.trace).label == "L"


def test_task_without_label_or_answer_has_no_label(build_trace):
    builder = build_trace(vf.TaskData(idx=1, prompt="p")).turn(
        [vf.UserMessage(content="p")], "x", prompt_ids=[1], completion_ids=[2]
    )
    assert convert(builder.trace).label is None


def test_message_prompt_is_serialized_as_dicts(build_trace):
    prompt = [vf.SystemMessage(content="be brief"), vf.UserMessage(content="hi")]
    builder = build_trace(vf.TaskData(idx=1, prompt=prompt)).turn(
        prompt, "x", prompt_ids=[1, 2], completion_ids=[3]
    )
    assert convert(builder.trace).prompt == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_text_prompt_and_reply_are_carried(single_turn_trace):
    sample = convert(single_turn_trace)
    assert (sample.prompt, sample.response) == ("What is 2 + 3?", "5")


def test_metadata_records_what_verifiers_knows(single_turn_trace):
    info = convert(single_turn_trace).metadata["verifiers"]
    assert info == {
        "trace_id": single_turn_trace.id,
        "branch_index": 0,
        "task_index": 7,
        "rewards": {"correct": 1.0, "brevity": 0.25},
        "metrics": {"reply_chars": 1.0},
        "stop_condition": "agent_completed",
        "num_turns": 1,
    }


def test_metadata_carries_the_trace_error(single_turn_trace):
    single_turn_trace.capture_error(vf.ProviderError("engine down", status_code=503))
    error = convert(single_turn_trace).metadata["verifiers"]["error"]
    assert error == {"type": "ProviderError", "message": "engine down"}


# -- identity, routing, weight versions -------------------------------------------------------


def test_indices_and_routing_key(single_turn_trace):
    sample = convert(single_turn_trace, group_index=4, index=9)
    assert (sample.group_index, sample.index) == (4, 9)
    assert sample.routing_key == single_turn_trace.id
    assert sample.rollout_id is None


def test_weight_version_of_the_rollout_input_is_recorded(single_turn_trace):
    assert convert(single_turn_trace, weight_version=12).weight_versions == ["12"]
    assert convert(single_turn_trace).weight_versions == []


def test_older_sample_generation_gets_the_routing_key_in_session_id(single_turn_trace):
    @dataclasses.dataclass
    class SessionIdSample:
        """Stand-in for miles-rl 0.0.2's Sample: same fields as the port minus the newer ones,
        ``session_id`` instead of ``routing_key``."""

        Status = Sample.Status
        group_index: int | None = None
        index: int | None = None
        prompt: object = ""
        tokens: list = dataclasses.field(default_factory=list)
        response: str = ""
        response_length: int = 0
        label: object = None
        reward: object = None
        loss_mask: list | None = None
        weight_versions: list = dataclasses.field(default_factory=list)
        rollout_log_probs: list | None = None
        status: object = Sample.Status.PENDING
        metadata: dict = dataclasses.field(default_factory=dict)
        session_id: str | None = None

        def validate(self) -> None:
            assert len(self.loss_mask) == self.response_length

    sample = convert(single_turn_trace, sample_cls=SessionIdSample)
    assert sample.session_id == single_turn_trace.id


# -- status -------------------------------------------------------------------------------------


def test_clean_trace_is_completed(single_turn_trace):
    assert convert(single_turn_trace).status is Sample.Status.COMPLETED


def test_limit_stop_is_truncated(task_data, build_trace):
    builder = build_trace(task_data).turn(
        [vf.UserMessage(content="p")], "x", prompt_ids=[1], completion_ids=[2]
    )
    builder.trace.stop("max_turns")
    assert convert(builder.trace).status is Sample.Status.TRUNCATED


@pytest.mark.parametrize(
    "stop",
    ["max_turns", "max_total_tokens", "context_length", "harness_timeout", "compaction_failed"],
)
def test_a_limit_stop_of_either_verifiers_generation_is_truncated_by_its_name(
    single_turn_trace, stop
):
    # Even from a worker whose Verifiers did not flag the trace truncated itself.
    record = trace_record(single_turn_trace).model_copy(
        update={"stop_condition": stop, "is_truncated": False}
    )
    assert trace_to_sample(record, group_index=0, index=0).status is Sample.Status.TRUNCATED


@pytest.mark.parametrize("stop", ["agent_completed", "user_done"])
def test_a_clean_stop_that_is_not_a_limit_is_completed(single_turn_trace, stop):
    record = trace_record(single_turn_trace).model_copy(
        update={"stop_condition": stop, "is_truncated": False}
    )
    assert trace_to_sample(record, group_index=0, index=0).status is Sample.Status.COMPLETED


def test_an_agent_timeout_verifiers_kept_ok_is_truncated_not_completed(single_turn_trace):
    record = trace_record(single_turn_trace).model_copy(
        update={"stop_condition": "agent_timeout", "is_timeout": True, "ok": True}
    )
    sample = trace_to_sample(record, group_index=0, index=0)
    assert sample.status is Sample.Status.TRUNCATED
    assert sample.metadata["verifiers"]["timeout"] is True


def test_a_trace_verifiers_judged_ok_is_not_failed_whatever_errors_it_kept(single_turn_trace):
    # Verifiers 0.4 keeps a retried attempt's errors on the trace it then stamps ok.
    recovered = trace_record(single_turn_trace).model_copy(
        update={
            "ok": True,
            "error": ErrorRecord(type="HarnessError", message="first attempt"),
            "recovered_errors": 1,
        }
    )
    sample = trace_to_sample(recovered, group_index=0, index=0)
    assert sample.status is Sample.Status.COMPLETED
    assert sample.metadata["verifiers"]["recovered_errors"] == 1
    assert "error" not in sample.metadata["verifiers"]


def test_a_trace_verifiers_judged_not_ok_is_failed_even_without_an_error(single_turn_trace):
    record = trace_record(single_turn_trace).model_copy(update={"ok": False})
    assert trace_to_sample(record, group_index=0, index=0).status is Sample.Status.FAILED


def test_length_finish_is_truncated(task_data, build_trace):
    builder = build_trace(task_data).turn(
        [vf.UserMessage(content="p")], "x", prompt_ids=[1], completion_ids=[2], finish="length"
    )
    builder.trace.stop("agent_completed")
    assert convert(builder.trace).status is Sample.Status.TRUNCATED


def test_error_wins_over_truncation(task_data, build_trace):
    builder = build_trace(task_data).turn(
        [vf.UserMessage(content="p")], "x", prompt_ids=[1], completion_ids=[2], finish="length"
    )
    builder.trace.capture_error(vf.HarnessError("exited 1"))
    assert convert(builder.trace).status is Sample.Status.FAILED


def test_engine_abort_is_aborted_not_failed(single_turn_trace):
    from miles_verifiers.episodes.transport.errors import EngineAbortedError
    from miles_verifiers.errors import tag_message

    message = tag_message(EngineAbortedError, "the engine aborted after 3 token(s)")
    single_turn_trace.capture_error(vf.ProviderError(message, status_code=503))
    assert convert(single_turn_trace).status is Sample.Status.ABORTED


# -- groups -------------------------------------------------------------------------------------


def test_group_indices_follow_rollout_order(single_turn_trace, two_turn_trace):
    group = convert_traces([single_turn_trace, two_turn_trace], group_index=3, first_index=6)
    assert [(s.group_index, s.index) for s in group.samples] == [(3, 6), (3, 7)]
    assert group.complete


def test_group_with_an_empty_trace_keeps_its_place_and_asks_to_be_dropped(
    single_turn_trace, task_data
):
    empty = vf.Trace(task=vf.TraceTask(type="Task", data=task_data))
    group = convert_traces(
        [empty, single_turn_trace], group_index=0, first_index=0, reward_key="correct"
    )
    assert group.per_trace[0] == () and group.per_trace[1][0].index == 1
    assert [s.index for s in group.samples] == [1]
    assert not group.complete


def test_the_engines_prompt_and_cached_tokens_land_on_the_sample(single_turn_trace):
    from miles_verifiers.episodes.transport.sessions import PrefixCacheUsage

    usage = {single_turn_trace.id: PrefixCacheUsage(cached_tokens=4, prompt_tokens=6)}

    sample = trace_to_sample(trace_record(single_turn_trace, usage.get), group_index=0, index=0)

    assert (
        sample.prefix_cache_info.cached_tokens,
        sample.prefix_cache_info.total_prompt_tokens,
    ) == (4, 6)


def test_a_trace_the_engine_never_answered_keeps_empty_prefix_cache_counts(single_turn_trace):
    sample = trace_to_sample(trace_record(single_turn_trace, {}.get), group_index=0, index=0)

    assert sample.prefix_cache_info.total_prompt_tokens == 0
