"""The ``tokenizers`` subcommand."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from miles_verifiers_testkit.tokenizers import BuildReport, offline_environ
from miles_verifiers_testkit.tokenizers.cli import register
from miles_verifiers_testkit.tokenizers.environ import export_lines


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="miles-verifiers")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_build_on_a_complete_cache_prints_exports_and_reuse(
    fresh_build: BuildReport, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_cli(["tokenizers", "build", "--cache-dir", str(fresh_build.cache_dir)])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.splitlines() == export_lines(offline_environ(fresh_build.cache_dir))
    assert "reused" in err and "built" not in err


def test_env_prints_the_export_lines_of_a_built_cache(
    fresh_build: BuildReport, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["tokenizers", "env", "--cache-dir", str(fresh_build.cache_dir)]) == 0
    assert capsys.readouterr().out.splitlines() == export_lines(
        offline_environ(fresh_build.cache_dir)
    )


def test_env_on_an_unbuilt_cache_fails_and_says_how_to_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["tokenizers", "env", "--cache-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "tokenizers build" in captured.err


def test_subcommand_requires_an_action() -> None:
    with pytest.raises(SystemExit):
        run_cli(["tokenizers"])


def test_module_entry_point_runs_the_same_actions(fresh_build: BuildReport) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "miles_verifiers_testkit.tokenizers",
            "env",
            "--cache-dir",
            str(fresh_build.cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == export_lines(offline_environ(fresh_build.cache_dir))


def test_build_into_a_path_that_is_a_file_fails_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("x")
    assert run_cli(["tokenizers", "build", "--cache-dir", str(not_a_folder)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "tokenizers build failed" in captured.err
    assert not_a_folder.read_text() == "x"
