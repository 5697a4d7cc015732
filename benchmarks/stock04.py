"""The stock-harness 0.4 row: the adapter against Verifiers' own episode loop, one run.

Both sides run the same Verifiers 0.4 environment (mv-arith04 on Verifiers' stock ``null``
harness: each episode runs Verifiers' chat program as a ``uv`` script in a subprocess) against
the same loopback engine, at the same episode concurrency, rounds interleaved:

- ``verifiers-loop``: Verifiers' own loop in one process of the worker venv
  (``benchmarks/verifiers04_loop.py``): ``env.slots(task, n)`` and ``env.run_slot`` under one
  semaphore, its own ``TrainClient`` built from a ``TrainClientConfig`` at the engine;
- ``w1``, ``w2``: the adapter (``VerifiersRolloutFn`` called as Miles calls it) with 1 or 2
  local episode workers in that venv.

CPU is counted for every process a side runs, from ``/proc`` and ``getrusage``: the trainer
(this process, adapter rounds only: it only waits during the loop's), the direct children that
run episodes (the workers, or the loop's process), and the harness subprocesses below them
(live ones from ``/proc``, reaped ones through their parent's ``cutime``/``cstime``, which the
kernel fills as the parent waits for them, ``uv`` included). The engine is excluded.

Everything below :class:`StockLoop` is arithmetic over recorded rounds, unit-tested without
running anything.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.procstat import _stat_fields, counted_descendants, self_cpu_seconds
from benchmarks.ratios import ratios_of
from benchmarks.results import BenchResult, Better
from benchmarks.workers import GoalRow

if TYPE_CHECKING:
    from benchmarks.recorder import Recorder

GROUP = "stock04"
LOOP = "verifiers-loop"
LOOP_X2 = "verifiers-loop-x2"
"""Verifiers' own loop in two processes, each with half the groups and concurrency: the
baseline with as many episode processes as two workers."""
ADAPTER_VARIANTS = ("w1", "w2")
# (adapter variant, the loop it is divided by) for the ratios and the goals.
COMPARISONS = (("w1", LOOP), ("w2", LOOP), ("w2", LOOP_X2))
GOAL_OVER_LOOP = 0.95
TASKSET = "mv-arith04-null"
CONFIG = (
    Path(__file__).resolve().parent.parent / "fixtures" / "configs" / "v04" / "mv_arith_null.toml"
)
LOOP_SCRIPT = Path(__file__).resolve().parent / "verifiers04_loop.py"
_TICKS = os.sysconf("SC_CLK_TCK")


# -- CPU of a process tree, split by level ---------------------------------------------------


def _own_and_reaped(pid: int) -> tuple[float, float] | None:
    """(utime+stime, cutime+cstime) of ``pid`` in seconds; None when it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return (utime + stime) / _TICKS, (cutime + cstime) / _TICKS


def _reaped_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class SplitCpu:
    """CPU between ``start`` and ``stop``, split three ways.

    ``processes``: the long-lived descendants of this process (alive at both ends: episode
    workers and the template they are forked from, or the loop's process), less ``exclude``
    and the trees below them, on their own. ``subprocesses``: what those started during the
    round (harness programs, ``uv``): the ones still alive from ``/proc``, the reaped ones
    through their parents' ``cutime``/``cstime``. ``trainer``: this process.
    """

    exclude: Collection[int] = ()
    trainer: float = 0.0
    processes: float = 0.0
    subprocesses: float = 0.0
    _start: dict[int, tuple[float, float]] = field(default_factory=dict)
    _trainer_start: float = 0.0
    _reaped_start: float = 0.0

    def _snapshot(self) -> dict[int, tuple[float, float]]:
        """pid -> (own, reaped) CPU seconds of every counted descendant."""
        found: dict[int, tuple[float, float]] = {}
        for pid in counted_descendants(self.exclude):
            cpu = _own_and_reaped(pid)
            if cpu is not None:
                found[pid] = cpu
        return found

    def start(self) -> None:
        self._trainer_start = self_cpu_seconds()
        self._reaped_start = _reaped_self()
        self._start = self._snapshot()

    def stop(self) -> None:
        self.trainer = self_cpu_seconds() - self._trainer_start
        end = self._snapshot()
        self.processes, self.subprocesses = split_cpu(
            self._start, end, reaped_by_trainer=_reaped_self() - self._reaped_start
        )


def split_cpu(
    start: Mapping[int, tuple[float, float]],
    end: Mapping[int, tuple[float, float]],
    *,
    reaped_by_trainer: float = 0.0,
) -> tuple[float, float]:
    """(long-lived processes' own CPU, CPU of what was started meanwhile) from two snapshots
    of ``pid -> (own, reaped)``; ``reaped_by_trainer`` is this process's reaped-children
    growth (a child it waited for during the round)."""
    processes = 0.0
    subprocesses = reaped_by_trainer
    for pid, (own, reaped) in end.items():
        if pid in start:
            own0, reaped0 = start[pid]
            processes += own - own0
            subprocesses += reaped - reaped0
        else:
            subprocesses += own + reaped
    # A process alive at start and reaped since is counted whole through its parent's cutime.
    subprocesses -= sum(own0 + reaped0 for pid, (own0, reaped0) in start.items() if pid not in end)
    return max(0.0, processes), max(0.0, subprocesses)


