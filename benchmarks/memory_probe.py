"""Memory of a trainer-side process across many rollouts, measured in a fresh process.

    python -m benchmarks.memory_probe --engine-url URL --taskset mv-arith --rollouts 1000 --calls 10

prints one JSON line after start-up and one after every training call, with the process's
current RSS (VmRSS) and peak RSS (VmHWM) from /proc/self/status, and the wall clock. A fresh
process, so nothing the benchmark runner loaded counts (imports, tokenizers and renderer
pools are all built here, as in a trainer that just started); the engine is elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.procstat import read_memory


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.memory_probe", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--engine-url", required=True)
    parser.add_argument("--taskset", default="mv-arith")
    parser.add_argument(
        "--rollouts", type=int, default=1000, help="rollouts in all, over --calls calls"
    )
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-response-tokens", type=int, default=256)
    return parser


_STARTED = time.perf_counter()


def _emit(stage: str, **extra: object) -> None:
    memory = read_memory()
    record = {
        "stage": stage,
        "elapsed_s": time.perf_counter() - _STARTED,
        "rss_mib": memory.rss_mib,
        "peak_rss_mib": memory.peak_rss_mib,
        # Epoch seconds, so the parent can time from the moment it spawned this process.
        "unix_time": time.time(),
        **extra,
    }
    print(json.dumps(record), flush=True)


def probe(args: argparse.Namespace) -> int:
    samples_per_group = 4
    groups = max(1, round(args.rollouts / args.calls / samples_per_group))
    from miles_verifiers_testkit.tokenizers import offline_environ

    # Before anything imports transformers: the tokenizer loads by hub id, offline.
    os.environ.update(offline_environ())
    from benchmarks.rollouts import rollout_driver

    _emit("start")
    with rollout_driver(
        engine_url=args.engine_url,
        taskset=args.taskset,
        groups=groups,
        samples_per_group=samples_per_group,
        concurrency=args.concurrency,
        max_response_tokens=args.max_response_tokens,
    ) as driver:
        _emit("constructed")
        total = 0
        for call in range(args.calls):
            stats = driver.call()
            total += stats.rollouts
            _emit("call", call=call, rollouts=total)
    return 0


@dataclass(frozen=True)
class MemoryTrace:
    start_mib: float
    constructed_mib: float
    after_calls_mib: tuple[float, ...]
    rollouts_after_calls: tuple[int, ...]
    peak_mib: float
    construct_s: float
    first_call_s: float
    spawn_to_first_call_s: float | None = None
    """From the parent spawning the process to the end of the first call: the interpreter's
    own start-up, every import, construction and the first call. None when not spawned by
    ``run_probe``."""

    @property
    def construct_and_first_call_s(self) -> float:
        """Building the rollout function (imports included) plus its first call."""
        return self.construct_s + self.first_call_s

    @property
    def total_rollouts(self) -> int:
        return self.rollouts_after_calls[-1]

    def growth_mib_per_1k_rollouts(self) -> float:
        """Least-squares slope of RSS over rollouts, leaving out the first call (pools warm up)."""
        xs = self.rollouts_after_calls[1:]
        ys = self.after_calls_mib[1:]
        if len(xs) < 2:
            return 0.0
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        if var == 0:
            return 0.0
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=False)) / var
        return slope * 1000


def parse_trace(lines: Sequence[str], *, spawned_at: float | None = None) -> MemoryTrace:
    """The trace from the probe's output; ``spawned_at`` is the epoch time the parent spawned it."""
    records = [json.loads(line) for line in lines if line.startswith("{")]
    by_stage = {r["stage"]: r for r in records if r["stage"] != "call"}
    calls = [r for r in records if r["stage"] == "call"]
    if "start" not in by_stage or "constructed" not in by_stage or not calls:
        raise ValueError(f"the memory probe's output is incomplete: {lines[-5:]!r}")
    return MemoryTrace(
        start_mib=by_stage["start"]["rss_mib"],
        constructed_mib=by_stage["constructed"]["rss_mib"],
        after_calls_mib=tuple(r["rss_mib"] for r in calls),
        rollouts_after_calls=tuple(int(r["rollouts"]) for r in calls),
        peak_mib=max(r["peak_rss_mib"] for r in records),
        construct_s=by_stage["constructed"]["elapsed_s"] - by_stage["start"]["elapsed_s"],
        first_call_s=calls[0]["elapsed_s"] - by_stage["constructed"]["elapsed_s"],
        spawn_to_first_call_s=(
            calls[0]["unix_time"] - spawned_at
            if spawned_at is not None and "unix_time" in calls[0]
            else None
        ),
    )


def run_probe(
    engine_url: str,
    *,
    taskset: str,
    rollouts: int,
    calls: int,
    concurrency: int,
    max_response_tokens: int,
    timeout_s: float = 900.0,
) -> MemoryTrace:
    root = Path(__file__).resolve().parent.parent
    command = [
        sys.executable,
        "-m",
        "benchmarks.memory_probe",
        "--engine-url",
        engine_url,
        "--taskset",
        taskset,
        "--rollouts",
        str(rollouts),
        "--calls",
        str(calls),
        "--concurrency",
        str(concurrency),
        "--max-response-tokens",
        str(max_response_tokens),
    ]
    spawned_at = time.time()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, cwd=root, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the memory probe failed with code {done.returncode}:\n{done.stderr[-3000:]}"
        )
    return parse_trace(done.stdout.splitlines(), spawned_at=spawned_at)


def main(argv: Sequence[str] | None = None) -> int:
    return probe(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
