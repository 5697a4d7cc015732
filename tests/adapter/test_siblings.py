"""The ``siblings`` branch policy: every trainable branch of a trace becomes a sample of its
rollout, each sampled token trained once (traces built with verifiers' own graph code, read
as the records the episode side makes of them)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import verifiers.v1 as vf

from miles_verifiers import AdapterSettings
from miles_verifiers.protocol.records import TraceRecord, trace_record
from miles_verifiers.trainer.conversion import (
    BranchPolicy,
    MultipleBranchesError,
    convert_group,
    trace_to_sample,
    trace_to_samples,
    training_output,
)
from miles_verifiers.trainer.groups import GroupRun
from miles_verifiers.trainer.hooks import MilesHooks, RewardModel
from miles_verifiers.trainer.rollout import SettingsError
from miles_verifiers.trainer.scheduling import TaskOrder
from miles_verifiers.trainer.training import (
    Judged,
    SiblingRewardError,
    TrainSetup,
    check_sibling_rewards,
    judge_group,
)
from miles_verifiers_testkit.miles import flatten
from miles_verifiers_testkit.miles.contract import Sample, call_dynamic_filter

SIBLINGS = BranchPolicy.SIBLINGS


def record(trace) -> TraceRecord:
    return trace if isinstance(trace, TraceRecord) else trace_record(trace)


def siblings(trace, **kwargs) -> list[Sample]:
    kwargs.setdefault("group_index", 0)
    kwargs.setdefault("index", 0)
    return trace_to_samples(record(trace), policy=SIBLINGS, **kwargs)


def convert_traces(traces, **kwargs):
    return convert_group([record(t) for t in traces], **kwargs)


def layout(sample: Sample) -> tuple:
    return (
        sample.tokens,
        sample.response_length,
        sample.loss_mask,
        sample.rollout_log_probs,
        sample.rollout_id,
        sample.metadata["verifiers"]["branch"],
    )


@pytest.fixture
def compacted(task_data, build_trace):
    """A compacting harness: each turn sends a fresh prompt, so each turn is a new root."""
    builder = build_trace(task_data)
    builder.turn([vf.UserMessage(content="notes 1")], "a", prompt_ids=[1, 2], completion_ids=[3])
    builder.turn([vf.UserMessage(content="notes 2")], "b", prompt_ids=[4, 5], completion_ids=[6])
    return builder.trace


@pytest.fixture
def forked_after_a_sampled_turn(task_data, build_trace):
    """Turn 1 is sampled once; turns 2 and 3 both continue from it with different user
    messages, so the graph forks after turn 1's assistant node, which both branches hold."""
    user = vf.UserMessage(content="q")
    reply = vf.AssistantMessage(content="r1")
    builder = build_trace(task_data)
    builder.turn([user], "r1", prompt_ids=[1, 2], completion_ids=[3, 4], spans=[(0, 1)])
    builder.turn(
        [user, reply, vf.UserMessage(content="more")],
        "r2",
        prompt_ids=[1, 2, 3, 4, 5, 6],
        completion_ids=[7],
        spans=[(0, 1), (1, 4), (4, 5)],
    )
    builder.turn(
        [user, reply, vf.UserMessage(content="other")],
        "r3",
        prompt_ids=[1, 2, 3, 4, 8, 9],
        completion_ids=[10, 11],
        spans=[(0, 1), (1, 4), (4, 5)],
    )
    assert builder.trace.num_branches == 2
    return builder.trace


def test_each_branch_of_a_compacted_trace_is_a_sample_of_one_rollout(compacted):
    first, second = siblings(compacted, group_index=2, index=5)
    assert (first.tokens, first.loss_mask) == ([1, 2, 3], [1])
    assert (second.tokens, second.loss_mask) == ([4, 5, 6], [1])
    assert {s.rollout_id for s in (first, second)} == {5}
    assert {s.index for s in (first, second)} == {5}
    assert {s.group_index for s in (first, second)} == {2}
    assert first.reward == second.reward == compacted.reward


def test_siblings_say_which_branch_of_how_many_they_are(compacted):
    branches = [s.metadata["verifiers"]["branch"] for s in siblings(compacted)]
    assert branches == [
        {"number": 0, "of": 2, "graph_branches": 2},
        {"number": 1, "of": 2, "graph_branches": 2},
    ]


def test_a_sampled_turn_two_branches_hold_is_trained_in_the_first_only(
    forked_after_a_sampled_turn,
):
    first, second = siblings(forked_after_a_sampled_turn)
    # The first branch trains turn 1 and turn 2.
    assert first.tokens == [1, 2, 3, 4, 5, 6, 7]
    assert (first.response_length, first.loss_mask) == (5, [1, 1, 0, 0, 1])
    # The second carries turn 1 as context before its response: only turn 3 is trained.
    assert second.tokens == [1, 2, 3, 4, 8, 9, 10, 11]
    assert (second.response_length, second.loss_mask) == (2, [1, 1])
    branch = forked_after_a_sampled_turn.branches[1]
    assert second.rollout_log_probs == pytest.approx(list(branch.logprobs)[-2:])


