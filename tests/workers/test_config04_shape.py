"""A Verifiers 0.4 config is read as users ship it: the file ``vf-eval`` reads (the environment
under ``[env]``) is accepted as it is, its run settings set aside with a note naming the Miles
flag that decides each; and every refusal names the seat or table as written, with the fix
for that refusal. (Runs in the worker interpreter, with the real 0.4.0 config classes.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.workers.worker04 import needs_verifiers04, run_in_worker04

pytestmark = needs_verifiers04

CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "configs" / "v04"

# Each case: a name, the base fixture config, and a change to its data (a Python expression
# over `data`); the script answers what loading made of it.
CASES = {
    "vf_eval": ("mv_arith_vf_eval.toml", "data"),
    "as_env_config": ("mv_arith.toml", "data"),
    "seat_typo": (
        "mv_dialogue.toml",
        "{('assistent' if k == 'assistant' else k): v for k, v in data.items()}",
    ),
    "vf_eval_seat_key_typo": (
        "mv_arith_vf_eval.toml",
        "{**data, 'env': {**data['env'], 'agent': {**data['env']['agent'], 'max_turn': 3}}}",
    ),
    "top_level_max_turns": ("mv_arith.toml", "{**data, 'max_turns': 3}"),
    "dialogue_agent_table": ("mv_dialogue.toml", "{**data, 'agent': {'max_turns': 3}}"),
    "env_timeout_rollout": ("mv_arith.toml", "{**data, 'timeout': {'rollout': 30}}"),
    "stray_beside_env": (
        "mv_arith_vf_eval.toml",
        "{**data, 'taskset': {'id': 'mv-arith04'}}",
    ),
    "host_seat_remote_runtime": (
        "mv_dialogue.toml",
        "{**data, 'quiz_master': {**data['quiz_master'], 'runtime': {'type': 'prime'}}}",
    ),
    "vf_eval_remote_runtime": (
        "mv_arith_vf_eval.toml",
        "{**data, 'env': {**data['env'], 'agent': {**data['env']['agent'], "
        "'runtime': {'type': 'prime'}}}}",
    ),
}

LOAD = """
import json, sys, tomllib
from pathlib import Path
from miles_verifiers.episodes.v02.config import ConfigError
from miles_verifiers.episodes.v04.config import check_local_runtimes, read_config04

configs, cases = Path(sys.argv[1]), json.loads(sys.argv[2])
answers = {}
for name, (file, change) in cases.items():
    data = eval(change, {"data": tomllib.loads((configs / file).read_text())})
    try:
        config, shaped = read_config04(data, Path(file))
        check_local_runtimes(config, Path(file), shaped.prefix)
    except ConfigError as error:
        answers[name] = {"refused": str(error), "field": error.field}
    else:
        answers[name] = {"config": config.model_dump(mode="json"), "notes": list(shaped.notes)}
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def loaded() -> dict[str, Any]:
    done = run_in_worker04(
        "import sys; sys.argv[1:] = " + repr([str(CONFIGS), json.dumps(CASES)]) + "\n" + LOAD
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_vf_eval_file_loads_as_the_environment_config_under_its_env_table(loaded) -> None:
    assert "config" in loaded["vf_eval"], loaded["vf_eval"]
    assert loaded["vf_eval"]["config"] == loaded["as_env_config"]["config"]


def test_a_vf_eval_files_run_settings_are_set_aside_each_naming_the_miles_flag(loaded) -> None:
    notes = loaded["vf_eval"]["notes"]

    by_key = {note.split("`")[1]: note for note in notes}
    assert set(by_key) == {"model", "num_rollouts", "max_concurrent", "client", "sampling"}
    assert "--hf-checkpoint" in by_key["model"]
    assert "--n-samples-per-prompt" in by_key["num_rollouts"]
    assert "--rollout-temperature" in by_key["sampling"]
    assert loaded["as_env_config"]["notes"] == []


def test_a_seat_name_typo_names_the_table_and_the_seat_it_should_be(loaded) -> None:
    refused = loaded["seat_typo"]

    assert refused["field"] == "[assistent]"
    assert "rename [assistent] to [assistant]" in refused["refused"]
    assert "under [agent]" not in refused["refused"]


def test_a_key_typo_in_a_vf_eval_file_names_the_table_as_written(loaded) -> None:
    refused = loaded["vf_eval_seat_key_typo"]

    assert refused["field"] == "`max_turn` in [env.agent]"
    assert "rename `max_turn` to `max_turns`" in refused["refused"]


def test_a_top_level_seat_setting_is_moved_under_the_seats_table(loaded) -> None:
    refused = loaded["top_level_max_turns"]

    assert "`max_turns` is a setting of a seat" in refused["refused"]
    assert "move it under the seat's table: [agent]" in refused["refused"]


def test_an_agent_table_in_an_environment_with_other_seats_names_its_seats(loaded) -> None:
    refused = loaded["dialogue_agent_table"]

    assert "has no [agent] seat; its seats are [assistant], [quiz_master]" in refused["refused"]


def test_a_seat_timeout_in_the_environments_timeout_table_is_moved_to_the_seats(loaded) -> None:
    refused = loaded["env_timeout_rollout"]

    assert "move `rollout` to [agent.timeout]" in refused["refused"]


def test_a_table_beside_a_vf_eval_files_env_is_refused_naming_where_it_goes(loaded) -> None:
    refused = loaded["stray_beside_env"]

    assert refused["field"] == "[taskset]"
    assert "move it under [env] ([env.taskset])" in refused["refused"]


def test_a_host_seats_remote_runtime_names_the_seats_own_table(loaded) -> None:
    refused = loaded["host_seat_remote_runtime"]

    assert refused["field"] == "[quiz_master.runtime] type"
    assert "[agent.runtime]" not in refused["refused"]
    assert 'set [quiz_master.runtime] type = "subprocess"' in refused["refused"]


def test_a_remote_runtime_in_a_vf_eval_file_names_the_table_under_env(loaded) -> None:
    assert loaded["vf_eval_remote_runtime"]["field"] == "[env.agent.runtime] type"
