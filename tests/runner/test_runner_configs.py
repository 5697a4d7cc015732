"""``--config``: fixture names resolve to the packaged TOML files; paths pass through."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers.cli.arguments import ConfigNameError, resolve_config
from miles_verifiers.cli.kit import fixture_config_names


def test_fixture_name_resolves_to_the_packaged_config():
    path = resolve_config("mv-arith")
    assert path.name == "mv_arith.toml" and path.is_file()


def test_fixture_name_with_underscores_resolves_too():
    assert resolve_config("mv_arith") == resolve_config("mv-arith")


def test_every_fixture_config_is_listed_by_its_dashed_name():
    assert {"mv-arith", "mv-group", "mv-tools"} <= set(fixture_config_names())


def test_a_toml_path_is_made_absolute_without_being_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config("envs/missing.toml") == tmp_path / "envs" / "missing.toml"


def test_an_unknown_name_lists_the_fixture_names():
    with pytest.raises(ConfigNameError) as error:
        resolve_config("mv-nothing")
    assert "mv-arith" in str(error.value)


def test_an_empty_config_value_is_refused():
    with pytest.raises(ConfigNameError, match="empty"):
        resolve_config("  ")


def test_a_relative_dot_path_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config("./env") == Path(tmp_path / "env")
