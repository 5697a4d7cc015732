"""``check``: every construction problem, reported without running or contacting an engine."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from miles_verifiers.engine.routers import RouterKind
from miles_verifiers.trainer.engine_settings import router_drop_warning
from tests.runner.runner_support import run_command

pytestmark = pytest.mark.slow

VALID = [
    "--rollout-batch-size", "2",
    "--n-samples-per-prompt", "2",
    "--num-rollout", "1",
    "--rollout-max-response-len", "64",
    "--rollout-num-gpus", "1",
]  # fmt: skip


@pytest.fixture
def silent_router() -> Iterator[list[str]]:
    """A listening socket passed as the router address; the test asserts nobody connected."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        yield ["--sglang-router-ip", "127.0.0.1", "--sglang-router-port", str(port)]
        with pytest.raises(BlockingIOError):
            listener.accept()  # raises when no connection is waiting


def test_check_passes_and_summarizes_a_valid_run(silent_router):
    code, stdout, stderr = run_command(["check", "--config", "mv-arith", *VALID, *silent_router])
    assert code == 0, stdout + stderr
    assert stdout.startswith("OK")
    for expected in ("env: mv-arith", "tasks: 32", "group reward: no", "max_tokens 64"):
        assert expected in stdout


def test_check_names_the_router_miles_runs_and_the_keys_it_drops(silent_router):
    code, stdout, stderr = run_command(["check", "--config", "mv-arith", *VALID, *silent_router])
    assert code == 0, stdout + stderr
    (line,) = [line for line in stdout.splitlines() if line.strip().startswith("router:")]
    assert "sglang-router" in line and "logit_bias" in line


def test_logit_bias_through_the_real_router_is_warned_about_naming_the_fix():
    values = {"temperature": 1.0, "logit_bias": {}}
    warning = router_drop_warning(values, RouterKind.SGLANG_ROUTER, "train")
    assert warning is not None
    assert "logit_bias" in warning and "--use-miles-router" in warning


def test_a_pass_through_router_keeps_every_sampling_key():
    assert router_drop_warning({"logit_bias": {}}, RouterKind.PASS_THROUGH, "train") is None


def test_check_warns_about_a_key_the_router_drops_and_passes_like_construction(
    silent_router, monkeypatch
):
    import miles_verifiers.trainer.construction as construction

    configured = construction.sampling_config_values
    monkeypatch.setattr(
        construction,
        "sampling_config_values",
        lambda sampling, seed=None: {**configured(sampling, seed), "logit_bias": {"7": 1.0}},
    )
    code, stdout, stderr = run_command(["check", "--config", "mv-arith", *VALID, *silent_router])
    assert code == 0, stdout + stderr
    assert "warning" in stdout and "logit_bias" in stdout and "--use-miles-router" in stdout


def test_check_reports_a_rejected_option_and_a_bad_config_together(tmp_path, silent_router):
    config = tmp_path / "bad.toml"
    config.write_text('[taskset]\nid = "mv-arith"\nnum_tasks = "many"\n')
    argv = ["check", "--config", str(config), *VALID, "--partial-rollout", *silent_router]
    code, stdout, _ = run_command(argv)
    assert code == 1
    assert "2 problems" in stdout
    assert "options: --partial-rollout" in stdout
    assert "config:" in stdout and "taskset.num_tasks" in stdout


def test_check_reports_independent_option_hook_and_config_problems_all_at_once(tmp_path):
    argv = [
        "check", "--config", str(tmp_path / "absent.toml"), *VALID,
        "--custom-rm-path", "tests.runner.no_such_module.reward",
        "--rollout-top-p", "2",
    ]  # fmt: skip
    code, stdout, _ = run_command(argv)
    assert code == 1
    assert "3 problems" in stdout
    assert "options: --rollout-top-p" in stdout
    assert "hooks: --custom-rm-path" in stdout
    assert "config:" in stdout and "does not exist" in stdout


def test_check_reports_a_missing_config_file(tmp_path):
    code, stdout, _ = run_command(["check", "--config", str(tmp_path / "absent.toml"), *VALID])
    assert code == 1 and "does not exist" in stdout


def test_check_reports_an_unknown_fixture_name_with_the_known_ones():
    code, stdout, _ = run_command(["check", "--config", "mv-nothing", *VALID])
    assert code == 1 and "mv-arith" in stdout


def test_check_without_any_config_names_the_variable(monkeypatch):
    monkeypatch.delenv("VERIFIERS_CONFIG", raising=False)
    code, stdout, _ = run_command(["check", *VALID])
    assert code == 1 and "VERIFIERS_CONFIG is not set" in stdout


def test_check_reads_the_config_from_the_environment(monkeypatch):
    config = Path(__file__).parents[2] / "fixtures" / "configs" / "mv_arith.toml"
    monkeypatch.setenv("VERIFIERS_CONFIG", str(config))
    code, stdout, _ = run_command(["check", *VALID])
    assert code == 0 and "env: mv-arith" in stdout


def test_check_reports_group_reward_tasks_with_one_sample(silent_router):
    argv = ["check", "--config", "mv-group", *VALID, "--n-samples-per-prompt", "1", *silent_router]
    code, stdout, _ = run_command(argv)
    assert code == 1 and "group reward:" in stdout and "--n-samples-per-prompt" in stdout


def test_check_leaves_verifiers_config_as_it_found_it(monkeypatch):
    monkeypatch.delenv("VERIFIERS_CONFIG", raising=False)
    run_command(["check", "--config", "mv-arith", *VALID])
    assert "VERIFIERS_CONFIG" not in os.environ
