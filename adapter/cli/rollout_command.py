"""``miles-verifiers rollout``: run training rollouts (and evaluations) exactly as Miles calls
the Verifiers rollout function, against the embedded loopback engine or a real SGLang."""

from __future__ import annotations

import argparse
import contextlib
import math
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from miles_verifiers.cli.arguments import (
    cli_namespace,
    new_subparser,
    resolve_config_option,
    rollout_function_path,
    wants_fixture_tokenizers,
)
from miles_verifiers.cli.environment import (
    require_embeddable,
    tokenizer_source,
    use_fixture_tokenizers,
    verifiers_config,
)
from miles_verifiers.cli.interrupts import sigterm_as_interrupt
from miles_verifiers.cli.outputs import check_output_paths, is_stdout, leftover_partials
from miles_verifiers.cli.progress import ProgressObserver
from miles_verifiers.cli.reporting import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    report_error,
)
from miles_verifiers.cli.resume import resume_words
from miles_verifiers.cli.schedule import PlannedCall, plan_calls
from miles_verifiers.cli.session import RunRequest, RunResult, SilentObserver, run_rollouts
from miles_verifiers.cli.summary import eval_table, id_ranges, summary_table

COMMAND = "rollout"
DEFAULT_OUTPUT = Path("out/samples.jsonl")
DEFAULT_METRICS_OUTPUT = Path("out/metrics.json")
DEFAULT_CALL_TIMEOUT_S = 1800.0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rollout`` to the ``miles-verifiers`` command line."""
    parser = new_subparser(
        subparsers,
        COMMAND,
        help="run Miles training rollouts (and evals) through the Verifiers rollout function",
        description=(
            "Build Miles' argument namespace from Miles flags, construct the rollout function "
            "as Miles does, then run --num-rollout training calls (and evaluations every "
            "--eval-interval) against the embedded loopback engine or --engine-url. Writes "
            "the samples as JSON lines and the metrics as JSON."
        ),
    )
    add_run_arguments(parser)
    parser.set_defaults(handler=run_command)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run options")
    group.add_argument(
        "--engine-url",
        default=None,
        help="http://host:port of a real SGLang router or engine (default: the address in "
        "--sglang-router-ip/--sglang-router-port when both are given, else an embedded "
        "loopback engine serving --hf-checkpoint)",
    )
    group.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="samples, JSON lines, kept for every completed rollout even when the run is "
        "interrupted; a pipe or /dev/stdout is written to as it is (default: %(default)s)",
    )
    group.add_argument(
        "--metrics-output",
        type=Path,
        default=DEFAULT_METRICS_OUTPUT,
        help="metrics, JSON (default: %(default)s)",
    )
    group.add_argument(
        "--call-timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT_S,
        help="seconds one rollout call may take before the run fails (default: %(default)s)",
    )
    group.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )


def require_positive_seconds(value: float | None, flag: str) -> None:
    """Refuse a duration that is not a positive, finite number (None: no limit)."""
    # NaN passes every comparison and inf overflows the thread wait, so check finiteness too.
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"{flag} is {value!r}; it must be a positive, finite number of seconds. Fix: pass "
            f"e.g. {flag} {DEFAULT_CALL_TIMEOUT_S:g}."
        )


def run_command(cli: argparse.Namespace) -> int:
    return run_with_preset(cli, COMMAND)


def engine_url_for(cli: argparse.Namespace, args: argparse.Namespace) -> str | None:
    """``--engine-url``, else the router address given as Miles flags, else None (embedded)."""
    if cli.engine_url:
        return str(cli.engine_url)
    host, port = args.sglang_router_ip, args.sglang_router_port
    if host and port:
        host = f"[{host}]" if ":" in str(host) and not str(host).startswith("[") else host
        return f"http://{host}:{port}"
    return None


def _plan(args: argparse.Namespace) -> list[PlannedCall]:
    return plan_calls(
        num_rollout=args.num_rollout,
        start_rollout_id=args.start_rollout_id,
        eval_interval=args.eval_interval,
        skip_eval_before_train=bool(args.skip_eval_before_train),
    )


def run_with_preset(
    cli: argparse.Namespace, command: str, preset: Mapping[str, Any] | None = None
) -> int:
    """The rollout command, with ``preset`` Miles flag values under the user's own."""
    debug = bool(getattr(cli, "debug", False))
    try:
        config_path = resolve_config_option(cli)
        args = cli_namespace(cli, config_path, preset)
        calls = _plan(args)
        engine_url = engine_url_for(cli, args)
        model = tokenizer_source(args.hf_checkpoint, args.sglang_tokenizer_path)
        engine_model = model if engine_url else require_embeddable(model)
        require_positive_seconds(cli.call_timeout, "--call-timeout")
        check_output_paths(cli.output, cli.metrics_output)
    except ValueError as error:
        report_error(command, error, debug=debug)
        return EXIT_USAGE

    request = RunRequest(
        args=args,
        calls=tuple(calls),
        rollout_function_path=rollout_function_path(args),
        engine_url=engine_url,
        engine_model=str(engine_model),
        output=cli.output,
        metrics_output=cli.metrics_output,
        call_timeout_s=cli.call_timeout,
    )
    console = Console(stderr=True)
    warn_about_leftovers(command, cli.output, console)
    with sigterm_as_interrupt() as received:
        try:
            if wants_fixture_tokenizers(cli, args):
                use_fixture_tokenizers()
            with verifiers_config(config_path):
                observer = ProgressObserver(calls, console) if cli.progress else None
                with observer if observer is not None else contextlib.nullcontext():
                    result = run_rollouts(request, observer or SilentObserver())
        except KeyboardInterrupt:
            console.print(
                f"miles-verifiers {command}: interrupted before any rollout completed; "
                f"{cli.output} and {cli.metrics_output} are left as they were before this run",
                markup=False,
                soft_wrap=True,
            )
            return _interrupted_exit(received)
        except Exception as error:
            report_error(command, error, debug=debug)
            return EXIT_FAILURE
    # Samples piped out through standard output (--output /dev/stdout | jq) stay unmixed.
    to_stdout = is_stdout(cli.output) or is_stdout(cli.metrics_output)
    print_result(result, Console(stderr=to_stdout))
    if result.summary.status == "complete":
        return 0
    report_interruption(command, cli, args, result, console)
    return _interrupted_exit(received)


