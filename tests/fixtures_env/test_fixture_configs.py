import tomllib

import pytest
import verifiers.v1 as vf

from miles_verifiers_testkit.harness import FixtureHarness, FixtureHarnessConfig
from tests.fixture_tasksets import FIXTURE_TASKSETS
from tests.fixtures_env.fixture_env_support import (
    CONFIG_DIR,
    ScriptedClient,
    load_config,
    model_context,
)

NAMES = list(FIXTURE_TASKSETS)


def test_every_fixture_taskset_has_a_config():
    assert sorted(p.stem for p in CONFIG_DIR.glob("*.toml")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_config_builds_an_environment_on_the_fixture_harness(name):
    config = load_config(name)
    env = vf.Environment(config)
    assert config.taskset.id == name.replace("_", "-")
    assert not config.is_legacy
    assert config.harness.id == config.taskset.id  # the taskset's re-exported harness
    assert isinstance(config.harness, FixtureHarnessConfig)
    assert isinstance(env.harness, FixtureHarness)


@pytest.mark.parametrize("name", NAMES)
def test_config_taskset_loads_its_num_tasks(name):
    raw = tomllib.loads((CONFIG_DIR / f"{name}.toml").read_text())
    tasks = vf.Environment(load_config(name)).taskset.load()
    assert len(tasks) == raw["taskset"]["num_tasks"]
    assert len({type(t) for t in tasks}) == 1


@pytest.mark.parametrize("name", NAMES)
def test_config_bounds_the_turns_of_a_rollout(name):
    assert load_config(name).max_turns is not None


def test_compact_config_turns_compaction_on():
    assert load_config("mv_compact").harness.compact_every == 2


def test_faulty_config_leaves_the_rollout_timeout_to_each_task():
    assert load_config("mv_faulty").timeout.rollout is None


@pytest.mark.parametrize("name", ["mv_group", "mv_faulty"])
def test_group_reward_tasksets_refuse_single_rollout_episodes(name):
    env = vf.Environment(load_config(name))
    task = env.taskset.load()[0]
    with pytest.raises(ValueError, match="group_reward"):
        env.episode(task, model_context(ScriptedClient()), n=1)


@pytest.mark.parametrize(
    ("harness", "field"),
    [
        ({"compact_every": 0}, "compact_every"),
        ({"max_turns": 0}, "max_turns"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
    ],
)
def test_bad_harness_knobs_are_rejected_by_name(harness, field):
    with pytest.raises(ValueError, match=field):
        load_config("mv_arith", harness=harness)


def test_unknown_harness_knob_is_rejected():
    with pytest.raises(ValueError, match="compact_evry"):
        load_config("mv_arith", harness={"compact_evry": 2})