def test_every_sampled_token_is_trained_exactly_once(forked_after_a_sampled_turn):
    trained = sum(sum(s.loss_mask) for s in siblings(forked_after_a_sampled_turn))
    sampled_nodes = [n for n in forked_after_a_sampled_turn.nodes if n.sampled]
    assert trained == sum(sum(n.mask) for n in sampled_nodes)


def test_a_branch_with_nothing_left_to_train_is_not_emitted(task_data, build_trace):
    # Turn 3 forks after turn 1 and its reply is empty: the second leaf holds no sampled token
    # but turn 1's, which the first branch already trains.
    user = vf.UserMessage(content="q")
    reply = vf.AssistantMessage(content="r1")
    builder = build_trace(task_data)
    builder.turn([user], "r1", prompt_ids=[1, 2], completion_ids=[3], spans=[(0, 1)])
    builder.turn(
        [user, reply, vf.UserMessage(content="more")],
        "r2",
        prompt_ids=[1, 2, 3, 5, 6],
        completion_ids=[7],
        spans=[(0, 1), (1, 3), (3, 4)],
    )
    builder.turn(
        [user, reply, vf.UserMessage(content="else")],
        "",
        prompt_ids=[1, 2, 3, 8, 9],
        completion_ids=[],
        spans=[(0, 1), (1, 3), (3, 4)],
    )
    assert builder.trace.num_branches == 2
    (only,) = siblings(builder.trace)
    assert (only.tokens, only.loss_mask) == ([1, 2, 3, 5, 6, 7], [1, 0, 0, 1])
    assert only.metadata["verifiers"]["branch"] == {"number": 0, "of": 1, "graph_branches": 2}


def test_a_single_branch_trace_is_one_sample_with_its_rollout_id(two_turn_trace):
    (sample,) = siblings(two_turn_trace, index=7)
    assert sample.rollout_id == 7
    assert sample.loss_mask == [1, 1, 0, 0, 0, 0, 1, 1]


def test_reject_refuses_several_branches_and_sets_no_rollout_id(compacted, two_turn_trace):
    with pytest.raises(MultipleBranchesError):
        trace_to_samples(record(compacted), group_index=0, index=0, policy=BranchPolicy.REJECT)
    (sample,) = trace_to_samples(record(two_turn_trace), group_index=0, index=3)
    assert sample.rollout_id is None


# -- worker records ---------------------------------------------------------------------------


def test_a_record_from_a_worker_without_node_ids_dedups_by_path(forked_after_a_sampled_turn):
    data = trace_record(forked_after_a_sampled_turn).model_dump()
    for branch in data["branches"]:
        for node in branch["nodes"]:
            del node["node_id"]
        del branch["trainable"]
    without_ids = TraceRecord.model_validate(data)
    assert [layout(s) for s in siblings(without_ids)] == [
        layout(s) for s in siblings(forked_after_a_sampled_turn)
    ]


def test_an_untrainable_branch_is_never_trained(forked_after_a_sampled_turn):
    data = trace_record(forked_after_a_sampled_turn).model_dump()
    data["branches"][0]["trainable"] = False
    (only,) = siblings(TraceRecord.model_validate(data))
    # The second branch now trains turn 1 too: nothing trained it before.
    assert only.tokens == [1, 2, 3, 4, 8, 9, 10, 11]
    assert only.loss_mask == [1, 1, 0, 0, 1, 1]
    assert only.metadata["verifiers"]["branch"] == {"number": 0, "of": 1, "graph_branches": 2}


# -- groups, evaluation, rewards --------------------------------------------------------------


def test_a_group_nests_one_list_per_rollout_once_a_rollout_has_siblings(compacted, two_turn_trace):
    group = convert_traces(
        [two_turn_trace, compacted], group_index=1, first_index=2, policy=SIBLINGS
    )
    (nested,) = training_output([group])
    assert [[s.rollout_id for s in rollout] for rollout in nested] == [[2], [3, 3]]
    assert [s.rollout_id for s in group.representatives] == [2, 3]
    assert group.representatives[1] is nested[1][-1]


def test_a_call_without_siblings_keeps_its_groups_flat(two_turn_trace, single_turn_trace):
    group = convert_traces(
        [two_turn_trace, single_turn_trace], group_index=0, first_index=0, policy=SIBLINGS
    )
    assert training_output([group]) == [group.samples] and len(group.samples) == 2


