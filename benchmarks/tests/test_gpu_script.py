from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gpu.model_dir import ModelDirError, write_model_dir
from benchmarks.gpu.server import ServerPlan, router_command, sglang_command
from benchmarks.gpu.sglang_bench import build_parser, check_args


def _tokenizer_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tok"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json"):
        (folder / name).write_text("{}")
    return folder


def test_model_dir_holds_qwen3_0_6b_config_and_the_tokenizer(tmp_path: Path) -> None:
    model = write_model_dir(tmp_path / "model", _tokenizer_dir(tmp_path))
    config = json.loads((model / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_layers"], config["vocab_size"]) == (
        "qwen3",
        28,
        151936,
    )
    assert sorted(p.name for p in model.iterdir()) == [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
    ]


def test_model_dir_can_shrink_the_layer_count(tmp_path: Path) -> None:
    model = write_model_dir(tmp_path / "model", _tokenizer_dir(tmp_path), num_hidden_layers=2)
    assert json.loads((model / "config.json").read_text())["num_hidden_layers"] == 2


def test_model_dir_without_tokenizer_files_says_how_to_build_them(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError, match="tokenizers build"):
        write_model_dir(tmp_path / "model", tmp_path)


def test_server_command_uses_random_weights_on_loopback(tmp_path: Path) -> None:
    command = sglang_command(ServerPlan(model_dir=tmp_path, port=30000), python="python")
    assert command[:3] == ["python", "-m", "sglang.launch_server"]
    assert command[command.index("--load-format") + 1] == "dummy"
    assert command[command.index("--host") + 1] == "127.0.0.1"


def test_the_router_fronts_the_server_on_loopback_as_miles_starts_it() -> None:
    command = router_command("http://127.0.0.1:30000", 30001, python="python")
    assert command[:3] == ["python", "-m", "sglang_router.launch_router"]
    assert command[command.index("--worker-urls") + 1] == "http://127.0.0.1:30000"
    assert command[command.index("--host") + 1] == "127.0.0.1"


def test_the_router_is_on_unless_asked_off() -> None:
    assert build_parser().parse_args([]).no_router is False
    assert build_parser().parse_args(["--no-router"]).no_router is True


def test_parser_reads_concurrency_and_tasksets_lists() -> None:
    args = build_parser().parse_args(
        ["--concurrency", "8,64", "--tasksets", "mv-arith,mv-tools", "--dry-run"]
    )
    assert (args.concurrency, args.tasksets, args.dry_run) == (
        [8, 64],
        ["mv-arith", "mv-tools"],
        True,
    )


def test_parser_refuses_an_unknown_taskset(capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--tasksets", "mv-nope"])
    assert "mv-nope" in capsys.readouterr().err


def test_rollouts_per_call_must_be_a_multiple_of_the_group_size() -> None:
    with pytest.raises(SystemExit, match="--rollouts-per-call must be a positive multiple of 4"):
        check_args(build_parser().parse_args(["--rollouts-per-call", "10"]))
