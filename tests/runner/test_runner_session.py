"""How a run calls the rollout function: Miles' construction order, threads and loop."""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
from pathlib import Path

import pytest

from miles_verifiers.cli.kit import use_fixture_tokenizers
from miles_verifiers.cli.loading import RolloutFunctionPathError, load_rollout_function
from miles_verifiers.cli.namespace import build_namespace
from miles_verifiers.cli.schedule import plan_calls
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers_testkit.miles import LegacyRolloutFn, construct_rollout_fn
from miles_verifiers_testkit.runner.outputs import OutputPathError
from miles_verifiers_testkit.runner.resume import ResumePoint
from miles_verifiers_testkit.runner.session import (
    ConstructionError,
    RolloutOutputError,
    RunRequest,
    run_rollouts,
)
from tests.runner.runner_support import PROBES

SUPPORT = "tests.runner.runner_support"


def _request(tmp_path: Path, path: str, **flags: object) -> RunRequest:
    args = build_namespace({"num_rollout": 2, "eval_interval": 2, **flags})
    calls = plan_calls(num_rollout=2, start_rollout_id=None, eval_interval=2)
    return RunRequest(
        args=args,
        calls=tuple(calls),
        rollout_function_path=path,
        engine_url=None,
        engine_model="Qwen/Qwen3-0.6B",
        output=tmp_path / "samples.jsonl",
        metrics_output=tmp_path / "metrics.json",
        call_timeout_s=30,
    )


@pytest.fixture(scope="module", autouse=True)
def _tokenizers() -> None:
    use_fixture_tokenizers()  # the embedded engine loads the Qwen3 tokenizer


@pytest.fixture
def probe_run(tmp_path):
    PROBES.clear()
    result = run_rollouts(_request(tmp_path, f"{SUPPORT}.CallOrderProbe"))
    (probe,) = PROBES
    return probe, result


def test_the_function_is_built_before_the_router_address_exists(probe_run):
    probe, _ = probe_run
    assert probe.router_at_construction == (None, None)


def test_every_call_sees_the_engine_address_written_into_the_same_args(probe_run):
    probe, result = probe_run
    routers = {call[2] for call in probe.calls}
    assert routers == {(result.engine.host, result.engine.port)}
    assert probe.args.sglang_model_routers == {"default": (result.engine.host, result.engine.port)}


def test_calls_follow_miles_schedule(probe_run):
    probe, _ = probe_run
    assert [(c[0], c[1]) for c in probe.calls] == [
        ("eval", 0),
        ("train", 0),
        ("train", 1),
        ("eval", 1),
    ]


def test_all_calls_share_one_event_loop_off_the_main_thread(probe_run):
    probe, _ = probe_run
    assert len({call[3] for call in probe.calls}) == 1
    assert threading.get_ident() not in {call[4] for call in probe.calls}


def test_no_data_source_is_given_as_with_the_global_dataset_off(probe_run):
    probe, _ = probe_run
    assert probe.data_source is None


def test_a_wrong_output_type_fails_the_run_naming_the_expected_type(tmp_path):
    with pytest.raises(RolloutOutputError, match="RolloutFnEvalOutput"):
        run_rollouts(_request(tmp_path, f"{SUPPORT}.WrongOutput"))


def test_a_constructor_failure_names_the_function_path(tmp_path):
    request = _request(tmp_path, "miles_verifiers.VerifiersRolloutFn", partial_rollout=True)
    with pytest.raises(ConstructionError, match="VerifiersRolloutFn could not be constructed"):
        run_rollouts(request)
    assert not request.output.exists()


def test_a_failed_rerun_leaves_the_previous_samples_and_metrics_as_they_were(tmp_path):
    request = _request(tmp_path, f"{SUPPORT}.WrongOutput")
    request.output.write_text('{"previous": "samples"}\n', encoding="utf-8")
    request.metrics_output.write_text('{"previous": "metrics"}\n', encoding="utf-8")

    with pytest.raises(RolloutOutputError):
        run_rollouts(request)

    assert request.output.read_text(encoding="utf-8") == '{"previous": "samples"}\n'
    assert request.metrics_output.read_text(encoding="utf-8") == '{"previous": "metrics"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "samples.jsonl"]


