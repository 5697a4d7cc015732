"""How Miles calls the function: one instance for train and eval, overlapping calls, the legacy
entry point, Miles' hooks, and winding leftover work down."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers import AdapterSettings, VerifiersRolloutFn, generate_rollout
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.rollout import LEGACY_CACHE_SIZE, _legacy_instance
from miles_verifiers_testkit.engine import LatencyModel
from tests.rollout.rollout_support import (
    Rollouts,
    call,
    eval_input,
    fingerprint,
    flat,
    in_worker_thread,
    miles_args,
    point_at,
    task_prompts,
    train_fingerprints,
    train_input,
    write_config,
)

HOOKS = "tests.rollout.hooks_for_tests"


def test_overlapping_train_and_eval_calls_on_one_instance_do_not_disturb_each_other(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 4})
    # Slow decoding keeps both calls in flight together.
    rollouts.engine.set_latency(LatencyModel(decode_s_per_token=0.002))

    def fresh() -> tuple[Any, VerifiersRolloutFn]:
        args = miles_args(
            rollout_batch_size=2,
            over_sampling_batch_size=3,
            n_samples_per_eval_prompt=2,
            eval_interval=1,
            sglang_enable_deterministic_inference=True,
        )
        return args, rollouts.build(args, config)

    _, alone = fresh()
    expected = train_fingerprints(alone, rollouts.loop)

    _, shared = fresh()

    async def overlapped() -> list[Any]:
        return list(
            await asyncio.gather(
                shared(train_input(0)), shared(eval_input(0)), shared(train_input(1))
            )
        )

    first, evaluation, second = rollouts.loop.run(overlapped())

    assert [[fingerprint(s) for s in flat(o.samples)] for o in (first, second)] == expected
    entry = evaluation.data["mv-arith"]
    assert len(entry["samples"]) == 8 and all(
        s.status.value == "completed" for s in entry["samples"]
    )


def test_leaving_a_call_cancels_its_episodes_and_aborts_only_its_own_requests(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    # Every request hangs until aborted.
    rollouts.engine.set_latency(LatencyModel(decode_s_per_token=5.0))
    fn = rollouts.build(miles_args(eval_interval=1), config)

    async def start_then_leave() -> tuple[str, list[Any]]:
        scope = fn._scope("eval")
        async with scope:
            runs = [scope.spawn(scope.run(i, i)) for i in range(2)]
            while rollouts.engine.in_flight < 2:
                await asyncio.sleep(0.01)
        return scope.transport.rid_prefix, runs

    prefix, runs = rollouts.loop.run(start_then_leave(), timeout_s=60)

    assert all(run.cancelled() for run in runs)
    assert rollouts.engine.in_flight == 0
    assert rollouts.engine.abort_calls and all(
        rid.startswith(prefix) for rid in rollouts.engine.abort_calls
    )


def test_the_legacy_entry_point_serves_train_and_eval_from_one_cached_instance(
    rollouts: Rollouts, use_config: Any
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 3})
    use_config(config)
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=1, eval_interval=1)
    point_at(args, rollouts.port)  # on the legacy path nothing is built before SGLang is up
    data_source = object()

    first = in_worker_thread(lambda: generate_rollout(args, 0, data_source))
    evaluation = in_worker_thread(lambda: generate_rollout(args, 0, data_source, evaluation=True))
    second = in_worker_thread(lambda: generate_rollout(args, 1, data_source))

    prompts = task_prompts(config)
    trained = [g[0] for g in first.samples + second.samples]
    assert [p for s in trained for p in prompts if p in str(s.prompt)] == [*prompts, prompts[0]]
    assert isinstance(evaluation, contract().RolloutFnEvalOutput)
    assert len(evaluation.data["mv-arith"]["samples"]) == 3
    assert _legacy_instance(args, data_source) is _legacy_instance(args, data_source)


def test_the_legacy_instance_cache_is_bounded(use_config: Any, tmp_path: Path) -> None:
    use_config(write_config(tmp_path, "mv_arith", taskset={"num_tasks": 1}))
    sources = [object() for _ in range(LEGACY_CACHE_SIZE + 1)]
    args = miles_args()
    first = _legacy_instance(args, sources[0])
    for source in sources[1:]:
        _legacy_instance(args, source)

    assert _legacy_instance(args, sources[0]) is not first


def test_a_custom_reward_model_replaces_the_verifiers_reward_before_the_filters(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 3})
    data_source = object()
    args = miles_args(
        custom_rm_path=f"{HOOKS}.length_reward",
        rollout_sample_filter_path=f"{HOOKS}.remember_returned_groups",
        rollout_all_samples_process_path=f"{HOOKS}.remember_all_groups",
    )
    fn = rollouts.build(args, config, data_source=data_source)

    output = rollouts.train(fn)

    for sample in flat(output.samples):
        assert sample.reward == float(sample.response_length)
        assert "correct" in sample.metadata["verifiers"]["rewards"]
    returned = [[s.index for s in g] for g in output.samples]
    assert args.test_sample_filter_calls == [returned]
    assert args.test_all_groups_calls == [(returned, data_source)]
    assert output.samples[0][0].remove_sample is True


def test_a_group_reward_model_scores_each_group_in_one_call(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 3})
    fn = rollouts.build(
        miles_args(
            n_samples_per_prompt=3, group_rm=True, custom_rm_path=f"{HOOKS}.group_size_reward"
        ),
        config,
    )

    output = rollouts.train(fn)

    assert all(s.reward == 3.0 for s in flat(output.samples))


def test_a_scalar_reward_model_with_a_reward_key_fails_with_the_flags_to_change(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(
        miles_args(custom_rm_path=f"{HOOKS}.scalar_reward", reward_key="correct"), config
    )

    with pytest.raises(ValueError, match="--reward-key"):
        rollouts.train(fn)


def test_a_dropping_dynamic_filter_is_replaced_and_reported_under_its_reason(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 4})
    prompts = task_prompts(config)
    args = miles_args(
        rollout_batch_size=2, dynamic_sampling_filter_path=f"{HOOKS}.drop_listed_prompts"
    )
    args.test_drop_prompts = [prompts[0]]
    fn = rollouts.build(args, config)

    output = rollouts.train(fn)

    assert [g[0].group_index for g in output.samples] == [1, 2]
    assert output.metrics["rollout/dynamic_filter/drop_listed_prompt"] == 1
    assert output.metrics["verifiers/groups_replaced"] == 1


def test_a_reward_key_trains_on_that_component_of_a_dict_reward(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_group", taskset={"num_tasks": 2})
    fn = rollouts.build(miles_args(reward_key="agreement"), config)

    output = rollouts.train(fn)

    for sample in flat(output.samples):
        assert set(sample.reward) >= {"correct", "agreement", "reward"}
        assert sample.reward["reward"] == pytest.approx(
            sample.reward["correct"] + sample.reward["agreement"]
        )


@pytest.mark.slow
def test_a_user_simulator_dialogue_trains_and_its_cancelled_leftovers_wind_down_promptly(
    rollouts: Rollouts,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One group is needed and a second is started and then cancelled mid-dialogue; Verifiers
    # would wait a minute on its leftover request handler unless the call hurries it.
    config = rollouts.config("mv_dialogue", taskset={"num_tasks": 2, "rounds": 2})
    args = miles_args(
        rollout_batch_size=1,
        n_samples_per_prompt=1,
        over_sampling_batch_size=2,
        rollout_max_response_len=128,
    )
    settings = AdapterSettings(shutdown_timeout_s=20.0, cleanup_grace_s=20.0)
    fn = rollouts.build(args, config, settings=settings)

    with caplog.at_level(logging.WARNING, logger="miles_verifiers.episodes.calls"):
        output = rollouts.train(fn)

    sample = output.samples[0][0]
    sample.validate()
    runs = sum(
        1 for a, b in zip([0, *sample.loss_mask], sample.loss_mask, strict=False) if b and not a
    )
    assert runs == 2, "both assistant turns are sampled, the user turn between them is masked"
    assert not [r for r in caplog.records if "did not" in r.getMessage()]


def test_a_reward_model_returning_a_dict_trains_on_the_reward_key_of_its_result(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    args = miles_args(custom_rm_path=f"{HOOKS}.dict_reward", reward_key="score")
    fn = rollouts.build(args, config)

    output = rollouts.train(fn)

    samples = flat(output.samples)
    assert samples and all(s.reward == {"score": 0.75, "details": "ok"} for s in samples)
    assert all(s.get_reward_value(args) == 0.75 for s in samples)
    assert all("correct" in s.metadata["verifiers"]["rewards"] for s in samples)


def test_a_group_reward_model_returning_dicts_trains_on_the_reward_key_of_its_result(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    args = miles_args(
        group_rm=True, custom_rm_path=f"{HOOKS}.group_dict_reward", reward_key="score"
    )
    fn = rollouts.build(args, config)

    output = rollouts.train(fn)

    samples = flat(output.samples)
    assert samples and all(s.get_reward_value(args) == 0.75 for s in samples)


def test_a_dict_reward_model_without_a_reward_key_fails_naming_the_flag_to_set(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(miles_args(custom_rm_path=f"{HOOKS}.dict_reward"), config)

    with pytest.raises(ValueError, match="--reward-key is unset"):
        rollouts.train(fn)


@pytest.mark.parametrize("rollout_input", [train_input(0), eval_input(0)], ids=["train", "eval"])
def test_an_engine_serving_another_model_is_refused_before_any_generate_request(
    rollouts: Rollouts, rollout_input: Any
) -> None:
    from miles_verifiers.engine.identity import EngineModelMismatchError
    from miles_verifiers_testkit.engine import EngineConfig, LoopbackEngine, serve_engine

    other = "meta-llama/Llama-3.2-1B-Instruct"
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=1, eval_interval=1)
    fn = rollouts.build(args, config)
    wrong = LoopbackEngine(EngineConfig(model="Qwen/Qwen3-0.6B", claimed_model=other))
    with serve_engine(engine=wrong) as running:
        point_at(args, running.port)
        with pytest.raises(EngineModelMismatchError) as caught:
            call(fn, rollout_input, rollouts.loop)
        assert wrong.stats().generate_calls == 0
    message = str(caught.value)
    assert repr(other) in message and "'Qwen/Qwen3-0.6B' (--hf-checkpoint)" in message


def test_a_proxy_in_the_environment_does_not_capture_loopback_traffic(
    rollouts: Rollouts,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_proxy = f"http://127.0.0.1:{probe.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(miles_args(rollout_batch_size=2, n_samples_per_prompt=2), config)

    output = rollouts.train(fn)

    assert [len(group) for group in output.samples] == [2, 2]
    assert all(s.status.value == "completed" for s in flat(output.samples))
