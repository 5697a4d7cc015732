"""Where ``rollout`` writes: two distinct files, checked before anything runs; samples reach
disk as each call completes; a stream output is written to as it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from miles_verifiers_testkit.runner.outputs import (
    OutputPathError,
    OutputWriteError,
    check_output_paths,
    leftover_partials,
    run_outputs,
)
from tests.runner.runner_support import run_command


def test_one_relative_and_one_absolute_spelling_of_a_file_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputPathError, match="same file"):
        check_output_paths(Path("out/run.json"), tmp_path / "out" / "." / "run.json")


def test_a_symlink_to_the_samples_file_is_refused_as_metrics_output(tmp_path):
    (tmp_path / "samples.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "link.json").symlink_to(tmp_path / "samples.jsonl")
    with pytest.raises(OutputPathError, match="--output"):
        check_output_paths(tmp_path / "samples.jsonl", tmp_path / "link.json")


def test_a_hard_link_to_the_samples_file_is_refused_as_metrics_output(tmp_path):
    (tmp_path / "samples.jsonl").write_text("", encoding="utf-8")
    os.link(tmp_path / "samples.jsonl", tmp_path / "metrics.json")
    with pytest.raises(OutputPathError):
        check_output_paths(tmp_path / "samples.jsonl", tmp_path / "metrics.json")


def test_distinct_files_are_accepted(tmp_path):
    check_output_paths(tmp_path / "samples.jsonl", tmp_path / "metrics.json")


def test_rollout_with_both_outputs_on_one_path_exits_2_before_writing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = run_command(
        ["rollout", "--config", "mv-arith", "--rollout-batch-size", "1",
         "--rollout-max-response-len", "16", "--rollout-num-gpus", "1", "--num-rollout", "1",
         "--no-progress",
         "--output", "run.json", "--metrics-output", str(tmp_path / "run.json")]
    )  # fmt: skip
    assert code == 2, stderr
    assert "--metrics-output" in stderr and "same file" in stderr
    assert stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_written_samples_are_on_disk_in_a_partial_file_before_the_run_ends(tmp_path):
    output = tmp_path / "samples.jsonl"
    with run_outputs(output, tmp_path / "metrics.json") as outputs:
        outputs.write([{"rollout_id": 0}])
        assert outputs.partial is not None and outputs.partial.parent == tmp_path
        assert outputs.partial.read_text(encoding="utf-8") == '{"rollout_id": 0}\n'
        assert not output.exists()
        outputs.publish({"status": "interrupted"})
    assert output.read_text(encoding="utf-8") == '{"rollout_id": 0}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "samples.jsonl"]


def test_unpublished_outputs_leave_the_previous_pair_and_no_partial_file(tmp_path):
    output, metrics = tmp_path / "samples.jsonl", tmp_path / "metrics.json"
    output.write_text("previous\n", encoding="utf-8")
    with run_outputs(output, metrics) as outputs:
        outputs.write([{"rollout_id": 0}])
    assert output.read_text(encoding="utf-8") == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["samples.jsonl"]


def test_a_symlinked_output_replaces_its_target_and_stays_a_link(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "samples.jsonl").write_text("previous\n", encoding="utf-8")
    (tmp_path / "samples.jsonl").symlink_to(tmp_path / "runs" / "samples.jsonl")
    with run_outputs(tmp_path / "samples.jsonl", tmp_path / "metrics.json") as outputs:
        outputs.write([{"rollout_id": 0}])
        outputs.publish({})
    assert (tmp_path / "samples.jsonl").is_symlink()
    assert (tmp_path / "runs" / "samples.jsonl").read_text() == '{"rollout_id": 0}\n'


def test_a_partial_file_left_by_a_killed_run_is_found_beside_the_output(tmp_path):
    output = tmp_path / "samples.jsonl"
    context = run_outputs(output, tmp_path / "metrics.json")
    outputs = context.__enter__()  # not exited while looking: as if the run was killed
    outputs.write([{"rollout_id": 0}])
    assert leftover_partials(output) == [outputs.partial]
    assert leftover_partials(tmp_path / "other.jsonl") == []
    context.__exit__(None, None, None)


def test_two_streams_may_take_both_outputs(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "alias").symlink_to(tmp_path / "pipe")
    check_output_paths(tmp_path / "pipe", tmp_path / "alias")


def test_metrics_that_cannot_be_written_keep_the_samples_in_the_partial_file(tmp_path):
    (tmp_path / "metrics.json").mkdir()  # a directory: the metrics cannot go there
    with (
        pytest.raises(OutputWriteError, match="metrics.json") as failure,
        run_outputs(tmp_path / "samples.jsonl", tmp_path / "metrics.json") as outputs,
    ):
        outputs.write([{"rollout_id": 0}])
        partial = outputs.partial
        outputs.publish({})
    assert f"samples are kept in {partial}" in str(failure.value)
    assert partial is not None and partial.read_text() == '{"rollout_id": 0}\n'
