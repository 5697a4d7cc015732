"""``rollout`` end to end: the real rollout function, fixture taskset and loopback engine."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from miles_verifiers_testkit.engine import serve_engine
from tests.runner.runner_support import run_command

pytestmark = pytest.mark.slow

BATCH, N, ROLLOUTS, EVAL_TASKS = 2, 2, 2, 5


@dataclass(frozen=True)
class Finished:
    code: int
    stdout: str
    stderr: str
    output: Path
    metrics: Path


def small_arith_config(directory: Path, tasks: int = EVAL_TASKS) -> Path:
    path = directory / "arith.toml"
    path.write_text(f'max_turns = 4\n\n[taskset]\nid = "mv-arith"\nnum_tasks = {tasks}\nseed = 0\n')
    return path


def rollout_argv(tmp: Path, config: Path, *extra: str) -> list[str]:
    return [
        "rollout",
        "--config", str(config),
        "--rollout-batch-size", str(BATCH),
        "--n-samples-per-prompt", str(N),
        "--num-rollout", str(ROLLOUTS),
        "--rollout-max-response-len", "64",
        "--rollout-num-gpus", "1",
        "--output", str(tmp / "samples.jsonl"),
        "--metrics-output", str(tmp / "metrics.json"),
        "--no-progress",
        *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    tmp = tmp_path_factory.mktemp("rollout")
    argv = rollout_argv(
        tmp, small_arith_config(tmp), "--eval-interval", str(ROLLOUTS), "--skip-eval-before-train"
    )
    code, stdout, stderr = run_command(argv)
    return Finished(code, stdout, stderr, tmp / "samples.jsonl", tmp / "metrics.json")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rollout_succeeds(finished):
    assert finished.code == 0, finished.stderr


def test_jsonl_has_one_line_per_train_sample_plus_eval_samples(finished):
    assert len(_lines(finished.output)) == ROLLOUTS * BATCH * N + EVAL_TASKS


def test_train_lines_cover_each_rollout_id_with_a_full_batch(finished):
    train = [line for line in _lines(finished.output) if not line["evaluation"]]
    by_rollout = {
        rid: sum(1 for line in train if line["rollout_id"] == rid) for rid in range(ROLLOUTS)
    }
    assert by_rollout == {rid: BATCH * N for rid in range(ROLLOUTS)}


def test_train_samples_carry_tokens_logprobs_and_a_reward(finished):
    for line in _lines(finished.output):
        sample = line["sample"]
        assert len(sample["rollout_log_probs"]) == sample["response_length"] > 0
        assert len(sample["tokens"]) > sample["response_length"]
        assert isinstance(sample["reward"], float)


def test_eval_lines_are_marked_and_name_the_env(finished):
    evals = [line for line in _lines(finished.output) if line["evaluation"]]
    assert {(line["rollout_id"], line["env_id"]) for line in evals} == {(ROLLOUTS - 1, "mv-arith")}


def test_metrics_json_has_a_record_per_call(finished):
    document = json.loads(finished.metrics.read_text())
    assert [call["rollout_id"] for call in document["train"]] == list(range(ROLLOUTS))
    assert [call["rollout_id"] for call in document["eval"]] == [ROLLOUTS - 1]
    assert document["summary"]["samples"] == ROLLOUTS * BATCH * N
    assert document["args"]["rollout_global_dataset"] is False


def test_metrics_json_records_what_the_trainer_and_the_episodes_ran(finished):
    from miles_verifiers.protocol.messages import PROTOCOL_VERSION

    versions = json.loads(finished.metrics.read_text())["versions"]
    assert versions["trainer"]["verifiers"] == "0.2.0"
    assert versions["trainer"]["protocol"] == PROTOCOL_VERSION
    assert {"python", "renderers"} <= set(versions["trainer"])
    assert versions["episode_python"] is None  # in Miles' process: the trainer's versions
    assert versions["episodes"] == versions["trainer"]


def _cell(text: str, label: str) -> str:
    match = re.search(rf"│ {re.escape(label)}\s+│\s+(.+?) │", text)
    assert match, f"no {label!r} row in:\n{text}"
    return match.group(1).strip()


def test_summary_counts_groups_and_samples(finished):
    assert _cell(finished.stdout, "groups") == str(ROLLOUTS * BATCH)
    assert _cell(finished.stdout, "samples") == str(ROLLOUTS * BATCH * N)
    assert _cell(finished.stdout, "groups dropped") == "none"


def test_summary_shows_the_eval_rewards_of_the_env(finished):
    (row,) = [line for line in finished.stdout.splitlines() if "mv-arith" in line]
    assert f" {EVAL_TASKS} " in row


def test_summary_reports_every_headline(finished):
    text = finished.stdout
    assert "Rollout summary" in text and "Evaluation" in text
    for label in ("samples", "reward mean", "groups dropped", "truncated", "tokens/s", "wall time"):
        assert label in text
    assert f"samples: {ROLLOUTS * BATCH * N + EVAL_TASKS} lines" in text


def test_rollout_against_an_engine_url(tmp_path):
    with serve_engine() as engine:
        code, _, stderr = run_command(
            rollout_argv(
                tmp_path,
                small_arith_config(tmp_path),
                "--num-rollout",
                "1",
                "--engine-url",
                engine.base_url,
            )
        )
        served = engine.engine.stats().generate_calls
    assert code == 0, stderr
    assert len(_lines(tmp_path / "samples.jsonl")) == BATCH * N
    assert served >= BATCH * N


def test_construction_error_is_one_line_and_writes_nothing(tmp_path):
    code, _, stderr = run_command(rollout_argv(tmp_path, small_arith_config(tmp_path), "--use-opd"))
    assert code == 1
    assert "Traceback" not in stderr
    assert stderr.startswith("miles-verifiers rollout: error:") and "--use-opd" in stderr
    assert not (tmp_path / "samples.jsonl").exists()


def test_bad_flag_values_exit_with_usage_status(tmp_path):
    code, _, stderr = run_command(
        rollout_argv(tmp_path, small_arith_config(tmp_path), "--kl_coef", "1")
    )
    assert code == 2 and "--kl-coef" in stderr


def test_missing_num_rollout_is_a_usage_error(tmp_path):
    argv = rollout_argv(tmp_path, small_arith_config(tmp_path))
    del argv[argv.index("--num-rollout") : argv.index("--num-rollout") + 2]
    code, _, stderr = run_command(argv)
    assert code == 2 and "--num-rollout" in stderr


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_a_call_timeout_that_is_not_a_positive_finite_number_is_a_usage_error(tmp_path, value):
    argv = rollout_argv(tmp_path, small_arith_config(tmp_path), "--call-timeout", value)
    code, _, stderr = run_command(argv)
    assert code == 2 and "--call-timeout" in stderr
    assert not (tmp_path / "samples.jsonl").exists()
