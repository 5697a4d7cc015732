"""Training calls, driven as Miles drives them, against the loopback engine and real episodes."""

from __future__ import annotations

import itertools
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers import AdapterSettings
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.conversion import MultipleBranchesError
from miles_verifiers.trainer.scheduling import DispatchBudgetError, read_state
from miles_verifiers.trainer.training import (
    MIN_UNIFORM_FAILURES,
    ReplacementBudgetError,
    UniformFailureError,
    UnsupportedRequestRunError,
)
from miles_verifiers_testkit.engine import (
    EngineConfig,
    FaultPlan,
    LoopbackEngine,
    serve_engine,
)
from tests.rollout.rollout_support import (
    MODEL,
    Rollouts,
    flat,
    miles_args,
    point_at,
    task_data,
    task_prompts,
)

TRAINABLE = {"completed", "truncated"}


def prompt_of(sample: Any, prompts: list[str]) -> str:
    found = [p for p in prompts if p in str(sample.prompt)]
    assert len(found) == 1, f"sample prompt {sample.prompt!r} matches {found}"
    return found[0]


def test_every_call_returns_the_batch_size_in_groups_of_n_valid_samples_in_task_order(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 5})
    prompts = task_prompts(config)
    fn = rollouts.build(
        miles_args(rollout_batch_size=3, n_samples_per_prompt=2, over_sampling_batch_size=4), config
    )

    outputs = [rollouts.train(fn, rollout_id, weight_version=7) for rollout_id in range(2)]

    stream = itertools.cycle(prompts)
    for output in outputs:
        assert isinstance(output, contract().RolloutFnTrainOutput)
        assert [len(group) for group in output.samples] == [2, 2, 2]
        for group in output.samples:
            expected = next(stream)
            offsets = {s.group_index for s in group}
            assert len(offsets) == 1
            for k, sample in enumerate(group):
                sample.validate()
                assert sample.status.value in TRAINABLE
                assert prompt_of(sample, prompts) == expected
                assert sample.index == sample.group_index * 2 + k
                assert sample.weight_versions == ["7"]
                assert sample.routing_key == sample.metadata["verifiers"]["trace_id"]
                assert sample.response_length > 0 and sample.loss_mask[0] == 1


def test_each_sample_carries_the_prompt_tokens_the_engine_reported_for_its_rollout(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(miles_args(rollout_batch_size=2, n_samples_per_prompt=2), config)

    samples = flat(rollouts.train(fn).samples)

    # Single turn: the engine was sent exactly the prompt part of each sample's tokens.
    assert [s.prefix_cache_info.total_prompt_tokens for s in samples] == [
        len(s.tokens) - s.response_length for s in samples
    ]
    assert all(
        0 <= s.prefix_cache_info.cached_tokens <= s.prefix_cache_info.total_prompt_tokens
        for s in samples
    )


def test_a_training_call_with_save_set_writes_its_schedule_state_there(
    rollouts: Rollouts,
) -> None:
    # That a resumed run continues exactly is the conformance suite's (RES-1); this is where.
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(
        miles_args(rollout_batch_size=1, n_samples_per_prompt=1, save=str(rollouts.folder / "run")),
        config,
    )

    rollouts.train(fn)

    assert read_state(rollouts.folder / "run") is not None


def test_without_saved_state_a_later_rollout_starts_at_rollout_id_times_batch_and_says_so(
    rollouts: Rollouts,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 10})
    prompts = task_prompts(config)
    fn = rollouts.build(miles_args(rollout_batch_size=2, n_samples_per_prompt=1), config)

    with caplog.at_level(logging.WARNING, logger="miles_verifiers.trainer.training"):
        output = rollouts.train(fn, 3)
        rollouts.train(fn, 4)

    assert [prompt_of(g[0], prompts) for g in output.samples] == prompts[6:8]
    warnings = [r for r in caplog.records if "rollout_id x --rollout-batch-size" in r.getMessage()]
    assert len(warnings) == 1


