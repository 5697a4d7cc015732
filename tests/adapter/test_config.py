"""Loading VERIFIERS_CONFIG and the taskset, with a clear error for every way it can fail."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from verifiers.v1 import EnvConfig, Environment

from miles_verifiers import versions
from miles_verifiers.episodes.v02.config import (
    ConfigSchemaError,
    EmptyTasksetError,
    HarnessNotInstalledError,
    LegacyConfigError,
    NoTasksetSelectedError,
    TasksetLoadError,
    TasksetNotInstalledError,
    UnsupportedHarnessError,
    install_command,
    load_env_config,
    load_taskset,
    plugin_module,
)
from miles_verifiers.protocol.config_file import (
    CONFIG_ENV_VAR,
    ConfigError,
    ConfigPathError,
    ConfigSyntaxError,
    config_path_from_env,
    read_config_file,
)
from miles_verifiers.trainer import construction
from miles_verifiers.trainer.backends.in_process import InProcessEpisodes
from miles_verifiers.trainer.construction import (
    GroupRewardSampleCountError,
    check_group_reward_sample_counts,
)
from miles_verifiers.trainer.options import UnsupportedOptionsError, validate_options
from miles_verifiers.versions import UnsupportedVersionError

# -- the path ------------------------------------------------------------------------------------


@pytest.mark.parametrize("environ", [{}, {CONFIG_ENV_VAR: ""}, {CONFIG_ENV_VAR: "   "}])
def test_unset_config_variable_names_the_variable_and_how_to_forward_it(environ):
    with pytest.raises(ConfigPathError) as caught:
        config_path_from_env(environ)
    assert caught.value.field == CONFIG_ENV_VAR
    assert "runtime_env" in str(caught.value)


def test_config_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert config_path_from_env({CONFIG_ENV_VAR: "env.toml"}) == tmp_path / "env.toml"


def test_missing_config_file_is_reported_with_its_absolute_path(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigPathError, match=str(missing)):
        read_config_file(missing)


def test_config_file_must_be_toml(write_config):
    path = write_config("taskset = {}", name="env.yaml")
    with pytest.raises(ConfigPathError, match=r"\.toml"):
        read_config_file(path)


def test_directory_named_like_toml_is_rejected(tmp_path):
    folder = tmp_path / "cfg.toml"
    folder.mkdir()
    with pytest.raises(ConfigPathError, match="is a directory"):
        read_config_file(folder)


def test_invalid_toml_reports_the_position(write_config):
    path = write_config("[taskset\nid = 1\n")
    with pytest.raises(ConfigSyntaxError, match="line 1"):
        read_config_file(path)


def test_uppercase_toml_suffix_is_accepted(write_config):
    path = write_config('[taskset]\nid = "x"\n', name="ENV.TOML")
    assert read_config_file(path) == {"taskset": {"id": "x"}}


# -- the config --------------------------------------------------------------------------------


def test_valid_config_loads_as_verifiers_env_config(make_taskset, write_config):
    taskset = make_taskset()
    config = load_env_config(
        write_config(f'max_turns = 4\n[taskset]\nid = "{taskset}"\ncount = 2\n')
    )
    assert isinstance(config, EnvConfig)
    assert config.taskset.id == taskset and config.taskset.count == 2
    assert config.max_turns == 4


def test_legacy_v0_config_is_rejected(write_config):
    with pytest.raises(LegacyConfigError) as caught:
        load_env_config(write_config('id = "gsm8k"\n[args]\nsplit = "test"\n'))
    assert caught.value.field == "id"
    assert "[taskset]" in caught.value.fix


def test_legacy_rule_agrees_with_verifiers_is_legacy():
    assert EnvConfig.model_validate({"id": "gsm8k"}).is_legacy


def test_config_without_taskset_is_rejected(write_config):
    with pytest.raises(NoTasksetSelectedError):
        load_env_config(write_config("max_turns = 3\n"))


def test_taskset_that_is_not_a_table_is_a_schema_error(write_config):
    with pytest.raises(ConfigSchemaError, match="must be a table"):
        load_env_config(write_config('taskset = "mv-arith"\n'))


def test_unknown_taskset_key_is_a_schema_error_naming_the_field(make_taskset, write_config):
    taskset = make_taskset()
    with pytest.raises(ConfigSchemaError) as caught:
        load_env_config(write_config(f'[taskset]\nid = "{taskset}"\nbogus = 1\n'))
    assert caught.value.errors == (("taskset.bogus", "Extra inputs are not permitted"),)
    assert caught.value.field == "taskset.bogus"


def test_wrong_type_in_top_level_field_is_a_schema_error(make_taskset, write_config):
    taskset = make_taskset()
    with pytest.raises(ConfigSchemaError) as caught:
        load_env_config(write_config(f'max_turns = "many"\n[taskset]\nid = "{taskset}"\n'))
    assert caught.value.field == "max_turns"


def test_schema_error_lists_at_most_five_fields(make_taskset, write_config):
    taskset = make_taskset()
    extra = "\n".join(f"k{i} = 1" for i in range(8))
    with pytest.raises(ConfigSchemaError) as caught:
        load_env_config(write_config(f'[taskset]\nid = "{taskset}"\n{extra}\n'))
    assert len(caught.value.errors) == 8
    assert "and 3 more" in str(caught.value)


def test_responses_dialect_harness_is_rejected(make_taskset, write_config):
    taskset = make_taskset()
    with pytest.raises(UnsupportedHarnessError) as caught:
        load_env_config(write_config(f'[taskset]\nid = "{taskset}"\n[harness]\nid = "codex"\n'))
    assert caught.value.field == "harness.id"
    assert "Responses" in str(caught.value)


def test_chat_harness_is_accepted(make_taskset, write_config):
    taskset = make_taskset()
    config = load_env_config(write_config(f'[taskset]\nid = "{taskset}"\n[harness]\nid = "null"\n'))
    assert config.harness.id == "null"


def test_missing_local_taskset_names_pip_install(write_config):
    with pytest.raises(TasksetNotInstalledError) as caught:
        load_env_config(write_config('[taskset]\nid = "mv-not-installed"\n'))
    assert caught.value.module == "mv_not_installed"
    assert caught.value.install_command == "pip install mv-not-installed"
    assert "pip install mv-not-installed" in str(caught.value)


def test_missing_hub_taskset_names_prime_env_install_without_touching_the_network(write_config):
    with pytest.raises(TasksetNotInstalledError) as caught:
        load_env_config(write_config('[taskset]\nid = "someorg/mv-hub-only@1.2"\n'))
    assert caught.value.install_command == "prime env install someorg/mv-hub-only@1.2"
    assert caught.value.module == "mv_hub_only"


def test_missing_harness_package_is_reported(make_taskset, write_config):
    taskset = make_taskset()
    with pytest.raises(HarnessNotInstalledError, match="pip install mv-no-harness"):
        load_env_config(
            write_config(f'[taskset]\nid = "{taskset}"\n[harness]\nid = "mv-no-harness"\n')
        )


@pytest.mark.parametrize(
    ("plugin_id", "module", "command"),
    [
        ("gsm8k-v1", "gsm8k_v1", "pip install gsm8k-v1"),
        ("Org/My-Env@0.3", "my_env", "prime env install Org/My-Env@0.3"),
        ("org/name", "name", "prime env install org/name"),
    ],
)
def test_plugin_ids_map_to_verifiers_module_names_and_install_commands(plugin_id, module, command):
    assert plugin_module(plugin_id) == module
    assert install_command(plugin_id) == command


def test_taskset_module_without_exports_is_a_load_error(tmp_path, monkeypatch, write_config):
    package = tmp_path / "mvtest_noexport"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TasksetLoadError, match="__all__"):
        load_env_config(write_config('[taskset]\nid = "mvtest-noexport"\n'))


# -- the taskset -------------------------------------------------------------------------------


def test_taskset_loads_every_task_into_a_real_environment(make_taskset, write_config):
    taskset = make_taskset()
    loaded = load_taskset(
        load_env_config(write_config(f'[taskset]\nid = "{taskset}"\ncount = 4\n'))
    )
    assert isinstance(loaded.environment, Environment)
    assert [t.data.idx for t in loaded.tasks] == [0, 1, 2, 3]
    assert loaded.has_group_reward is False


def test_group_reward_tasks_are_detected(make_taskset, write_config):
    taskset = make_taskset(group_reward=True)
    loaded = load_taskset(load_env_config(write_config(f'[taskset]\nid = "{taskset}"\n')))
    assert loaded.has_group_reward is True


def test_zero_tasks_is_an_error(make_taskset, write_config):
    taskset = make_taskset()
    with pytest.raises(EmptyTasksetError, match="zero tasks"):
        load_taskset(load_env_config(write_config(f'[taskset]\nid = "{taskset}"\ncount = 0\n')))


def test_failing_taskset_load_is_wrapped_with_its_cause(make_taskset, write_config):
    taskset = make_taskset()
    with pytest.raises(TasksetLoadError, match="dataset shard missing"):
        load_taskset(load_env_config(write_config(f'[taskset]\nid = "{taskset}"\nfail = true\n')))


# -- group rewards vs sample counts -------------------------------------------------------------


def test_group_reward_needs_two_train_samples(make_args):
    options = validate_options(make_args(n_samples_per_prompt=1))
    with pytest.raises(GroupRewardSampleCountError) as caught:
        check_group_reward_sample_counts(True, options)
    assert caught.value.flags == ["--n-samples-per-prompt"]
    assert "--n-samples-per-prompt 2" in str(caught.value)


def test_group_reward_needs_two_eval_samples_when_eval_runs(make_args):
    options = validate_options(make_args(eval_interval=5, n_samples_per_eval_prompt=1))
    with pytest.raises(GroupRewardSampleCountError) as caught:
        check_group_reward_sample_counts(True, options)
    assert caught.value.flags == ["--n-samples-per-eval-prompt"]


def test_both_short_sample_counts_are_reported_together(make_args):
    options = validate_options(
        make_args(eval_interval=5, n_samples_per_prompt=1, n_samples_per_eval_prompt=1)
    )
    with pytest.raises(GroupRewardSampleCountError) as caught:
        check_group_reward_sample_counts(True, options)
    assert caught.value.flags == ["--n-samples-per-prompt", "--n-samples-per-eval-prompt"]


def test_eval_sample_count_is_ignored_without_eval(make_args):
    check_group_reward_sample_counts(True, validate_options(make_args(n_samples_per_eval_prompt=1)))


def test_train_sample_count_is_ignored_for_eval_only_runs(make_args):
    options = validate_options(make_args(num_rollout=0, eval_interval=1, n_samples_per_prompt=1))
    check_group_reward_sample_counts(True, options)


def test_sample_counts_do_not_matter_without_group_rewards(make_args):
    check_group_reward_sample_counts(False, validate_options(make_args(n_samples_per_prompt=1)))


# -- the whole sequence ---------------------------------------------------------------------


def too_new_renderers(name: str) -> str:
    return "0.1.12" if name == "renderers" else importlib.metadata.version(name)


def prepare(args: Any, environ: dict[str, str]) -> dict[str, Any]:
    """The construction stages up to the group-reward counts, episodes in this process."""
    given = construction.inputs(
        args,
        environ=environ,
        use_miles=False,
        dispatch_budget_factor=1,
        episodes=InProcessEpisodes(),
    )
    names = ("options", "config", "taskset", "group reward")
    return construction.build(given, [s for s in construction.STAGES if s.name in names])


def test_construction_describes_the_taskset_with_the_versions_of_the_episode_side(
    make_taskset, write_config, make_args
):
    taskset = make_taskset()
    path = write_config(f'[taskset]\nid = "{taskset}"\n')
    made = prepare(make_args(), environ={CONFIG_ENV_VAR: str(path)})
    assert made["config_path"] == path
    assert made["options"].rollout_batch_size == 4
    assert len(made["description"].tasks) == 3
    assert made["description"].versions["verifiers"] == "0.2.0"


def test_the_episode_side_refuses_an_unsupported_version_before_loading_the_config(
    make_taskset, write_config, make_args, monkeypatch
):
    installed = versions.installed_versions
    monkeypatch.setattr(
        versions,
        "installed_versions",
        lambda names, version_of=None: installed(names, too_new_renderers),
    )
    path = write_config('[taskset]\nid = "mv-not-installed"\n')
    with pytest.raises(UnsupportedVersionError):
        prepare(make_args(), environ={CONFIG_ENV_VAR: str(path)})


def test_option_problem_is_reported_before_config_problem(make_args):
    with pytest.raises(UnsupportedOptionsError):
        prepare(make_args(partial_rollout=True), environ={})


def test_config_problem_is_reported_before_taskset_problem(write_config, make_args):
    path = write_config('[taskset\nid = "mv-not-installed"\n')
    with pytest.raises(ConfigSyntaxError):
        prepare(make_args(), environ={CONFIG_ENV_VAR: str(path)})


def test_taskset_problem_is_reported_before_group_reward_counts(
    make_taskset, write_config, make_args
):
    taskset = make_taskset(group_reward=True)
    path = write_config(f'[taskset]\nid = "{taskset}"\ncount = 0\n')
    with pytest.raises(EmptyTasksetError):
        prepare(make_args(n_samples_per_prompt=1), environ={CONFIG_ENV_VAR: str(path)})


def test_group_reward_counts_are_checked_last(make_taskset, write_config, make_args):
    taskset = make_taskset(group_reward=True)
    path = write_config(f'[taskset]\nid = "{taskset}"\n')
    with pytest.raises(GroupRewardSampleCountError):
        prepare(make_args(n_samples_per_prompt=1), environ={CONFIG_ENV_VAR: str(path)})


def test_every_config_error_names_a_field_and_a_fix(write_config):
    with pytest.raises(ConfigError) as caught:
        load_env_config(write_config('id = "legacy"\n'))
    assert caught.value.field and caught.value.fix and "Fix:" in str(caught.value)


def test_config_errors_change_nothing_on_disk(write_config, tmp_path: Path):
    path = write_config('[taskset]\nid = "mv-not-installed"\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(TasksetNotInstalledError):
        load_env_config(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert path.read_text() == '[taskset]\nid = "mv-not-installed"\n'


@pytest.mark.skipif(
    importlib.util.find_spec("mv_arith") is None, reason="fixture taskset mv-arith not installed"
)
def test_project_fixture_taskset_loads(write_config):
    loaded = load_taskset(load_env_config(write_config('[taskset]\nid = "mv-arith"\n')))
    assert loaded.tasks
