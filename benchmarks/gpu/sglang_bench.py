"""End-to-end and direct-baseline benchmarks against a real SGLang server on one GPU.

    python -m benchmarks.gpu.sglang_bench                # real SGLang (needs a GPU; see README.md)
    python -m benchmarks.gpu.sglang_bench --dry-run      # the loopback engine in its place (CPU)

It writes a Qwen3-0.6B ``config.json`` and the project's offline-built tokenizer into a model
folder, starts SGLang on it with random weights (``--load-format dummy``), runs the adapter's
rollouts and the direct load generator over the same token workload at each concurrency,
prints the table and writes the same result files as ``tox -e bench``. Nothing is installed
or downloaded. ``--dry-run`` does everything but start SGLang.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.gpu.model_dir import MODEL_ID, write_model_dir
from benchmarks.gpu.server import (
    ServerPlan,
    format_command,
    free_port,
    router_command,
    sglang_command,
    sglang_router,
    sglang_server,
)
from benchmarks.machine import REPO_ROOT, machine_info
from benchmarks.measure import (
    record_ceiling,
    record_rollout_point,
    record_summary,
    replay_calls,
    run_rollout_point,
)
from benchmarks.recorder import Recorder, write_outputs
from benchmarks.report import markdown_table
from benchmarks.rollouts import TASKSET_CONFIGS
from benchmarks.scale import RolloutPoint


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _taskset_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in TASKSET_CONFIGS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown taskset(s) {unknown or text!r}; "
            f"choose from {', '.join(sorted(TASKSET_CONFIGS))}"
        )
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu.sglang_bench",
        description="Rollout throughput through the adapter against a real SGLang server with "
        "random Qwen3-0.6B weights, next to a direct load generator (the ceiling).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "reports" / "bench-gpu",
        help="folder for the result files and the server log (default: reports/bench-gpu)",
    )
    parser.add_argument(
        "--tasksets",
        type=_taskset_list,
        default=["mv-arith"],
        help="comma-separated fixture tasksets (default: mv-arith)",
    )
    parser.add_argument(
        "--concurrency",
        type=_int_list,
        default=[32, 128, 256],
        help="comma-separated in-flight request limits (default: 32,128,256)",
    )
    parser.add_argument(
        "--rollouts-per-call",
        type=int,
        default=256,
        help="rollouts per training call, as groups x 4 samples (default: 256)",
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="measured calls per point (default: 2)"
    )
    parser.add_argument(
        "--max-response-tokens",
        type=int,
        default=256,
        help="--rollout-max-response-len; random weights rarely stop early (default: 256)",
    )
    parser.add_argument(
        "--num-layers",
        type=int,
        default=None,
        help="shrink the model to this many layers (default: Qwen3-0.6B's 28)",
    )
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument(
        "--server-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for SGLang to generate (default: 300)",
    )
    parser.add_argument("--mem-fraction-static", type=float, default=0.85)
    parser.add_argument(
        "--sglang-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for sglang.launch_server (repeatable), "
        "e.g. --sglang-arg=--disable-cuda-graph",
    )
    parser.add_argument(
        "--no-router",
        action="store_true",
        help="talk to the SGLang server directly instead of through the Rust sglang-router "
        "that Miles puts in front of its engines (the default)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="do everything but start SGLang: print its command and measure against the "
        "zero-latency loopback engine instead (runs on CPU)",
    )
    return parser


def check_args(args: argparse.Namespace) -> None:
    """Refuse settings that cannot run, naming the flag."""
    if args.rollouts_per_call < 4 or args.rollouts_per_call % 4:
        raise SystemExit(
            f"--rollouts-per-call must be a positive multiple of 4, got {args.rollouts_per_call}"
        )
    if args.rounds < 1:
        raise SystemExit(f"--rounds must be at least 1, got {args.rounds}")
    if args.max_response_tokens < 1:
        raise SystemExit(
            f"--max-response-tokens must be at least 1, got {args.max_response_tokens}"
        )
    if not 0 < args.mem_fraction_static < 1:
        raise SystemExit(f"--mem-fraction-static must be in (0, 1), got {args.mem_fraction_static}")


def prepare_model_dir(out: Path, num_layers: int | None) -> Path:
    """Build (or reuse) the offline tokenizers and lay out the model folder SGLang loads."""
    from miles_verifiers_testkit.tokenizers import build_all, offline_environ

    report = build_all()
    os.environ.update(offline_environ())
    return write_model_dir(
        out / "model", report.model(MODEL_ID).snapshot_path, num_hidden_layers=num_layers
    )


@contextlib.contextmanager
def engine(args: argparse.Namespace, plan: ServerPlan) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Yield the engine URL and the pids to leave out of environment CPU."""
    if args.dry_run:
        from benchmarks.engine_proc import loopback_engine_process

        with loopback_engine_process() as (url, pid):
            yield url, (pid,)
        return
    with sglang_server(
        plan,
        args.out / "sglang.log",
        timeout_s=args.server_timeout,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    ) as (url, startup_s):
        print(f"SGLang generating after {startup_s:.0f} s at {url}", flush=True)
        if args.no_router:
            yield url, ()
            return
        # Miles puts the Rust sglang-router in front of its engines; measure through it too.
        with sglang_router(url, free_port(), args.out / "router.log") as router_url:
            print(f"sglang-router routing at {router_url}", flush=True)
            yield router_url, ()


