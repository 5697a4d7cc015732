"""Episode workers in the benchmarks: which variants run, the goals, and the scaling projection.

A *variant* is how the adapter runs its episodes: ``in-process`` (no worker setting, today's
path) or ``wN``, N local worker processes, set with ``AdapterSettings(episode_workers=N,
episode_worker_backend="local")``. A build whose ``AdapterSettings`` has no such fields cannot
run ``wN``; the benchmark records that variant as ``unavailable: <reason>`` and goes on.

Everything here but :func:`worker_settings` is pure arithmetic over recorded figures, so the
goals and the projection are checked by unit tests without running anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from benchmarks.ratios import ratios_of, round_ratios
from benchmarks.results import BenchResult, Better, ParamValue

if TYPE_CHECKING:  # the recorder's module imports this one (through the report)
    from benchmarks.recorder import Recorder

IN_PROCESS = "in-process"
WORKER_BACKEND = "local"
GOAL_SATURATION = 0.95
GOAL_ONE_WORKER = 0.95
"""One worker counts as no slower than in-process at >= 0.95 of its throughput: the
per-round ratio of two runs on a shared machine moves by a few percent either way."""
GOAL_TWO_WORKERS = 1.6
GOAL_TRAINER_CPU_MS = 1.0


def variant_name(workers: int | None) -> str:
    return IN_PROCESS if workers is None else f"w{workers}"


def variants(worker_counts: Sequence[int]) -> list[str]:
    """``in-process`` first (the baseline every ratio divides by), then ``wN`` per count."""
    return [IN_PROCESS, *(variant_name(n) for n in worker_counts)]


def workers_of(variant: str) -> int | None:
    if variant == IN_PROCESS:
        return None
    if not variant.startswith("w") or not variant[1:].isdigit() or int(variant[1:]) < 1:
        raise ValueError(f"unknown variant {variant!r}; use {IN_PROCESS!r} or wN with N >= 1")
    return int(variant[1:])


@dataclass(frozen=True)
class VariantSetup:
    """The settings a variant's rollout function is built with, or why it cannot run."""

    variant: str
    settings: Any = None
    unavailable: str | None = None


def worker_settings(variant: str) -> VariantSetup:
    """``AdapterSettings`` for ``variant``; unavailable when this build has no worker fields."""
    workers = workers_of(variant)
    if workers is None:
        return VariantSetup(variant)
    from pydantic import ValidationError

    from miles_verifiers import AdapterSettings

    try:
        settings = AdapterSettings(episode_workers=workers, episode_worker_backend=WORKER_BACKEND)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "settings"
        return VariantSetup(
            variant,
            unavailable=(
                f"unavailable: AdapterSettings rejects {where} ({first.get('msg')}); this "
                "build has no episode workers"
            ),
        )
    return VariantSetup(variant, settings=settings)


def per_turn_ms(cpu_seconds: float, model_turns: int) -> float:
    return 1000.0 * cpu_seconds / max(1, model_turns)


# -- goals ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoalRow:
    goal: str
    figure: str
    measured: float | None
    target: str
    status: str
    """``met``, ``not met``, or ``unavailable: <reason>``."""


def _status(measured: float | None, ok: bool, missing: str) -> str:
    if measured is None:
        return missing
    return "met" if ok else "not met"


def _missing(result: BenchResult, variant: str) -> str:
    reason = result.settings.get(f"workers.{variant}")
    return str(reason) if reason else "unavailable: not measured in this run"


def _tasksets(result: BenchResult, prefix: str) -> list[str]:
    found = {f.key.split(".")[1] for f in result.figures if f.key.startswith(prefix)}
    return sorted(found)


