"""``miles-verifiers check``: report every construction problem of a run, run nothing.

Takes the same flags as ``rollout``; never starts or contacts an engine.
"""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from miles_verifiers.cli.arguments import (
    cli_namespace,
    new_subparser,
    resolve_config_option,
    rollout_function_path,
    wants_fixture_tokenizers,
)
from miles_verifiers.cli.checks import (
    CheckProblem,
    CheckReport,
    CheckSummary,
    check_construction,
    describe_sampling,
)
from miles_verifiers.cli.environment import use_fixture_tokenizers, verifiers_config
from miles_verifiers.cli.loading import construct_rollout_function, load_rollout_function
from miles_verifiers.cli.reporting import EXIT_FAILURE, EXIT_USAGE, error_text, report_error
from miles_verifiers.cli.schedule import plan_calls
from miles_verifiers.engine.routers import RUST_ROUTER_DROPPED_KEYS, RouterKind
from miles_verifiers.protocol.versions import version_line
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.options import MilesOptions

COMMAND = "check"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``check`` to the ``miles-verifiers`` command line."""
    parser = new_subparser(
        subparsers,
        COMMAND,
        help="report every problem that would stop the rollout function's construction",
        description=(
            "Validate Miles flags and the Verifiers config the way the rollout function's "
            "construction does, then construct it, without running an episode or contacting "
            "an engine. Prints OK and a summary, or every problem found."
        ),
    )
    parser.set_defaults(handler=run_check)


def _read_command_line(
    cli: argparse.Namespace,
) -> tuple[argparse.Namespace, list[CheckProblem], Path | None]:
    """The Miles namespace plus the problems found while reading the command line."""
    problems: list[CheckProblem] = []
    config_path: Path | None = None
    try:
        config_path = resolve_config_option(cli)
    except ValueError as error:
        problems.append(CheckProblem("config", error_text(error), error))
    args = cli_namespace(cli, config_path)
    try:
        plan_calls(
            num_rollout=args.num_rollout,
            start_rollout_id=args.start_rollout_id,
            eval_interval=args.eval_interval,
            skip_eval_before_train=bool(args.skip_eval_before_train),
        )
    except ValueError as error:
        problems.append(CheckProblem("schedule", error_text(error), error))
    return args, problems, config_path


def run_check(cli: argparse.Namespace) -> int:
    debug = bool(getattr(cli, "debug", False))
    try:
        args, problems, config_path = _read_command_line(cli)
    except ValueError as error:  # passthrough flags or Miles' own argument checks
        report_error(COMMAND, error, debug=debug)
        return EXIT_USAGE
    path = rollout_function_path(args)

    def construct(checked: argparse.Namespace) -> object:
        return construct_rollout_function(load_rollout_function(path), checked, contract())

    try:
        if wants_fixture_tokenizers(cli, args):
            use_fixture_tokenizers()
        with verifiers_config(config_path):
            report = check_construction(args, construct, known_problems=problems)
    except Exception as error:
        report_error(COMMAND, error, debug=debug)
        return EXIT_FAILURE
    print_report(report, Console(), debug=debug)
    return 0 if report.ok else EXIT_FAILURE


def _batch_line(options: MilesOptions) -> str:
    return (
        f"{options.rollout_batch_size} groups x {options.n_samples_per_prompt} samples "
        f"(over-sampling {options.over_sampling_batch_size}), eval "
        f"{options.n_samples_per_eval_prompt} per task"
    )


def _router_line(options: MilesOptions) -> str:
    router = RouterKind.for_miles(options.use_miles_router)
    if router is RouterKind.SGLANG_ROUTER:
        dropped = sorted(RUST_ROUTER_DROPPED_KEYS)
        return (
            f"{router.value} (Rust); it drops the sampling keys {', '.join(dropped)} "
            "(none configured here)"
        )
    return f"{router.value} (--use-miles-router); every sampling key reaches the engines"


def _version_lines(summary: CheckSummary) -> list[tuple[str, str]]:
    """What Miles' process runs, and what the episode workers run (as they described it)."""
    lines = [("trainer", version_line(summary.trainer_versions))]
    if summary.worker_python is None:
        lines.append(("episodes", "in Miles' process (the trainer's versions)"))
    else:
        versions = version_line(summary.described.versions)
        lines.append((f"workers ({summary.worker_python})", versions))
    return lines


def print_report(report: CheckReport, console: Console, *, debug: bool = False) -> None:
    for warning in report.warnings:
        console.print(
            f"[yellow]warning[/yellow]: {escape(warning)}", highlight=False, soft_wrap=True
        )
    if not report.ok:
        count = len(report.problems)
        console.print(f"[red]{count} problem{'s' if count != 1 else ''}[/red] would stop the run:")
        for problem in report.problems:
            console.print(
                f"- [bold]{problem.stage}[/bold]: {escape(problem.message)}",
                highlight=False,
                markup=True,
                soft_wrap=True,
            )
            if debug and problem.error is not None:
                console.print("".join(traceback.format_exception(problem.error)), markup=False)
        return
    summary = report.summary
    assert summary is not None
    options, described = summary.options, summary.described
    console.print("[green]OK[/green]", highlight=False)
    lines = [
        ("env", described.env_id),
        ("config", str(summary.config_path)),
        ("tasks", str(len(described.tasks))),
        ("group reward", "yes" if described.has_group_reward else "no"),
        ("batch", _batch_line(options)),
        ("concurrency", str(options.max_concurrency)),
        ("tokenizer", str(options.tokenizer_source)),
        ("train sampling", describe_sampling(options.train)),
        ("router", _router_line(options)),
    ]
    if options.eval_enabled:
        lines.append(("eval sampling", describe_sampling(options.eval)))
    lines += _version_lines(summary)
    for name, value in lines:
        console.print(f"  {name}: {value}", highlight=False, markup=False, soft_wrap=True)
