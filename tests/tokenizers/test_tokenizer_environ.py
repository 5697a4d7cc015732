"""Where the cache lives and the environment that makes it the offline source."""

from __future__ import annotations

import shlex
from pathlib import Path

import platformdirs
import pytest

from miles_verifiers_testkit.tokenizers import default_cache_dir, offline_environ
from miles_verifiers_testkit.tokenizers.environ import export_lines


def test_cache_dir_comes_from_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path


def test_cache_dir_defaults_to_the_user_cache_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MILES_VERIFIERS_CACHE", raising=False)
    assert default_cache_dir() == platformdirs.user_cache_path("miles-verifiers", appauthor=False)


def test_environment_points_huggingface_at_the_hub_folder_offline(tmp_path: Path) -> None:
    env = offline_environ(tmp_path)
    assert env["HF_HUB_CACHE"] == str(tmp_path / "hub")
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["TRANSFORMERS_OFFLINE"] == "1"


def test_environment_serves_every_tiktoken_lookup_from_one_folder(tmp_path: Path) -> None:
    env = offline_environ(tmp_path)
    names = ("TIKTOKEN_ENCODINGS_BASE", "TIKTOKEN_RS_CACHE_DIR", "TIKTOKEN_CACHE_DIR")
    assert {env[name] for name in names} == {str(tmp_path / "tiktoken")}


def test_environment_carries_the_cache_root_to_child_processes(tmp_path: Path) -> None:
    assert offline_environ(tmp_path)["MILES_VERIFIERS_CACHE"] == str(tmp_path)


def test_environment_defaults_to_the_default_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_CACHE", str(tmp_path))
    assert offline_environ()["HF_HUB_CACHE"] == str(tmp_path / "hub")


def test_export_lines_quote_paths_for_the_shell() -> None:
    (line,) = export_lines({"HF_HUB_CACHE": "/tmp/a b"})
    assert shlex.split(line) == ["export", "HF_HUB_CACHE=/tmp/a b"]