def evaluate_goals(result: BenchResult) -> list[GoalRow]:
    """Each goal of the episode-worker work against this run's figures (measured, not asserted)."""
    figures = result.by_key()

    def median(key: str) -> float | None:
        figure = figures.get(key)
        return None if figure is None else figure.median

    rows: list[GoalRow] = []
    for taskset in _tasksets(result, "workers."):
        key = f"workers.{taskset}.w1.throughput_over_in_process"
        value = median(key)
        rows.append(
            GoalRow(
                f"{taskset}: one worker no slower than in-process",
                key,
                value,
                f">= {GOAL_ONE_WORKER}",
                _status(
                    value, value is not None and value >= GOAL_ONE_WORKER, _missing(result, "w1")
                ),
            )
        )
        key = f"workers.{taskset}.w2.throughput_over_in_process"
        value = median(key)
        rows.append(
            GoalRow(
                f"{taskset}: 2 workers vs single process throughput",
                key,
                value,
                f">= {GOAL_TWO_WORKERS}",
                _status(
                    value, value is not None and value >= GOAL_TWO_WORKERS, _missing(result, "w2")
                ),
            )
        )
        for variant in ("w2", "w4"):
            key = f"workers.{taskset}.{variant}.trainer_cpu_ms_per_turn"
            value = median(key)
            rows.append(
                GoalRow(
                    f"{taskset}: trainer CPU per model turn with {variant[1:]} workers",
                    key,
                    value,
                    f"<= {GOAL_TRAINER_CPU_MS} ms",
                    _status(
                        value,
                        value is not None and value <= GOAL_TRAINER_CPU_MS,
                        _missing(result, variant),
                    ),
                )
            )
    saturation = sorted(
        f.key
        for f in result.figures
        if f.key.startswith("workers_saturation.") and f.key.endswith(".adapter_over_ceiling")
    )
    for key in saturation:
        _, plan, variant, _ = key.split(".")
        value = median(key)
        rows.append(
            GoalRow(
                f"saturation {plan}, {variant}",
                key,
                value,
                f">= {GOAL_SATURATION}",
                _status(value, value is not None and value >= GOAL_SATURATION, ""),
            )
        )
    return rows


# -- the scaling projection ---------------------------------------------------------------------


@dataclass(frozen=True)
class Projection:
    engines: int
    seconds_per_request: float
    turns_per_s: float
    trainer_cores: float
    """Trainer-process CPU the turn rate needs, in cores (it must stay under one: one GIL)."""
    workers: int
    """Worker processes needed, each kept to ``core_budget`` of a core."""


def project(
    *,
    engines: int,
    batch_per_engine: int,
    seconds_per_request: float,
    trainer_cpu_ms_per_turn: float,
    worker_cpu_ms_per_turn: float,
    core_budget: float = 0.8,
) -> Projection:
    """How many workers keep ``engines`` busy, from the measured per-turn CPU costs.

    Each engine runs ``batch_per_engine`` requests at once, each taking ``seconds_per_request``
    (its reply length over the decode speed), so the fleet asks for
    ``R = engines * batch_per_engine / seconds_per_request`` model turns per second. The trainer
    process then needs ``R * trainer_ms / 1000`` cores and the workers ``R * worker_ms / 1000``,
    spread over ``ceil(that / core_budget)`` processes.
    """
    if engines < 1 or batch_per_engine < 1 or seconds_per_request <= 0:
        raise ValueError("engines and batch_per_engine must be >= 1 and seconds_per_request > 0")
    if not 0 < core_budget <= 1:
        raise ValueError(f"core_budget is a fraction of one core, got {core_budget}")
    rate = engines * batch_per_engine / seconds_per_request
    worker_cores = rate * worker_cpu_ms_per_turn / 1000.0
    return Projection(
        engines=engines,
        seconds_per_request=seconds_per_request,
        turns_per_s=rate,
        trainer_cores=rate * trainer_cpu_ms_per_turn / 1000.0,
        workers=max(1, math.ceil(worker_cores / core_budget - 1e-9)),
    )


