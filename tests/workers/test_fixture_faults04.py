"""The 0.4 fixture faults as Verifiers 0.4 itself records them: whole episodes of mv-faulty04 and
mv-dialogue04 run by ``env.slots()`` / ``env.run_slot()`` in the episodes' interpreter, against a
scripted model that answers right (``episodes04_support.py``). What each test reads is what the
adapter must read: ``trace.ok``, ``episode.ok``, ``is_timeout``, ``errors``. Skipped without a
worker interpreter that has Verifiers 0.4 (``tox -e verifiers04`` has one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.workers.worker04 import needs_verifiers04, run_in_worker04

pytestmark = needs_verifiers04

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "fixtures" / "configs" / "v04"


def run_slots(config: str, taskset: dict[str, Any], task_index: int, n: int) -> list[Any]:
    done = run_in_worker04(
        f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT / "tests" / "workers")!r})
        sys.argv[1:] = {[str(CONFIGS / config), json.dumps(taskset), str(task_index), str(n)]!r}
        import episodes04_support
        episodes04_support.main()
        """
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def faulty(kind: str, n: int = 2, **taskset: Any) -> list[Any]:
    """The ``n`` slots of mv-faulty04's task 0, which carries ``kind`` (``taskset``: more keys)."""
    keys = {"num_tasks": 1, "fault_rate": 1.0, "faults": [kind], **taskset}
    return run_slots("mv_faulty.toml", keys, 0, n)


def test_a_flaky_trace_recovers_under_agent_retries_in_every_slot_keeping_its_first_error():
    for slot in faulty("flaky_trace"):
        [trace] = slot["traces"]
        assert slot["ok"] and trace["ok"], slot
        assert [e["type"] for e in trace["errors"]] == ["HarnessError"], trace
        assert "flaky_trace" in trace["errors"][0]["message"]
        assert trace["reward"] == 1.0


def test_a_flaky_episode_recovers_under_env_retries_in_every_slot_keeping_its_first_error():
    for slot in faulty("flaky_episode"):
        assert slot["ok"], slot
        assert [e["type"] for e in slot["errors"]] == ["EnvError"], slot
        assert "flaky_episode" in slot["errors"][0]["message"]
        [trace] = slot["traces"]
        assert trace["ok"] and trace["errors"] == [] and trace["reward"] == 1.0


def test_a_slot_error_fails_the_first_slot_of_its_task_only():
    first, *others = faulty("slot_error", n=3)
    [trace] = first["traces"]
    assert not first["ok"] and not trace["ok"], first
    assert "slot_error" in trace["errors"][0]["message"]
    for slot in others:
        [trace] = slot["traces"]
        assert slot["ok"] and trace["ok"] and trace["errors"] == [] and trace["reward"] == 1.0


def test_a_slot_episode_error_fails_the_episode_of_the_first_slot_only_its_trace_ok():
    first, *others = faulty("slot_episode_error", n=3)
    [trace] = first["traces"]
    assert not first["ok"] and trace["ok"], first
    assert [e["type"] for e in first["errors"]] == ["EnvError"], first["errors"]
    assert "slot_episode_error" in first["errors"][0]["message"]
    for slot in others:
        assert slot["ok"] and slot["errors"] == [], slot


def test_an_agent_timeout_is_a_stop_the_trace_stays_ok_and_is_scored():
    # The conversation must end within the timeout for the reward to be 1.0: the config's 1 s
    # is too short on a loaded machine (the test command runs two envs at a time).
    [slot] = faulty("timeout", n=1, timeout_s=10.0, slow_step_s=12.0)
    [trace] = slot["traces"]
    assert slot["ok"] and trace["ok"] and trace["is_timeout"], slot
    assert trace["stop"] == "agent_timeout" and trace["errors"] == []
    assert trace["reward"] == 1.0


def test_a_harness_error_is_not_retried_by_the_rules_for_the_flaky_faults():
    for slot in faulty("harness_error"):
        [trace] = slot["traces"]
        assert not slot["ok"] and not trace["ok"], slot
        assert len(trace["errors"]) == 1, trace["errors"]


@pytest.mark.parametrize("round_", [1, 2])
def test_a_failing_quiz_master_fails_the_episode_while_the_assistants_trace_stays_ok(round_: int):
    taskset = {"num_tasks": 2, "master_fails_every": 2, "master_fails_at_round": round_}
    [slot] = run_slots("mv_dialogue.toml", taskset, 0, 1)
    traces = {t["agent"]: t for t in slot["traces"]}
    assert not slot["ok"] and slot["errors"] == [], slot
    master, assistant = traces["quiz_master"], traces["assistant"]
    assert not master["ok"] and not master["trainable"], master
    assert "quiz master crashed" in master["errors"][0]["message"]
    assert assistant["ok"] and assistant["trainable"] and assistant["errors"] == [], assistant
    assert assistant["turns"] == round_ - 1, "the dialogue stops at the failing round"


def test_a_task_the_quiz_master_is_not_told_to_fail_runs_every_round():
    taskset = {"num_tasks": 2, "master_fails_every": 2}
    [slot] = run_slots("mv_dialogue.toml", taskset, 1, 1)
    assert slot["ok"], slot
    assert {t["agent"]: t["turns"] for t in slot["traces"]} == {"assistant": 3, "quiz_master": 3}
