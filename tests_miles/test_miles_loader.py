"""The adapter loaded by Miles' loader, called as Miles' rollout manager calls it, and its
output put through Miles' own post-processing and eval logging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.rollout.rollout_support import RecordingEngine, write_config
from tests_miles.support import build, evaluate, run_args, train, train_data

CLASS_PATH = "miles_verifiers.VerifiersRolloutFn"
LEGACY_PATH = "miles_verifiers.generate_rollout"


@pytest.fixture
def arith(tmp_path: Path, use_config: Any) -> Path:
    config = write_config(tmp_path, "mv_arith", taskset={"num_tasks": 4})
    use_config(config)
    return config


def test_miles_loader_constructs_the_class_entry_point(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles_verifiers import VerifiersRolloutFn

    assert isinstance(build(CLASS_PATH, run_args(), engine_port), VerifiersRolloutFn)


def test_miles_loader_wraps_the_legacy_entry_point_in_its_legacy_adapter(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.inference_rollout.compatibility import LegacyRolloutFnAdapter

    assert isinstance(build(LEGACY_PATH, run_args(), engine_port), LegacyRolloutFnAdapter)


@pytest.mark.parametrize("path", [CLASS_PATH, LEGACY_PATH])
def test_a_train_call_returns_miles_own_output_and_sample_types(
    path: str, engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.base_types import RolloutFnTrainOutput
    from miles.utils.types import Sample

    output = train(build(path, run_args(), engine_port), rollout_id=0)

    assert type(output) is RolloutFnTrainOutput
    assert [len(group) for group in output.samples] == [2, 2]
    assert all(type(sample) is Sample for group in output.samples for sample in group)


@pytest.mark.parametrize("path", [CLASS_PATH, LEGACY_PATH])
def test_an_eval_call_returns_miles_own_eval_output(
    path: str, engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.base_types import RolloutFnEvalOutput

    output = evaluate(build(path, run_args(eval_interval=1), engine_port), rollout_id=0)

    assert type(output) is RolloutFnEvalOutput
    (entry,) = output.data.values()
    assert len(entry["rewards"]) == len(entry["truncated"]) == len(entry["samples"]) == 4


def test_the_legacy_v1_manager_path_calls_the_function_with_the_old_signature(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.base_types import RolloutFnTrainOutput, call_rollout_fn
    from miles.utils.misc import load_function

    from tests.rollout.rollout_support import point_at
    from tests_miles.support import in_worker_thread

    args = run_args()
    fn = load_function(LEGACY_PATH)
    point_at(args, engine_port)
    output = in_worker_thread(lambda: call_rollout_fn(fn, args, 0, None, evaluation=False))
    assert type(output) is RolloutFnTrainOutput
    assert sum(len(group) for group in output.samples) == 4


def test_miles_builds_train_data_with_every_field_it_reads_from_the_samples(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args()
    flat, data = train_data(args, train(build(CLASS_PATH, args, engine_port), rollout_id=0))

    assert len(flat) == 4
    assert data["tokens"] == [s.tokens for s in flat]
    assert data["response_lengths"] == [s.response_length for s in flat]
    assert data["raw_reward"] == [s.get_reward_value(args) for s in flat]
    assert data["sample_indices"] == [s.index for s in flat]
    assert data["truncated"] == [int(s.status.name == "TRUNCATED") for s in flat]
    assert [len(mask) for mask in data["loss_masks"]] == data["response_lengths"]
    assert [len(lp) for lp in data["rollout_log_probs"]] == data["response_lengths"]


def test_miles_normalises_rewards_within_each_group_of_the_adapter_output(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args()
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)
    _, data = train_data(args, output)

    sizes = [len(group) for group in output.samples]
    start = 0
    for size in sizes:
        assert sum(data["rewards"][start : start + size]) == pytest.approx(0.0, abs=1e-6)
        start += size
    assert len({s.group_index for group in output.samples for s in group}) == len(sizes)


def test_no_sample_of_a_train_output_is_aborted_for_miles_filter(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.rollout.filter_hub.dynamic_sampling_filters import check_no_aborted

    args = run_args()
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)
    assert all(check_no_aborted(args, group).keep for group in output.samples)


def test_miles_eval_logging_reads_every_eval_field_of_the_adapter_output(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    from miles.ray.rollout.metrics import log_eval_rollout_data

    args = run_args(eval_interval=1)
    output = evaluate(build(CLASS_PATH, args, engine_port), rollout_id=0)
    logged = log_eval_rollout_data(0, args, output.data, output.metrics)

    (name,) = output.data
    rewards = output.data[name]["rewards"]
    assert logged[f"eval/{name}"] == pytest.approx(sum(rewards) / len(rewards))
    assert logged[f"eval/{name}-truncated_ratio"] == pytest.approx(
        sum(output.data[name]["truncated"]) / len(rewards)
    )
    assert f"eval/{name}-none_reward_ratio" in logged


def _logged_train_metrics(args: Any, output: Any) -> tuple[list[Any], dict[str, Any]]:
    """What Miles' ``log_rollout_data`` hands its tracker for a train output."""
    from unittest import mock

    from miles.ray.rollout import metrics
    from miles.ray.rollout.rollout_data_conversion import postprocess_rollout_data

    flat, _ = postprocess_rollout_data(args, output.samples, train_parallel_config=None)
    with mock.patch.object(metrics.tracking, "log") as log:
        metrics.log_rollout_data(0, args, flat, output.metrics, 1.0)
    return flat, log.call_args.args[1]