def projection_table(
    engine_counts: Iterable[int],
    seconds_per_request: Iterable[float],
    **costs: Any,
) -> str:
    """A Markdown table of :func:`project` over engine counts and request durations."""
    lines = [
        "| engines | s per request | model turns/s | trainer cores | workers |",
        "|---:|---:|---:|---:|---:|",
    ]
    durations = list(seconds_per_request)
    for engines in engine_counts:
        for seconds in durations:
            p = project(engines=engines, seconds_per_request=seconds, **costs)
            lines.append(
                f"| {p.engines} | {p.seconds_per_request:g} | {p.turns_per_s:,.0f} | "
                f"{p.trainer_cores:.2f} | {p.workers} |"
            )
    return "\n".join(lines)


def unavailable_settings(setups: Mapping[str, VariantSetup]) -> dict[str, str]:
    """The result-file settings that say which variants could not run, and why."""
    return {
        f"workers.{name}": setup.unavailable
        for name, setup in setups.items()
        if setup.unavailable is not None
    }


# -- recording ---------------------------------------------------------------------------------


class CallLike(Protocol):
    """What a measured training call reports (``benchmarks.rollouts.CallStats``)."""

    @property
    def wall_s(self) -> float: ...
    @property
    def rollouts(self) -> int: ...
    @property
    def model_turns(self) -> int: ...
    @property
    def sampled_tokens(self) -> int: ...
    @property
    def trainer_cpu_s(self) -> float: ...
    @property
    def env_cpu_s(self) -> float: ...


def _rollouts_per_s(c: CallLike) -> float:
    return c.rollouts / c.wall_s


def _trainer_ms(c: CallLike) -> float:
    return per_turn_ms(c.trainer_cpu_s, c.model_turns)


def _per_variant_figures(
    rounds: Sequence[CallLike], taskset: str, variant: str
) -> list[tuple[str, list[float], str, str, Better]]:
    """``(name, samples, label, unit, better)`` of one variant's rounds."""
    return [
        ("rollouts_per_s", [_rollouts_per_s(c) for c in rounds],
         f"{taskset} rollouts/s, {variant}", "rollouts/s", "higher"),
        ("model_turns_per_s", [c.model_turns / c.wall_s for c in rounds],
         f"{taskset} model turns/s, {variant}", "turns/s", "higher"),
        ("trainer_cpu_ms_per_turn", [_trainer_ms(c) for c in rounds],
         f"{taskset} trainer-process CPU per model turn, {variant}", "ms", "lower"),
        ("worker_cpu_ms_per_turn", [per_turn_ms(c.env_cpu_s, c.model_turns) for c in rounds],
         f"{taskset} CPU of the trainer's child processes (workers, environment servers) "
         f"per model turn, {variant}", "ms", "lower"),
    ]  # fmt: skip


def _variant_params(variant: str, **params: ParamValue) -> dict[str, ParamValue]:
    workers = workers_of(variant)
    return {**params, "variant": variant, **({} if workers is None else {"workers": workers})}


def record_worker_point(
    recorder: Recorder, taskset: str, calls: Mapping[str, Sequence[CallLike]]
) -> None:
    """Throughput and per-turn CPU of each variant, and its throughput over in-process.

    ``calls[variant][i]`` is round ``i`` of that variant; the rounds of all variants were
    measured interleaved, so round i of ``wN`` is divided by round i of ``in-process``.
    """
    baseline = calls.get(IN_PROCESS, ())
    for variant, rounds in calls.items():
        if not rounds:
            continue
        key = f"workers.{taskset}.{variant}"
        record = recorder.group("workers", **_variant_params(variant, taskset=taskset))
        record.each(key, _per_variant_figures(rounds, taskset, variant))
        if variant != IN_PROCESS and len(baseline) == len(rounds):
            record(
                f"{key}.throughput_over_in_process",
                ratios_of(_rollouts_per_s, rounds, baseline),
                f"{taskset} rollouts/s, {variant} / in-process (per-round ratio)",
                "ratio",
            )


# The Verifiers generations compared side by side (``bench_workers.py``): the same work, in
# two local workers each, against mv-arith (verifiers 0.2.0) and its port mv-arith04 (0.4.0).
GENERATION_VARIANT = "w2"
WORKER_PYTHON04 = "MILES_VERIFIERS_BENCH_WORKER_PYTHON04"
"""The Python of a virtualenv with ``miles-verifiers[verifiers04]`` and mv-arith04 (``tox -e
bench`` builds one); unset, the 0.4 row is recorded as unavailable."""