def test_training_still_returns_valid_batches_under_twenty_percent_engine_faults(
    rollouts: Rollouts,
) -> None:
    rollouts.engine.set_faults(
        FaultPlan(server_error=0.05, abort=0.05, drop_connection=0.05, malformed_body=0.05, seed=11)
    )
    config = rollouts.config("mv_arith", taskset={"num_tasks": 8})
    fn = rollouts.build(miles_args(rollout_batch_size=3, n_samples_per_prompt=2), config)

    outputs = [rollouts.train(fn, r) for r in range(2)]

    assert sum(rollouts.engine.stats().faults.values()) > 0
    for output in outputs:
        assert [len(g) for g in output.samples] == [2, 2, 2]
        for sample in flat(output.samples):
            sample.validate()
            assert sample.status.value in TRAINABLE


def budget_error(rollouts: Rollouts, fn: Any) -> ReplacementBudgetError:
    """The error the first train call on ``fn`` ends with when it runs out of replacements."""
    with pytest.raises(ReplacementBudgetError) as caught:
        rollouts.train(fn)
    return caught.value


def every_group_fails(rollouts: Rollouts) -> Any:
    """A function whose every group is dropped (a harness error), with a small budget."""
    config = rollouts.config(
        "mv_faulty",
        taskset={"num_tasks": 3, "fault_rate": 1.0, "faults": ["harness_error"]},
    )
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=2)
    return rollouts.build(args, config, AdapterSettings(dispatch_budget_factor=3))