def test_miles_train_logging_reads_the_adapter_samples_and_keeps_its_metrics(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args()
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0, weight_version=3)
    flat, logged = _logged_train_metrics(args, output)

    assert {k: logged[k] for k in output.metrics} == output.metrics
    assert logged["rollout/weight_version/min"] == logged["rollout/weight_version/max"] == 3
    assert logged["rollout/response_len/mean"] == pytest.approx(
        sum(s.effective_response_length for s in flat) / len(flat)
    )


def test_miles_train_logging_sees_the_prompt_tokens_the_engine_reported(
    engine: RecordingEngine, engine_port: int, arith: Path
) -> None:
    args = run_args()
    flat, _ = _logged_train_metrics(args, train(build(CLASS_PATH, args, engine_port), 0))

    # Single-turn samples: the engine was sent exactly the prompt part of ``tokens``.
    assert [s.prefix_cache_info.total_prompt_tokens for s in flat] == [
        len(s.tokens) - s.response_length for s in flat
    ]


@pytest.mark.parametrize("config_name", ["mv_arith", "mv_tools", "mv_dialogue"])
def test_every_train_and_eval_sample_passes_miles_own_sample_validation(
    config_name: str, engine: RecordingEngine, engine_port: int, tmp_path: Path, use_config: Any
) -> None:
    use_config(write_config(tmp_path, config_name, taskset={"num_tasks": 2}))
    args = run_args(rollout_batch_size=1, eval_interval=1)
    fn = build(CLASS_PATH, args, engine_port)

    samples = [s for group in train(fn, rollout_id=0).samples for s in group]
    samples += [s for entry in evaluate(fn, rollout_id=0).data.values() for s in entry["samples"]]
    for sample in samples:
        sample.validate()
    assert samples


@pytest.mark.parametrize("config_name", ["mv_tools", "mv_dialogue"])
def test_multi_turn_samples_become_miles_train_data_with_a_mask_per_response_token(
    config_name: str, engine: RecordingEngine, engine_port: int, tmp_path: Path, use_config: Any
) -> None:
    use_config(write_config(tmp_path, config_name, taskset={"num_tasks": 2}))
    args = run_args(rollout_batch_size=1)
    _, data = train_data(args, train(build(CLASS_PATH, args, engine_port), rollout_id=0))

    assert [len(mask) for mask in data["loss_masks"]] == data["response_lengths"]
    assert [len(lp) for lp in data["rollout_log_probs"]] == data["response_lengths"]
