"""The loopback engine in a process of its own, for benchmarks.

In the benchmarked process the engine would share the GIL with the adapter, and each would
slow the other. In its own process it costs what a remote engine costs the trainer: HTTP.

    python -m benchmarks.engine_proc [--decode-s-per-token S] [--max-running-requests N] ...

prints one JSON line ``{"url": ..., "pid": ...}`` once the engine answers, then serves until
its standard input closes or it is sent SIGTERM. ``loopback_engine_process`` does all that
from Python and always stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from benchmarks.scale import SaturationPlan

STARTUP_TIMEOUT_S = 120.0


class EngineProcessError(RuntimeError):
    """The engine subprocess did not come up."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine_proc", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--prefill-s-per-token", type=float, default=0.0)
    parser.add_argument("--decode-s-per-token", type=float, default=0.0)
    parser.add_argument(
        "--max-running-requests",
        type=int,
        default=0,
        help="continuous-batch capacity (0: unlimited)",
    )
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    return parser


def serve(args: argparse.Namespace) -> int:
    from miles_verifiers_testkit.engine import EngineConfig, LatencyModel, serve_engine

    config = EngineConfig(
        model=args.model,
        latency=LatencyModel(
            prefill_s_per_token=args.prefill_s_per_token,
            decode_s_per_token=args.decode_s_per_token,
            max_running_requests=args.max_running_requests,
        ),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with serve_engine(config, startup_timeout=STARTUP_TIMEOUT_S) as running:
        print(json.dumps({"url": running.base_url, "pid": os.getpid()}), flush=True)
        # Serve until the parent closes our stdin (it exited or is done) or sends SIGTERM.
        watcher = threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True)
        watcher.start()
        while not stop.wait(0.5):
            pass
    return 0


def _read_ready_line(process: subprocess.Popen[str], timeout_s: float) -> dict[str, Any]:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EngineProcessError(
                f"the loopback engine process exited with code {process.returncode} while starting"
            )
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if line:
                return json.loads(line)
    raise EngineProcessError(
        f"the loopback engine process did not report its address within {timeout_s:.0f} s"
    )


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def loopback_engine_process(
    *,
    prefill_s_per_token: float = 0.0,
    decode_s_per_token: float = 0.0,
    max_running_requests: int = 0,
    timeout_s: float = STARTUP_TIMEOUT_S,
) -> Iterator[tuple[str, int]]:
    """Yield ``(base_url, pid)`` of a loopback engine running in a child process."""
    command = [
        sys.executable, "-m", "benchmarks.engine_proc",
        "--prefill-s-per-token", repr(prefill_s_per_token),
        "--decode-s-per-token", repr(decode_s_per_token),
        "--max-running-requests", str(max_running_requests),
    ]  # fmt: skip
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root
    )
    try:
        ready = _read_ready_line(process, timeout_s)
        yield str(ready["url"]), int(ready["pid"])
    finally:
        _stop(process)


def plan_engine_process(plan: SaturationPlan) -> contextlib.AbstractContextManager[tuple[str, int]]:
    """``loopback_engine_process`` running the latency model of ``plan``."""
    return loopback_engine_process(
        prefill_s_per_token=plan.prefill_s_per_token,
        decode_s_per_token=plan.decode_s_per_token,
        max_running_requests=plan.batch_capacity,
    )


def engine_stats(base_url: str) -> dict[str, Any]:
    """The loopback engine's counters, from its ``/server_info``."""
    with httpx.Client(timeout=10.0) as client:
        info = client.get(f"{base_url}/server_info").json()
    return dict(info["loopback_engine"]["stats"])


def main(argv: Sequence[str] | None = None) -> int:
    return serve(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
