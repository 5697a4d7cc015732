"""``miles-verifiers check``: report every construction problem of a run, run nothing.

Takes ``rollout``'s flags and surveys every construction stage, so independent problems are
reported together; only when all pass is the rollout function constructed, as Miles does before
any engine exists, so no engine is ever contacted.
"""

from __future__ import annotations

import argparse
import inspect
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from miles_verifiers.cli.arguments import (
    cli_namespace,
    new_subparser,
    resolve_config_option,
    rollout_function_path,
    verifiers_config,
    wants_fixture_tokenizers,
)
from miles_verifiers.cli.kit import use_fixture_tokenizers
from miles_verifiers.cli.loading import load_rollout_function
from miles_verifiers.cli.reporting import EXIT_FAILURE, EXIT_USAGE, error_text, report_error
from miles_verifiers.cli.schedule import plan_calls
from miles_verifiers.engine.routers import RUST_ROUTER_DROPPED_KEYS, RouterKind
from miles_verifiers.protocol.versions import process_versions, version_line
from miles_verifiers.trainer import construction
from miles_verifiers.trainer.backends.setup import choose_episode_side
from miles_verifiers.trainer.construction import StageReport
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.options import MilesOptions, SamplingOptions

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


@dataclass(frozen=True)
class CheckReport:
    problems: Sequence[StageReport]
    warnings: Sequence[str]  # what construction logs and goes on
    products: Mapping[str, Any]  # construction's, summarised when nothing failed
    worker_python: str | None = None  # None: the episodes run in Miles' process


def _read_command_line(
    cli: argparse.Namespace,
) -> tuple[argparse.Namespace, list[StageReport], Path | None]:
    """The Miles namespace plus the problems found while reading the command line."""
    problems: list[StageReport] = []
    config_path: Path | None = None
    try:
        config_path = resolve_config_option(cli)
    except ValueError as error:
        problems.append(StageReport("config", error_text(error), error))
    args = cli_namespace(cli, config_path)
    try:
        plan_calls(
            num_rollout=args.num_rollout,
            start_rollout_id=args.start_rollout_id,
            eval_interval=args.eval_interval,
            skip_eval_before_train=bool(args.skip_eval_before_train),
        )
    except ValueError as error:
        problems.append(StageReport("schedule", error_text(error), error))
    return args, problems, config_path


def check_construction(
    args: argparse.Namespace,
    construct: Callable[[argparse.Namespace], Any],
    known_problems: Sequence[StageReport] = (),
) -> CheckReport:
    """Every construction problem of ``args`` after ``known_problems`` (one in the ``config``
    stage skips loading the config); ``construct`` builds the rollout function once all pass."""
    from miles_verifiers.trainer.rollout import AdapterSettings

    problems = list(known_problems)
    try:
        settings = AdapterSettings.from_environ()
    except ValueError as error:
        settings = AdapterSettings.model_construct()
        problems.append(StageReport("settings", str(error), error))
    given = construction.inputs(
        args,
        use_miles=contract().source == "miles",
        dispatch_budget_factor=settings.dispatch_budget_factor,
        episodes=choose_episode_side(settings, describe_only=True),
        renderer_pool_size=settings.renderer_pool_size,
    )
    if any(p.stage == "config" for p in known_problems):
        del given["environ"]  # no config to load: the stages reading it are skipped
    found = construction.survey(given)
    problems += found.problems
    made = found.products
    warnings = [*made.get("warnings", ())]
    if "description" in made:
        warnings += made["description"].config_notes  # what loading the config set aside
    if not problems:
        try:
            construct(args)
        except Exception as error:
            text = f"{type(error).__name__}: {str(error).strip() or type(error).__name__}"
            problems.append(StageReport("constructor", text, error))
    return CheckReport(problems, warnings, made, settings.episode_python)