def test_a_call_whose_every_episode_fails_alike_stops_once_enough_groups_failed(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config(
        "mv_faulty",
        taskset={"num_tasks": 3, "fault_rate": 1.0, "faults": ["harness_error"]},
    )
    args = miles_args(rollout_batch_size=4, n_samples_per_prompt=2)
    fn = rollouts.build(args, config, AdapterSettings(dispatch_budget_factor=3))

    # That it ends with the replacement error is the conformance suite's (FLT-2).
    with pytest.raises(UniformFailureError) as caught:
        rollouts.train(fn)

    # The budget allows twelve groups; the rest would have failed alike.
    assert caught.value.drop_reasons == {"trace_error": MIN_UNIFORM_FAILURES}
    message = str(caught.value)
    assert "failed the same way ('trace_error')" in message
    assert message.count("HarnessError") == 1


def test_episodes_failing_in_different_ways_run_the_call_to_its_replacement_budget(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config(
        "mv_faulty",
        taskset={"num_tasks": 3, "fault_rate": 1.0, "faults": ["harness_error", "reward_error"]},
    )
    args = miles_args(rollout_batch_size=4, n_samples_per_prompt=2)
    fn = rollouts.build(args, config, AdapterSettings(dispatch_budget_factor=3))

    error = budget_error(rollouts, fn)

    assert not isinstance(error, UniformFailureError)
    # Past the first groups, out to the budget of 12 (drops that land together stop it at one
    # short of it: their replacements would pass it).
    dispatched = re.search(r"dispatched (\d+) task groups", str(error))
    assert dispatched is not None and int(dispatched[1]) > MIN_UNIFORM_FAILURES, str(error)


def test_the_first_drop_of_each_reason_in_a_call_is_logged_once_with_its_error(
    rollouts: Rollouts,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fn = every_group_fails(rollouts)

    with caplog.at_level(logging.WARNING, logger="miles_verifiers.trainer.training"):
        with pytest.raises(DispatchBudgetError):
            rollouts.train(fn)

    drops = [r.getMessage() for r in caplog.records if "dropped a group" in r.getMessage()]
    assert len(drops) == 1
    assert "(trace_error)" in drops[0] and "HarnessError" in drops[0]


def test_groups_given_contract_breaking_engine_answers_are_dropped_as_engine_contract(
    rollouts: Rollouts,
) -> None:
    rollouts.engine.set_faults(FaultPlan.always("out_of_vocab"))
    config = rollouts.config("mv_arith", taskset={"num_tasks": 3})
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=2)
    fn = rollouts.build(args, config, AdapterSettings(dispatch_budget_factor=3))

    error = budget_error(rollouts, fn)

    assert error.drop_reasons == {"engine_contract": 3}
    message = str(error)
    assert "broke the /generate contract" in message and "outside the tokenizer's" in message
    assert f":{rollouts.port}/generate broke the /generate contract" in message


def test_an_episode_past_its_deadline_is_dropped_as_a_timeout(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config(
        "mv_faulty",
        taskset={
            "num_tasks": 2,
            "fault_rate": 1.0,
            "faults": ["timeout"],
            "timeout_s": 30,
            "slow_step_s": 60,
        },
    )
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=2)
    settings = AdapterSettings(episode_timeout_s=0.5, dispatch_budget_factor=2)
    fn = rollouts.build(args, config, settings)

    error = budget_error(rollouts, fn)

    assert error.drop_reasons == {"episode_timeout": 2}
    assert "deadline" in str(error)


def test_groups_whose_rollouts_never_reach_the_model_are_dropped_as_empty_traces(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_longprompt", taskset={"num_tasks": 2, "filler_words": 200})
    args = miles_args(rollout_batch_size=1, rollout_max_prompt_len=32)
    fn = rollouts.build(args, config, AdapterSettings(dispatch_budget_factor=2))

    error = budget_error(rollouts, fn)

    assert error.drop_reasons == {"empty_trace": 2}
    assert "context_length" in str(error)
    assert rollouts.engine.stats().generate_calls == 0


def test_failing_groups_are_replaced_by_the_next_tasks_and_counted(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config(
        "mv_faulty",
        taskset={
            "num_tasks": 6,
            "seed": 1,
            "fault_rate": 0.5,
            "faults": ["reward_error", "group_reward_error"],
        },
    )
    tasks = task_data(config)
    healthy = [t.idx for t in tasks if t.fault is None]
    faults = [t.fault for t in tasks]
    fn = rollouts.build(miles_args(rollout_batch_size=2, n_samples_per_prompt=2), config)

    output = rollouts.train(fn)

    assert [g[0].metadata["verifiers"]["task_index"] for g in output.samples] == healthy[:2]
    skipped = faults[: healthy[1]]
    metrics = output.metrics
    assert metrics.get("rollout/dynamic_filter/drop_trace_error", 0) == skipped.count(
        "reward_error"
    )
    assert metrics.get("rollout/dynamic_filter/drop_episode_error", 0) == skipped.count(
        "group_reward_error"
    )
    assert metrics["verifiers/groups_dropped"] == len(skipped) - skipped.count(None)


def test_a_multi_branch_rejection_names_the_fix_and_stops_leftover_episodes(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config(
        "mv_compact", taskset={"num_tasks": 4, "steps": 4}, harness={"compact_every": 2}
    )
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=1, over_sampling_batch_size=3)
    fn = rollouts.build(args, config, AdapterSettings(branch_policy="reject"))

    with pytest.raises(MultipleBranchesError) as caught:
        rollouts.train(fn)

    # That the rejection names the branch count is the conformance suite's (BR-1).
    message = str(caught.value)
    assert caught.value.branch_count == 2
    assert "compact" in message and "enable_thinking" in message
    calls_at_return = rollouts.engine.stats().generate_calls
    time.sleep(0.3)
    assert rollouts.engine.in_flight == 0
    assert rollouts.engine.stats().generate_calls == calls_at_return, (
        "cancelled episodes kept calling the engine"
    )


def test_multi_branch_rollouts_train_as_siblings_nested_one_list_per_rollout(
    rollouts: Rollouts,
) -> None:
    # Task 1 compacts once (2 branches); its neighbours run 2 steps and never branch.
    config = rollouts.config(
        "mv_compact",
        taskset={"num_tasks": 3, "steps": 2, "steps_by_task": {"1": 4}},
        harness={"compact_every": 2},
    )
    fn = rollouts.build(
        miles_args(rollout_batch_size=3, n_samples_per_prompt=2, over_sampling_batch_size=3), config
    )

    groups = rollouts.train(fn).samples

    assert [len(group) for group in groups] == [2, 2, 2]  # n rollouts per group
    before, nested, after = groups
    for k, rollout in enumerate(nested):
        assert [s.rollout_id for s in rollout] == [2 + k, 2 + k]
        assert len({s.reward for s in rollout}) == 1
        assert [s.metadata["verifiers"]["branch"]["number"] for s in rollout] == [0, 1]
        assert all(s.group_index == 1 and s.loss_mask[0] == 1 for s in rollout)
    # The groups without siblings nest alike, one list per rollout, for Miles' flattening.
    assert [[s.rollout_id for s in rollout] for rollout in before] == [[0], [1]]
    assert [[s.rollout_id for s in rollout] for rollout in after] == [[4], [5]]


def test_a_thinking_user_simulator_dialogue_trains_one_sibling_per_turn(
    rollouts: Rollouts,
) -> None:
    from miles_verifiers_testkit.engine import PolicyConfig

    # With thinking on, Qwen3's template drops earlier reasoning from the history, so the
    # second user turn re-renders the first reply and the trace forks.
    config = rollouts.config("mv_dialogue", taskset={"num_tasks": 1, "rounds": 2})
    args = miles_args(
        rollout_batch_size=1,
        rollout_max_response_len=128,
        apply_chat_template_kwargs={"enable_thinking": True},
    )
    rollouts.engine.reset(policy=PolicyConfig(thinking=True))
    try:
        fn = rollouts.build(args, config)
        (group,) = rollouts.train(fn).samples
    finally:
        rollouts.engine.reset()

    assert len(group) == args.n_samples_per_prompt
    for k, rollout in enumerate(group):
        assert isinstance(rollout, list) and len(rollout) == 2  # one sibling per user turn
        assert {s.rollout_id for s in rollout} == {k}
        assert all(s.loss_mask[0] == 1 for s in rollout)


def test_tools_on_a_renderer_without_tool_support_stop_the_call_with_the_fix(
    rollouts: Rollouts,
    unregistered_checkpoint: Path,
) -> None:
    config = rollouts.config("mv_tools", taskset={"num_tasks": 2})
    args = miles_args(
        hf_checkpoint=str(unregistered_checkpoint),
        apply_chat_template_kwargs={},
        rollout_batch_size=1,
        n_samples_per_prompt=1,
    )
    fn = rollouts.build(args, config)
    # Miles starts SGLang with --model-path <--hf-checkpoint>, so the engine reports that path.
    served = LoopbackEngine(EngineConfig(model=MODEL, claimed_model=str(unregistered_checkpoint)))

    with serve_engine(engine=served) as running:
        point_at(args, running.port)
        with pytest.raises(UnsupportedRequestRunError) as caught:
            rollouts.train(fn)

    assert "--hf-checkpoint or --sglang-tokenizer-path" in str(caught.value)


def test_a_prompt_written_in_text_content_parts_is_trained_on_as_its_text(
    rollouts: Rollouts,
    qwen_tokenizer: Any,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2, "prompt_form": "parts"})
    questions = [
        "".join(part.text for part in data.prompt[0].content) for data in task_data(config)
    ]
    fn = rollouts.build(miles_args(), config)

    samples = flat(rollouts.train(fn).samples)

    assert samples
    for sample in samples:
        question = questions[sample.metadata["verifiers"]["task_index"]]
        prompt_tokens = sample.tokens[: len(sample.tokens) - sample.response_length]
        assert question in qwen_tokenizer.decode(prompt_tokens)
    sent = [qwen_tokenizer.decode(body["input_ids"]) for body in rollouts.engine.bodies]
    assert sent and all(any(q in text for q in questions) for text in sent)
