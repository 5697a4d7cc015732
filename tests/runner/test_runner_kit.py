"""The command line finds the test kit through its entry point and works without it."""

from __future__ import annotations

import pytest

from miles_verifiers.cli import arguments, kit
from miles_verifiers.cli import main as cli


@pytest.fixture
def no_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kit, "entry_points", lambda group: [])


def test_the_installed_kit_is_found_through_its_entry_point() -> None:
    found = kit.find_kit()

    assert isinstance(found, kit.EmbeddedKit)
    assert "Qwen/Qwen3-0.6B" in found.model_ids
    assert (found.config_dir / "mv_arith.toml").is_file()


@pytest.mark.usefixtures("no_kit")
def test_without_the_kit_the_command_line_offers_only_the_adapter_commands() -> None:
    commands = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]

    assert sorted(commands) == ["check", "rollout"]  # rollout only says what to install


@pytest.mark.usefixtures("no_kit")
def test_without_the_kit_rollout_says_what_to_install(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["rollout", "--config", "mv-arith", "--num-rollout", "2"])

    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("miles-verifiers rollout: error: rollout comes with the embedded ")
    assert "pip install miles-verifiers-testkit" in error


@pytest.mark.usefixtures("no_kit")
def test_without_the_kit_a_fixture_config_name_is_refused_but_paths_work(tmp_path) -> None:
    with pytest.raises(arguments.ConfigNameError, match="no fixture configs are installed"):
        arguments.resolve_config("mv-arith")
    assert arguments.resolve_config(str(tmp_path / "env.toml")) == tmp_path / "env.toml"


@pytest.mark.usefixtures("no_kit")
def test_without_the_kit_no_tokenizers_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    environ: dict[str, str] = {}

    kit.use_fixture_tokenizers(environ)

    assert environ == {}
