"""Two commits' in-process rollout throughput, rounds interleaved, against one engine process.

    git worktree add /tmp/wt-old b0ec31c && git worktree add /tmp/wt-new HEAD
    python -m benchmarks.side_by_side /tmp/wt-old /tmp/wt-new --rounds 10

Each commit runs its own adapter, test kit and ``benchmarks.rollouts`` from its worktree (its
import names linked under ``WORKTREE/.links``), in a fresh process per round, on the default
backend (no worker interpreter): mv-arith, 16 x 4 at concurrency 64, 64-token replies, one
warm-up and ``--calls`` timed calls. The order of the commits rotates between rounds, and
the ratios printed are medians of per-round ratios to the first commit. Run it with an
interpreter that has the commits' dependencies (``.tox/py311/bin/python``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.engine_proc import loopback_engine_process
from benchmarks.ratios import round_ratios

ONE_COMMIT = """
import json, sys
from benchmarks.rollouts import rollout_driver
url, calls, engine_pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with rollout_driver(engine_url=url, taskset="mv-arith", groups=16, samples_per_group=4,
                    concurrency=64, max_response_tokens=64, exclude_pids=(engine_pid,)) as d:
    d.call()
    stats = [d.call() for _ in range(calls)]
print(json.dumps({
    "rollouts_per_s": sum(s.rollouts for s in stats) / sum(s.wall_s for s in stats),
    "trainer_cpu_ms_per_turn": 1000 * sum(s.trainer_cpu_s for s in stats)
    / sum(s.model_turns for s in stats),
}))
"""
LINKS = {"miles_verifiers": "adapter", "miles_verifiers_testkit": "fixtures"}


def run_commit(tree: Path, url: str, engine_pid: int, calls: int) -> dict[str, float]:
    links = tree / ".links"
    links.mkdir(exist_ok=True)
    for name, folder in LINKS.items():
        if not (links / name).exists():
            (links / name).symlink_to(tree / folder)
    taskset = tree / "fixtures" / "environments" / "mv_arith"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MILES_VERIFIERS_EPISODE_")  # the default backend
    }
    env["PYTHONPATH"] = os.pathsep.join(map(str, (taskset, links, tree)))
    done = subprocess.run(
        [sys.executable, "-c", ONE_COMMIT, url, str(calls), str(engine_pid)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the run failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("trees", nargs="+", type=Path, help="worktrees; the first is the base")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=5)
    options = parser.parse_args()
    trees = [tree.resolve() for tree in options.trees]
    # The exact tokenizers, built once (cached), for the engine and both commits' processes.
    from miles_verifiers_testkit.tokenizers import build_all, offline_environ

    build_all()
    os.environ.update(offline_environ())
    results: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    with loopback_engine_process() as (url, engine_pid):
        for round_index in range(options.rounds):
            shift = round_index % len(trees)
            for tree in trees[shift:] + trees[:shift]:
                results[tree].append(run_commit(tree, url, engine_pid, options.calls))
                print(round_index, tree.name, results[tree][-1], flush=True)
    base = results[trees[0]]
    for tree in trees[1:]:
        for figure in ("rollouts_per_s", "trainer_cpu_ms_per_turn"):
            ratios = round_ratios([r[figure] for r in results[tree]], [r[figure] for r in base])
            print(
                f"{tree.name} / {trees[0].name} {figure}: median {statistics.median(ratios):.3f}"
                f" (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} rounds)"
            )


if __name__ == "__main__":
    main()