def _interrupted_exit(received: list[int]) -> int:
    return EXIT_TERMINATED if received else EXIT_INTERRUPTED


def warn_about_leftovers(command: str, output: Path, console: Console) -> None:
    for path in leftover_partials(output):
        console.print(
            f"miles-verifiers {command}: warning: {path} was left by an earlier run that was "
            "killed before it could finish; it holds the samples of that run's completed "
            "calls (see each line's rollout_id). This run leaves it alone: rename it to keep "
            "it, or delete it.",
            markup=False,
            soft_wrap=True,
        )


def report_interruption(
    command: str,
    cli: argparse.Namespace,
    args: argparse.Namespace,
    result: RunResult,
    console: Console,
) -> None:
    """What an interrupted run kept, and the command that carries on from where it stopped."""
    held = id_ranges(result.summary.train_rollout_ids)
    evals = " (and the evaluations that ran)" if result.summary.evals else ""
    lines = [
        f"miles-verifiers {command}: interrupted; {result.output} holds the samples of "
        f"training rollouts {held}{evals}, {result.metrics_output} their metrics, marked "
        "interrupted."
    ]
    if result.resume is None:
        lines.append("Every training rollout completed; only the final evaluation did not run.")
    else:
        words = resume_words(
            getattr(cli, "command_line", None) or sys.argv[1:],
            result.resume,
            save_dir=args.save,
            evaluates=args.eval_interval is not None,
            output=cli.output,
            metrics_output=cli.metrics_output,
        )
        if not args.save:
            lines.append(
                "--save was not given, so no task cursor was kept: the resumed run starts at "
                "task offset rollout id x --rollout-batch-size, which repeats or skips tasks "
                "when groups were dropped or carried over. Pass --save DIR to keep it."
            )
        lines.append(f"To resume: {shlex.join(['miles-verifiers', *words])}")
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)


def print_result(result: RunResult, console: Console) -> None:
    console.print(summary_table(result.summary))
    table = eval_table(result.summary)
    if table is not None:
        console.print(table)
    console.print(
        f"samples: {result.samples_written} lines in {result.output}", markup=False, soft_wrap=True
    )
    console.print(f"metrics: {result.metrics_output}", markup=False, soft_wrap=True)