def test_a_successful_run_replaces_both_outputs(tmp_path):
    request = _request(tmp_path, f"{SUPPORT}.CallOrderProbe")
    request.output.write_text('{"previous": "samples"}\n', encoding="utf-8")
    request.metrics_output.write_text('{"previous": "metrics"}\n', encoding="utf-8")

    run_rollouts(request)

    assert request.output.read_text(encoding="utf-8") == ""  # the probe returns no samples
    assert "summary" in json.loads(request.metrics_output.read_text(encoding="utf-8"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "samples.jsonl"]


def test_an_interrupted_run_puts_the_completed_calls_in_place_marked_interrupted(tmp_path):
    request = _request(tmp_path, f"{SUPPORT}.InterruptingProbe")  # eval 0, train 0, then ^C

    result = run_rollouts(request)

    document = json.loads(request.metrics_output.read_text(encoding="utf-8"))
    assert document["status"] == result.summary.status == "interrupted"
    assert [call["rollout_id"] for call in document["train"]] == [0]
    assert result.resume == ResumePoint(start_rollout_id=1, evaluate_first=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "samples.jsonl"]


def test_an_interrupt_before_any_call_completed_leaves_the_previous_outputs(tmp_path):
    request = _request(tmp_path, f"{SUPPORT}.InterruptingFirstCall")
    request.output.write_text('{"previous": "samples"}\n', encoding="utf-8")

    with pytest.raises(KeyboardInterrupt):
        run_rollouts(request)

    assert request.output.read_text(encoding="utf-8") == '{"previous": "samples"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["samples.jsonl"]


def test_credentials_given_as_flags_are_not_written_to_metrics_json(tmp_path):
    request = _request(
        tmp_path, f"{SUPPORT}.CallOrderProbe", wandb_key="wk-SECRET-1", hf_token="hf-SECRET-2"
    )

    run_rollouts(request)

    text = request.metrics_output.read_text(encoding="utf-8")
    assert "SECRET" not in text
    assert json.loads(text)["args"]["wandb_key"] == "<redacted>"


def test_samples_and_metrics_on_one_file_are_refused_before_construction(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "out")
    request = dataclasses.replace(
        _request(tmp_path, f"{SUPPORT}.CallOrderProbe"),
        output=tmp_path / "out" / "run.json",
        metrics_output=tmp_path / "alias" / ".." / "alias" / "run.json",
    )
    PROBES.clear()

    with pytest.raises(OutputPathError, match="--metrics-output"):
        run_rollouts(request)

    assert PROBES == []
    assert list((tmp_path / "out").iterdir()) == []


def test_a_plain_function_is_called_with_the_legacy_signature():
    args = argparse.Namespace()
    target = load_rollout_function(f"{SUPPORT}.legacy_rollout")
    fn = construct_rollout_fn(target, contract(), args)
    assert isinstance(fn, LegacyRolloutFn)
    train = fn(contract().RolloutFnTrainInput(rollout_id=0))
    evaluation = fn(contract().RolloutFnEvalInput(rollout_id=0))
    assert isinstance(train, contract().RolloutFnTrainOutput) and train.samples == [[]]
    assert isinstance(evaluation, contract().RolloutFnEvalOutput) and "env" in evaluation.data


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("VerifiersRolloutFn", "not a dotted path"),
        ("no_such_package.Fn", "cannot be imported"),
        (f"{SUPPORT}.Missing", "has no 'Missing'"),
        (f"{SUPPORT}.NOT_CALLABLE", "not a class or a function"),
    ],
)
def test_bad_function_paths_are_explained(path, message):
    with pytest.raises(RolloutFunctionPathError, match=message):
        load_rollout_function(path)
