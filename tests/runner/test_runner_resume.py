"""The resume command: the interrupted command line, carrying on from the saved cursor."""

from __future__ import annotations

import os
from pathlib import Path

from miles_verifiers_testkit.runner.resume import ResumePoint, resume_words


def _resume(words: list[str], tmp_path: Path, **kwargs: object) -> list[str]:
    options: dict = {
        "save_dir": str(tmp_path / "ckpt"),
        "evaluates": False,
        "output": tmp_path / "samples.jsonl",
        "metrics_output": tmp_path / "metrics.json",
        "point": ResumePoint(start_rollout_id=15, evaluate_first=False),
        **kwargs,
    }
    point = options.pop("point")
    return resume_words(words, point, **options)


def _value(words: list[str], flag: str) -> str:
    assert words.count(flag) == 1, words
    return words[words.index(flag) + 1]


def test_the_resumed_run_starts_at_the_next_rollout_from_the_saved_cursor(tmp_path):
    words = ["rollout", "--num-rollout", "100", "--start-rollout-id", "3", "--save", "ckpt"]
    resumed = _resume(words, tmp_path, save_dir="ckpt")
    assert _value(resumed, "--start-rollout-id") == "15"
    assert _value(resumed, "--load") == "ckpt"
    assert resumed[:5] == ["rollout", "--num-rollout", "100", "--save", "ckpt"]


def test_an_earlier_load_directory_gives_way_to_the_save_directory(tmp_path):
    resumed = _resume(["rollout", "--load=old", "--save", "ckpt"], tmp_path, save_dir="ckpt")
    assert "--load=old" not in resumed and _value(resumed, "--load") == "ckpt"


def test_without_save_no_load_is_added(tmp_path):
    assert "--load" not in _resume(["rollout"], tmp_path, save_dir=None)


def test_regular_outputs_get_names_of_their_own_so_the_interrupted_ones_are_kept(tmp_path):
    words = ["rollout", "--output", str(tmp_path / "samples.jsonl")]
    resumed = _resume(words, tmp_path)
    assert _value(resumed, "--output") == str(tmp_path / "samples.from-15.jsonl")
    assert _value(resumed, "--metrics-output") == str(tmp_path / "metrics.from-15.json")


def test_a_resumed_output_name_is_not_stacked(tmp_path):
    resumed = _resume(["rollout"], tmp_path, output=tmp_path / "samples.from-15.jsonl")
    assert _value(resumed, "--output") == str(tmp_path / "samples.from-15.jsonl")


def test_a_stream_output_stays_as_it_is(tmp_path):
    os.mkfifo(tmp_path / "samples.fifo")
    resumed = _resume(["rollout"], tmp_path, output=tmp_path / "samples.fifo")
    assert _value(resumed, "--output") == str(tmp_path / "samples.fifo")


def test_a_run_that_evaluates_skips_the_eval_before_its_first_rollout_when_none_is_owed(tmp_path):
    resumed = _resume(["rollout", "--eval-interval", "2"], tmp_path, evaluates=True)
    assert resumed.count("--skip-eval-before-train") == 1


def test_an_evaluation_the_interruption_cut_off_runs_first_in_the_resumed_run(tmp_path):
    words = ["rollout", "--eval-interval", "2", "--skip-eval-before-train"]
    point = ResumePoint(start_rollout_id=2, evaluate_first=True)
    assert "--skip-eval-before-train" not in _resume(words, tmp_path, evaluates=True, point=point)