def record_generation_point(
    recorder: Recorder, calls02: Sequence[CallLike], calls04: Sequence[CallLike]
) -> None:
    """The 0.4 row: its throughput and per-turn CPU, and both over 0.2.0's (per-round ratios
    of rounds measured interleaved)."""
    record_worker_point(recorder, "mv-arith04", {GENERATION_VARIANT: calls04})
    record = recorder.group("workers", **_variant_params(GENERATION_VARIANT, taskset="mv-arith04"))
    record.each(f"workers.mv-arith04.{GENERATION_VARIANT}", [
        ("throughput_over_0_2", ratios_of(_rollouts_per_s, calls04, calls02),
         "rollouts/s, verifiers 0.4.0 / 0.2.0 workers (mv-arith04 / mv-arith, per-round ratio)",
         "ratio", "higher"),
        ("trainer_cpu_over_0_2", ratios_of(_trainer_ms, calls04, calls02),
         "trainer-process CPU per turn, verifiers 0.4.0 / 0.2.0 workers (per-round ratio)",
         "ratio", "lower"),
    ])  # fmt: skip


def record_worker_saturation(
    recorder: Recorder,
    plan: str,
    description: str,
    decode_s_per_token: float,
    rounds: Mapping[str, Sequence[tuple[CallLike, float]]],
) -> None:
    """Per variant: adapter tokens/s over the direct ceiling's (``(call, ceiling tokens/s)``
    per round), the mean reply length and the engine time per request it implies."""
    for variant, pairs in rounds.items():
        if not pairs:
            continue
        adapter = [c.sampled_tokens / c.wall_s for c, _ in pairs]
        ceiling = [direct for _, direct in pairs]
        mean_tokens = [c.sampled_tokens / max(1, c.model_turns) for c, _ in pairs]
        record = recorder.group("workers-saturation", **_variant_params(variant, plan=plan))
        record.each(f"workers_saturation.{plan}.{variant}", [
            ("adapter_over_ceiling", round_ratios(adapter, ceiling),
             f"adapter / ceiling tokens/s, {description}, {variant} (goal >= 0.95)",
             "ratio", "higher"),
            ("adapter_tokens_per_s", adapter,
             f"through the adapter: sampled tokens/s, {variant}", "tokens/s", "higher"),
            ("seconds_per_request", [decode_s_per_token * t for t in mean_tokens],
             f"engine decode time per request (mean reply length x decode time), {variant}",
             "s", "none"),
        ])  # fmt: skip


def _numbers(kind: type, text: str, flag: str) -> list[Any]:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"{flag} takes comma-separated numbers, got {text!r}") from None
    if not values:
        raise SystemExit(f"{flag} needs at least one value")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.workers``: print the projection table for measured costs."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.workers",
        description="Workers needed for N engines, from measured CPU per model turn.",
    )
    parser.add_argument("--trainer-ms", type=float, required=True, help="trainer CPU per turn")
    parser.add_argument("--worker-ms", type=float, required=True, help="worker CPU per turn")
    parser.add_argument("--engines", default="1,4,8,16", help="engine counts, e.g. 1,4,8")
    parser.add_argument("--seconds", default="1,4", help="seconds per request, e.g. 1,4")
    parser.add_argument("--batch", type=int, default=64, help="sequences each engine runs")
    parser.add_argument(
        "--core-budget", type=float, default=0.8, help="share of a core per process"
    )
    args = parser.parse_args(argv)
    try:
        table = projection_table(
            _numbers(int, args.engines, "--engines"),
            _numbers(float, args.seconds, "--seconds"),
            batch_per_engine=args.batch,
            trainer_cpu_ms_per_turn=args.trainer_ms,
            worker_cpu_ms_per_turn=args.worker_ms,
            core_budget=args.core_budget,
        )
    except ValueError as error:
        parser.error(str(error))
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