@dataclass(frozen=True)
class StockRound:
    """One measured round of one side."""

    wall_s: float
    episodes: int
    ok: int
    trainer_cpu_s: float
    process_cpu_s: float
    subprocess_cpu_s: float

    @property
    def total_cpu_s(self) -> float:
        return self.trainer_cpu_s + self.process_cpu_s + self.subprocess_cpu_s

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.wall_s

    def per_episode_ms(self, seconds: float) -> float:
        return 1000.0 * seconds / max(1, self.episodes)


# -- Verifiers' own loop, in the worker venv ---------------------------------------------------


class LoopError(RuntimeError):
    """Verifiers' own loop did not start or did not answer."""


class StockLoop:
    """``benchmarks/verifiers04_loop.py`` in a 0.4 interpreter, one round per call."""

    def __init__(
        self,
        *,
        python: str,
        engine_url: str,
        model: str,
        concurrency: int,
        config: Path = CONFIG,
        startup_timeout_s: float = 300.0,
    ) -> None:
        bin_dir = str(Path(python).parent)
        env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
        # The worker venv's programs first on PATH (uv), as the adapter's workers put them.
        self.process = subprocess.Popen(
            [
                python, str(LOOP_SCRIPT),
                "--config", str(config),
                "--engine", engine_url,
                "--model", model,
                "--concurrency", str(concurrency),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        ready = self._read(startup_timeout_s)
        if not ready.get("ready"):
            raise LoopError(f"Verifiers' loop said {ready!r} instead of being ready")
        self.tasks = int(ready.get("tasks", 1))
        self._next_task = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LoopError(f"Verifiers' loop exited with code {self.process.returncode}")
            ready, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if ready:
                line = self.process.stdout.readline()
                if line.strip():
                    return dict(json.loads(line))
        raise LoopError(f"Verifiers' loop did not answer within {timeout_s:.0f} s")

    def send(
        self,
        *,
        groups: int,
        samples: int,
        max_tokens: int,
        temperature: float = 1.0,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """Start one round: ``groups`` tasks x ``samples`` slots (:meth:`receive` ends it)."""
        assert self.process.stdin is not None
        request = {
            "groups": groups,
            "samples": samples,
            "first_task": self._next_task,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "chat_template_kwargs": dict(chat_template_kwargs or {}),
        }
        self._next_task = (self._next_task + groups) % max(1, self.tasks)
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def receive(self, timeout_s: float = 900.0) -> dict[str, Any]:
        return self._read(timeout_s)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.terminate()
                try:
                    self.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=15)


def run_loops(
    loops: Sequence[StockLoop],
    *,
    groups: int,
    samples: int,
    exclude: Collection[int] = (),
    **request: Any,
) -> tuple[StockRound, list[str]]:
    """One round of Verifiers' own loop over ``loops`` (the groups shared out among them, all
    running at once); its wall time is from the first request sent to the last answer read.
    This process only waits on pipes meanwhile: its CPU is no part of the loop's cost."""
    shares = [
        groups // len(loops) + (1 if i < groups % len(loops) else 0) for i in range(len(loops))
    ]
    meter = SplitCpu(exclude=exclude)
    meter.start()
    started = time.perf_counter()
    for loop, share in zip(loops, shares, strict=True):
        if share:
            loop.send(groups=share, samples=samples, **request)
    replies = [loop.receive() for loop, share in zip(loops, shares, strict=True) if share]
    wall = time.perf_counter() - started
    meter.stop()
    return (
        StockRound(
            wall_s=wall,
            episodes=sum(int(r["episodes"]) for r in replies),
            ok=sum(int(r["ok"]) for r in replies),
            trainer_cpu_s=0.0,
            process_cpu_s=meter.processes,
            subprocess_cpu_s=meter.subprocesses,
        ),
        [e for r in replies for e in r.get("errors") or []],
    )


def worker_python_ok(python: str) -> str | None:
    """Why ``python`` cannot run the row (None when it can): Verifiers 0.4 and ``uv`` there."""
    if not Path(python).exists():
        return f"{python} does not exist"
    if not (Path(python).parent / "uv").exists():
        return f"no uv beside {python} (pip install uv into that venv)"
    probe = subprocess.run(
        [python, "-c", "import verifiers, mv_arith04; print(verifiers.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0 or not probe.stdout.strip().startswith("0.4"):
        return f"{python} has no verifiers 0.4 with mv-arith04 ({probe.stderr.strip()[-200:]})"
    return None


# -- recording ---------------------------------------------------------------------------------


def _per_side_figures(
    rounds: Sequence[StockRound], side: str
) -> list[tuple[str, list[float], str, str, Better]]:
    """``(name, samples, label, unit, better)`` of one side's rounds."""

    def share(part: float, whole: float) -> float:
        return part / whole if whole > 0 else 0.0

    def per_episode(cpu: Callable[[StockRound], float]) -> list[float]:
        return [r.per_episode_ms(cpu(r)) for r in rounds]

    return [
        ("episodes_per_s", [_per_s(r) for r in rounds], f"episodes/s, {side}", "episodes/s", "higher"),
        ("cpu_ms_per_episode", [_cpu_ms(r) for r in rounds],
         f"CPU per episode, all processes (trainer, workers or loop, harness subprocesses), {side}", "ms", "lower"),
        ("trainer_cpu_ms_per_episode", per_episode(lambda r: r.trainer_cpu_s),
         f"trainer-process CPU per episode, {side}", "ms", "lower"),
        ("process_cpu_ms_per_episode", per_episode(lambda r: r.process_cpu_s),
         f"CPU per episode of the processes running episodes (workers, or the loop), {side}", "ms", "lower"),
        ("subprocess_cpu_ms_per_episode", per_episode(lambda r: r.subprocess_cpu_s),
         f"CPU per episode of the harness subprocesses (uv, Verifiers' chat program), {side}", "ms", "lower"),
        ("trainer_share", [share(r.trainer_cpu_s, r.total_cpu_s) for r in rounds],
         f"trainer-process share of the CPU, {side}", "share", "lower"),
        ("subprocess_share", [share(r.subprocess_cpu_s, r.total_cpu_s) for r in rounds],
         f"harness subprocesses' share of the CPU, {side}", "share", "none"),
        ("ok_share", [r.ok / max(1, r.episodes) for r in rounds],
         f"episodes Verifiers judged ok, {side}", "share", "higher"),
    ]  # fmt: skip


def _per_s(r: StockRound) -> float:
    return r.episodes_per_s


def _cpu_ms(r: StockRound) -> float:
    return r.per_episode_ms(r.total_cpu_s)


def _side(variant: str) -> str:
    if variant == LOOP:
        return "Verifiers' own loop"
    if variant == LOOP_X2:
        return "Verifiers' own loop in 2 processes"
    return f"adapter, {variant[1:]} worker(s)"


def _over(loop: str) -> str:
    """The key suffix of a ratio to ``loop``."""
    return "over_loop" if loop == LOOP else "over_loop_x2"


def record_stock04(
    recorder: Recorder, rounds: Mapping[str, Sequence[StockRound]], **params: Any
) -> None:
    """Each side's figures, and each adapter variant over Verifiers' loop (per-round ratios
    of throughput and of CPU per episode; round i of each side was measured in one pass)."""
    for variant, measured in rounds.items():
        if measured:
            figures = _per_side_figures(measured, _side(variant))
            recorder.group(GROUP, variant=variant, **params).each(f"{GROUP}.{variant}", figures)
    for variant, loop in COMPARISONS:
        measured, baseline = rounds.get(variant, ()), rounds.get(loop, ())
        if not measured or len(baseline) != len(measured):
            continue
        over = f"{_side(variant)} / {_side(loop)}"
        recorder.group(GROUP, variant=variant, **params).each(f"{GROUP}.{variant}", [
            (f"throughput_{_over(loop)}", ratios_of(_per_s, measured, baseline),
             f"episodes/s, {over} (goal >= {GOAL_OVER_LOOP})", "ratio", "higher"),
            (f"cpu_{_over(loop)}", ratios_of(_cpu_ms, measured, baseline),
             f"CPU per episode, {over}", "ratio", "lower"),
        ])  # fmt: skip


def stock04_goals(result: BenchResult) -> list[GoalRow]:
    """The row's goal (adapter >= 0.95x Verifiers' own loop), per worker count and loop."""
    figures = result.by_key()
    if not any(key.startswith(f"{GROUP}.") for key in figures) and GROUP not in result.settings:
        return []
    rows = []
    for variant, loop in COMPARISONS:
        key = f"{GROUP}.{variant}.throughput_{_over(loop)}"
        figure = figures.get(key)
        value = None if figure is None else figure.median
        if value is None:
            status = str(result.settings.get(GROUP) or "unavailable: not measured in this run")
        else:
            status = "met" if value >= GOAL_OVER_LOOP else "not met"
        rows.append(
            GoalRow(
                f"0.4 stock harness: {_side(variant)} vs {_side(loop)}",
                key,
                value,
                f">= {GOAL_OVER_LOOP}",
                status,
            )
        )
    return rows


__all__ = [
    "ADAPTER_VARIANTS",
    "LOOP",
    "LOOP_X2",
    "SplitCpu",
    "StockLoop",
    "StockRound",
    "record_stock04",
    "run_loops",
    "stock04_goals",
    "worker_python_ok",
]

if __name__ == "__main__":  # pragma: no cover - a module, not a program
    sys.exit("benchmarks.stock04 is driven by benchmarks/bench_stock04.py")