def run(args: argparse.Namespace) -> int:
    check_args(args)
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir = prepare_model_dir(args.out, args.num_layers)
    plan = ServerPlan(
        model_dir=model_dir,
        port=args.port or free_port(),
        mem_fraction_static=args.mem_fraction_static,
        max_running_requests=max(args.concurrency),
        cuda_graph_max_bs=max(args.concurrency),
        extra_args=tuple(args.sglang_arg),
    )
    print(f"model folder: {model_dir}", flush=True)
    print(
        f"SGLang command{' (not run: --dry-run)' if args.dry_run else ''}:\n"
        f"  {format_command(sglang_command(plan))}",
        flush=True,
    )
    if not args.no_router:
        print(
            f"router command{' (not run: --dry-run)' if args.dry_run else ''}:\n"
            f"  {format_command(router_command(plan.base_url, 0))} (port chosen at start)",
            flush=True,
        )
    recorder = Recorder(
        settings={
            "engine": "loopback (dry run)" if args.dry_run else "sglang, random Qwen3-0.6B weights",
            "rounds": args.rounds,
            "max_response_tokens": args.max_response_tokens,
        },
        # The commit as the run starts: the code that is measured.
        machine=machine_info(),
    )
    started = time.perf_counter()
    with engine(args, plan) as (url, exclude):
        for taskset in args.tasksets:
            for concurrency in args.concurrency:
                point = RolloutPoint(
                    concurrency=concurrency, groups=args.rollouts_per_call // 4, samples_per_group=4
                )
                print(f"measuring {taskset} at concurrency {concurrency} ...", flush=True)
                result = run_rollout_point(
                    url,
                    taskset,
                    point,
                    rounds=args.rounds,
                    max_response_tokens=args.max_response_tokens,
                    exclude_pids=exclude,
                )
                record_rollout_point(recorder, taskset, point, result)
                replayed = replay_calls(url, result.calls, concurrency)
                record_ceiling(
                    recorder,
                    replayed,
                    key=f"ceiling.{taskset}.c{concurrency}",
                    group="ceiling",
                    taskset=taskset,
                    concurrency=concurrency,
                )
                record_summary(
                    recorder,
                    f"{taskset}.c{concurrency}",
                    replayed,
                    f"{taskset}: adapter / ceiling tokens/s",
                    taskset=taskset,
                    concurrency=concurrency,
                )
    recorder.note(
        f"measured in {time.perf_counter() - started:.0f} s against {recorder.settings['engine']}"
    )
    result = recorder.result()
    files = write_outputs(result, args.out)
    sys.stdout.write(markdown_table(result))
    print(f"\nwrote {files.json}, {files.markdown}" + (f", {files.plot}" if files.plot else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