def run_check(cli: argparse.Namespace) -> int:
    debug = bool(getattr(cli, "debug", False))
    try:
        args, problems, config_path = _read_command_line(cli)
    except ValueError as error:  # passthrough flags or Miles' own argument checks
        report_error(COMMAND, error, debug=debug)
        return EXIT_USAGE
    path = rollout_function_path(args)

    def construct(checked: argparse.Namespace) -> object:
        """What Miles' manager builds (a class from its constructor input) before any engine."""
        target = load_rollout_function(path)
        if not inspect.isclass(target):
            return target  # a legacy rollout function, called as it is
        cls: Any = target  # any class: its constructor is the rollout function's own
        return cls(contract().RolloutFnConstructorInput(args=checked, data_source=None))

    try:
        if wants_fixture_tokenizers(cli, args):
            use_fixture_tokenizers()
        with verifiers_config(config_path):
            report = check_construction(args, construct, known_problems=problems)
    except Exception as error:
        report_error(COMMAND, error, debug=debug)
        return EXIT_FAILURE
    print_report(report, Console(), debug=debug)
    return EXIT_FAILURE if report.problems else 0


def describe_sampling(sampling: SamplingOptions) -> str:
    """One line of the sampling a mode will use."""
    parts = [
        f"temperature {sampling.temperature:g}",
        f"top_p {sampling.top_p:g}",
        f"top_k {sampling.top_k}",
        f"max_tokens {sampling.max_response_len}",
    ]
    optional = {
        "context cap": sampling.max_context_len,
        "first-prompt cap": sampling.max_prompt_len,
        "min_tokens": sampling.min_new_tokens,
        "stop": list(sampling.stop or ()) or None,
        "stop ids": list(sampling.stop_token_ids or ()) or None,
        "chat template": dict(sampling.chat_template_kwargs) or None,
        "reward key": repr(sampling.reward_key) if sampling.reward_key else None,
    }
    parts += [f"{name} {value}" for name, value in optional.items() if value is not None]
    return ", ".join(parts)


def _router_line(options: MilesOptions) -> str:
    router = RouterKind.for_miles(options.use_miles_router)
    if router is RouterKind.SGLANG_ROUTER:
        dropped = sorted(RUST_ROUTER_DROPPED_KEYS)
        return (
            f"{router.value} (Rust); it drops the sampling keys {', '.join(dropped)} "
            "(none configured here)"
        )
    return f"{router.value} (--use-miles-router); every sampling key reaches the engines"


def _summary_lines(report: CheckReport) -> list[tuple[str, str]]:
    options: MilesOptions = report.products["options"]
    described = report.products["description"]
    lines = [
        ("env", described.env_id),
        ("config", str(report.products["config_path"])),
        ("tasks", str(len(described.tasks))),
        ("group reward", "yes" if described.has_group_reward else "no"),
        (
            "batch",
            f"{options.rollout_batch_size} groups x {options.n_samples_per_prompt} samples "
            f"(over-sampling {options.over_sampling_batch_size}), eval "
            f"{options.n_samples_per_eval_prompt} per task",
        ),
        ("concurrency", str(options.max_concurrency)),
        ("tokenizer", str(options.tokenizer_source)),
        ("train sampling", describe_sampling(options.train)),
        ("router", _router_line(options)),
    ]
    if options.eval_enabled:
        lines.append(("eval sampling", describe_sampling(options.eval)))
    # What Miles' process runs, and what the episode workers run (as they described it).
    lines.append(("trainer", version_line(process_versions())))
    if report.worker_python is None:
        lines.append(("episodes", "in Miles' process (the trainer's versions)"))
    else:
        lines.append((f"workers ({report.worker_python})", version_line(described.versions)))
    return lines


def print_report(report: CheckReport, console: Console, *, debug: bool = False) -> None:
    for warning in report.warnings:
        console.print(
            f"[yellow]warning[/yellow]: {escape(warning)}", highlight=False, soft_wrap=True
        )
    if not report.problems:
        console.print("[green]OK[/green]", highlight=False)
        for name, value in _summary_lines(report):
            console.print(f"  {name}: {value}", highlight=False, markup=False, soft_wrap=True)
        return
    count = len(report.problems)
    console.print(f"[red]{count} problem{'s' if count != 1 else ''}[/red] would stop the run:")
    for problem in report.problems:
        console.print(
            f"- [bold]{problem.stage}[/bold]: {escape(problem.problem)}",
            highlight=False,
            markup=True,
            soft_wrap=True,
        )
        if debug and problem.error is not None:
            console.print("".join(traceback.format_exception(problem.error)), markup=False)
