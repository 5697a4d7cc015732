"""``rollout`` on a user simulator with Qwen3 thinking on: every branch is trained.

With thinking on, Qwen3's template drops earlier reasoning from the history, so each new user
turn re-renders the replies before it and the trace forks, one branch per assistant turn.
Through the command line, as a user would run it, each such branch must come back as a sample
of its rollout (siblings share the rollout's ``rollout_id`` and reward).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_testkit.engine import EngineConfig, PolicyConfig, serve_engine
from tests.runner.runner_support import run_command

pytestmark = pytest.mark.slow

# Two groups of one sample: rollout ids run across groups, and each rollout starts a user
# simulator (seconds of CPU).
ROUNDS, BATCH, N = 3, 2, 1


def dialogue_config(directory: Path) -> Path:
    path = directory / "dialogue.toml"
    path.write_text(
        "max_turns = 8\n\n"
        f'[taskset]\nid = "mv-dialogue"\nnum_tasks = {BATCH}\nseed = 0\nrounds = {ROUNDS}\n'
    )
    return path


@pytest.fixture(scope="module")
def train_lines(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("thinking-dialogue")
    thinking_engine = EngineConfig(policy=PolicyConfig(thinking=True))
    with serve_engine(thinking_engine) as engine:
        code, _, stderr = run_command(
            [
                "rollout",
                "--config", str(dialogue_config(tmp)),
                "--apply-chat-template-kwargs", '{"enable_thinking": true}',
                "--engine-url", engine.base_url,
                "--rollout-batch-size", str(BATCH),
                "--n-samples-per-prompt", str(N),
                "--num-rollout", "1",
                "--rollout-max-response-len", "256",
                "--rollout-num-gpus", "1",
                "--output", str(tmp / "samples.jsonl"),
                "--metrics-output", str(tmp / "metrics.json"),
                "--no-progress",
            ]
        )  # fmt: skip
    assert code == 0, stderr
    lines = [json.loads(line) for line in (tmp / "samples.jsonl").read_text().splitlines()]
    return [line for line in lines if not line["evaluation"]]


def rollouts(lines: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The train samples of each rollout, keyed by the rollout_id Miles weighs them by."""
    by_rollout: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by_rollout[line["sample"]["rollout_id"]].append(line["sample"])
    return dict(by_rollout)


def test_every_rollout_of_the_batch_comes_back_under_its_own_rollout_id(train_lines):
    assert sorted(rollouts(train_lines)) == list(range(BATCH * N))


def test_every_branch_of_a_thinking_dialogue_is_a_sample_of_its_rollout(train_lines):
    for rollout_id, siblings in rollouts(train_lines).items():
        branches = [s["metadata"]["verifiers"]["branch"] for s in siblings]
        assert [b["number"] for b in branches] == list(range(ROUNDS)), (
            f"rollout {rollout_id}: expected one sample per assistant turn, got {branches}"
        )
        assert {(b["of"], b["graph_branches"]) for b in branches} == {(ROUNDS, ROUNDS)}


def test_siblings_share_one_reward_and_one_task(train_lines):
    for siblings in rollouts(train_lines).values():
        assert len({s["reward"] for s in siblings}) == 1
        assert len({s["group_index"] for s in siblings}) == 1


def test_each_sibling_trains_its_own_reply_from_its_first_response_token(train_lines):
    for siblings in rollouts(train_lines).values():
        for sample in siblings:
            assert sample["loss_mask"][0] == 1
            assert len(sample["loss_mask"]) == sample["response_length"]
            assert len(sample["rollout_log_probs"]) == sample["response_length"]