@pytest.mark.parametrize("branching_first", [False, True])
def test_once_a_rollout_has_siblings_every_group_of_the_call_nests_per_rollout(
    compacted, two_turn_trace, single_turn_trace, branching_first
):
    plain = convert_traces(
        [two_turn_trace, single_turn_trace], group_index=0, first_index=0, policy=SIBLINGS
    )
    branching = convert_traces([compacted], group_index=1, first_index=2, policy=SIBLINGS)
    groups = [branching, plain] if branching_first else [plain, branching]

    output = training_output(groups)

    assert output == [g.rollouts for g in groups]
    assert [len(r) for r in plain.rollouts] == [1, 1]
    samples = flatten(output)  # as Miles' manager flattens it, a level at a time
    assert all(isinstance(s, Sample) for s in samples) and len(samples) == 4


def test_an_evaluation_entry_holds_the_last_branch_with_all_its_sampled_tokens(
    forked_after_a_sampled_turn,
):
    sample = trace_to_sample(
        record(forked_after_a_sampled_turn), group_index=0, index=0, policy=SIBLINGS
    )
    assert sample.tokens == [1, 2, 3, 4, 8, 9, 10, 11]
    assert sample.loss_mask == [1, 1, 0, 0, 1, 1]
    assert sample.rollout_id is None


def test_a_reward_model_scoring_siblings_apart_is_an_error_naming_the_flag(compacted):
    group = convert_traces([compacted], group_index=0, first_index=0, policy=SIBLINGS)
    group.samples[1].reward = 0.25
    with pytest.raises(SiblingRewardError, match="--custom-rm-path") as caught:
        check_sibling_rewards(group, "--custom-rm-path")
    assert "BRANCH_POLICY=reject" in str(caught.value)


# -- the setting ----------------------------------------------------------------------------------


@dataclasses.dataclass
class _OldSample:
    """A Miles Sample from before rollout_id."""

    index: int = 0


def test_siblings_is_the_default_where_the_sample_has_a_rollout_id():
    assert AdapterSettings().resolved_branch_policy(Sample) is SIBLINGS


def test_reject_is_the_default_with_an_older_miles():
    assert AdapterSettings().resolved_branch_policy(_OldSample) is BranchPolicy.REJECT


def test_the_environment_can_ask_for_reject(monkeypatch):
    monkeypatch.setenv("MILES_VERIFIERS_BRANCH_POLICY", "reject")
    settings = AdapterSettings.from_environ()
    assert settings.resolved_branch_policy(Sample) is BranchPolicy.REJECT


def test_asking_for_siblings_with_an_older_miles_names_the_variable():
    with pytest.raises(SettingsError, match="MILES_VERIFIERS_BRANCH_POLICY"):
        AdapterSettings(branch_policy="siblings").resolved_branch_policy(_OldSample)


# -- judging a training group -----------------------------------------------------------------


def _setup(hooks: MilesHooks) -> TrainSetup:
    return TrainSetup(
        order=TaskOrder(1, 0, False),
        n_samples_per_prompt=2,
        rollout_batch_size=1,
        over_sampling_batch_size=1,
        max_dispatched=1,
        reward_key=None,
        hooks=hooks,
        sample_cls=Sample,
        call_dynamic_filter=call_dynamic_filter,
        branch_policy=SIBLINGS,
    )


def _judge(hooks: MilesHooks, *traces) -> Judged:
    run = GroupRun(tuple(record(t) for t in traces))
    return asyncio.run(judge_group(run, 3, _setup(hooks), None, None))


def test_the_dynamic_filter_sees_one_sample_per_rollout(compacted, two_turn_trace):
    seen: list[list[int | None]] = []

    def dynamic_filter(args, samples):
        seen.append([s.rollout_id for s in samples])
        return True

    verdict = _judge(MilesHooks(dynamic_filter=dynamic_filter), two_turn_trace, compacted)
    assert seen == [[6, 7]]
    assert verdict.group is not None
    assert [len(r) for r in verdict.group.rollouts] == [1, 2]


def test_a_reward_model_scoring_branches_apart_stops_the_call(compacted, two_turn_trace):
    async def by_branch(args, sample):
        return float(sample.metadata["verifiers"]["branch"]["number"])

    model = RewardModel(by_branch, None, None, None, "--custom-rm-path")
    with pytest.raises(SiblingRewardError, match="--custom-rm-path"):
        _judge(MilesHooks(reward_model=model), two_turn_trace, compacted)


def test_a_reward_model_scoring_by_rollout_keeps_the_group(compacted, two_turn_trace):
    async def by_rollout(args, sample):
        return float(sample.rollout_id)

    model = RewardModel(by_rollout, None, None, None, "--custom-rm-path")
    verdict = _judge(MilesHooks(reward_model=model), two_turn_trace, compacted)
    assert [s.reward for s in verdict.samples] == [6.0, 7.0, 7.0]
