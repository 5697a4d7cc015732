"""Where ``rollout`` writes: two distinct files, checked before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from miles_verifiers._runner.outputs import OutputPathError, check_output_paths

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
