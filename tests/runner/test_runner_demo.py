"""``demo``: the embedded default's small settings sit under whatever the user passes, and
the README's demo command runs to completion behind a proxy that cannot reach loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from miles_verifiers.cli.arguments import cli_namespace, resolve_config_option
from miles_verifiers.cli.schedule import plan_calls
from miles_verifiers_testkit.demo_command import DEMO_FLAGS
from miles_verifiers_testkit.tokenizers import offline_environ
from tests.dead_proxy import behind_dead_proxy, dead_proxy_url

DEMO_TIMEOUT_S = 600


def _demo_args(parse, *extra: str):
    cli = parse(["demo", *extra])
    return cli, cli_namespace(cli, resolve_config_option(cli), DEMO_FLAGS)


def test_demo_runs_the_arith_fixture(parse):
    cli, _ = _demo_args(parse)
    assert resolve_config_option(cli).name == "mv_arith.toml"


def test_demo_is_three_rollouts_of_four_by_four_then_one_eval(parse):
    _, args = _demo_args(parse)
    assert (args.rollout_batch_size, args.n_samples_per_prompt) == (4, 4)
    calls = plan_calls(
        num_rollout=args.num_rollout,
        start_rollout_id=args.start_rollout_id,
        eval_interval=args.eval_interval,
        skip_eval_before_train=args.skip_eval_before_train,
    )
    assert [(c.kind, c.rollout_id) for c in calls] == [
        ("train", 0), ("train", 1), ("train", 2), ("eval", 2),
    ]  # fmt: skip


def test_flags_given_to_demo_override_its_settings(parse):
    _, args = _demo_args(parse, "--num-rollout", "1", "--rollout-batch-size", "2")
    assert (args.num_rollout, args.rollout_batch_size, args.n_samples_per_prompt) == (1, 2, 4)


def test_demo_settings_pass_the_adapters_option_checks(parse):
    from miles_verifiers.trainer.options import read_options

    _, args = _demo_args(parse)
    assert read_options(args)[1] == ()


def test_demo_sends_per_rollout_seeds_so_it_reproduces(parse):
    _, args = _demo_args(parse)
    assert args.sglang_enable_deterministic_inference is True


@pytest.mark.slow
def test_the_demo_runs_to_completion_behind_a_dead_proxy(tmp_path: Path) -> None:
    # As `tox -e demo` runs it (tox passes the proxy variables through), in a process of its
    # own: the adapter adds loopback to NO_PROXY in its own environment, never in this one's.
    environ = behind_dead_proxy({**os.environ, **offline_environ()}, dead_proxy_url())
    finished = subprocess.run(
        [sys.executable, "-m", "miles_verifiers.cli.main", "demo"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
    )
    assert finished.returncode == 0, finished.stderr
    assert "Traceback" not in finished.stderr
    samples = (tmp_path / "out" / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(samples) > 3 * 4 * 4  # three training rollouts of 4x4 samples, then the eval
