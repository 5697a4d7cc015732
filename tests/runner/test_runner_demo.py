"""``demo``: the embedded default's small settings sit under whatever the user passes."""

from __future__ import annotations

from miles_verifiers._runner.arguments import cli_namespace, resolve_config_option
from miles_verifiers_testkit.demo_command import DEMO_FLAGS
from miles_verifiers._runner.schedule import plan_calls


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
    from miles_verifiers._options import find_option_problems

    _, args = _demo_args(parse)
    assert find_option_problems(args) == []


def test_demo_sends_per_rollout_seeds_so_it_reproduces(parse):
    _, args = _demo_args(parse)
    assert args.sglang_enable_deterministic_inference is True
