"""Verifiers 0.4 on its stock harness: the adapter against Verifiers' own episode loop.

mv-arith04 with Verifiers' ``null`` harness (a ``uv`` script per episode), one loopback engine,
one episode concurrency, four sides measured in interleaved rounds (the order rotates each
round): Verifiers' own loop (``benchmarks/verifiers04_loop.py`` in the worker venv) in one
process and in two (half the groups and half the concurrency each), and the adapter with 1 and
2 local episode workers in that venv. See ``benchmarks/stock04.py`` for what each side runs
and how its CPU is counted. Needs ``MILES_VERIFIERS_BENCH_WORKER_PYTHON04`` (a venv with
Verifiers 0.4, mv-arith04 and ``uv``; ``tox -e bench`` builds one); without it the row is
recorded as unavailable.
"""

from __future__ import annotations

import math
import os
from contextlib import ExitStack

import pytest

from benchmarks.loadgen import flush_cache
from benchmarks.recorder import Recorder
from benchmarks.rollouts import MODEL_ID, RolloutDriver, point_driver
from benchmarks.rounds import measured_rounds
from benchmarks.scale import Scale
from benchmarks.stock04 import (
    ADAPTER_VARIANTS,
    GROUP,
    LOOP,
    LOOP_X2,
    TASKSET,
    SplitCpu,
    StockLoop,
    StockRound,
    record_stock04,
    run_loops,
    worker_python_ok,
)
from benchmarks.workers import WORKER_PYTHON04, worker_settings

CHAT_TEMPLATE_KWARGS = {"enable_thinking": False}  # as RolloutDriver sets Miles' flag


def _unavailable(recorder: Recorder, reason: str) -> None:
    recorder.settings[GROUP] = f"unavailable: {reason}"
    recorder.note(f"{GROUP}: unavailable: {reason}")
    pytest.skip(reason)


def _adapter_round(driver: RolloutDriver, exclude: tuple[int, ...]) -> StockRound:
    meter = SplitCpu(exclude=exclude)
    meter.start()
    call = driver.call()
    meter.stop()
    return StockRound(
        wall_s=call.wall_s,
        episodes=call.rollouts,
        ok=call.rollouts,  # a failed group is dropped, never returned, by a training call
        # The driver's own figure: this process during the call, without the /proc scans.
        trainer_cpu_s=call.trainer_cpu_s,
        process_cpu_s=meter.processes,
        subprocess_cpu_s=meter.subprocesses,
    )


def test_stock_harness_against_verifiers_own_loop(
    benchmark, scale: Scale, recorder: Recorder, zero_latency_engine
) -> None:
    python04 = os.environ.get(WORKER_PYTHON04)
    if not python04:
        _unavailable(recorder, f"set {WORKER_PYTHON04} to a verifiers 0.4.0 worker's python")
    problem = worker_python_ok(python04)
    if problem is not None:
        _unavailable(recorder, problem)
    url, engine_pid = zero_latency_engine
    point = scale.stock04_point
    rounds = point.rounds or scale.rounds
    settings = {}
    for variant in ADAPTER_VARIANTS:
        setup = worker_settings(variant)
        if setup.settings is None:
            _unavailable(recorder, setup.unavailable or f"no settings for {variant}")
        settings[variant] = setup.settings.model_copy(update={"episode_worker_python": python04})
    measured: dict[str, list[StockRound]] = {
        LOOP: [],
        LOOP_X2: [],
        **{v: [] for v in ADAPTER_VARIANTS},
    }
    errors: list[str] = []

    def measure() -> None:
        with ExitStack() as stack:

            def loop_process(concurrency: int) -> StockLoop:
                loop = StockLoop(
                    python=python04, engine_url=url, model=MODEL_ID, concurrency=concurrency
                )
                stack.callback(loop.close)
                return loop

            one = [loop_process(point.concurrency)]
            two = [loop_process(math.ceil(point.concurrency / 2)) for _ in range(2)]
            exclude = (engine_pid, *(loop.pid for loop in one + two))
            drivers = {
                variant: stack.enter_context(
                    point_driver(
                        url,
                        TASKSET,
                        point,
                        max_response_tokens=scale.max_response_tokens,
                        exclude_pids=exclude,
                        settings=settings[variant],
                    )
                )
                for variant in ADAPTER_VARIANTS
            }

            def loop_round(loops: list[StockLoop]) -> StockRound:
                others = [pid for pid in exclude if pid not in {loop.pid for loop in loops}]
                measured_round, found = run_loops(
                    loops,
                    groups=point.groups,
                    samples=point.samples_per_group,
                    exclude=others,
                    max_tokens=scale.max_response_tokens,
                    chat_template_kwargs=CHAT_TEMPLATE_KWARGS,
                )
                errors.extend(found)
                return measured_round

            sides = {LOOP: lambda: loop_round(one), LOOP_X2: lambda: loop_round(two)}
            for variant, driver in drivers.items():
                sides[variant] = lambda d=driver: _adapter_round(d, exclude)
            # Unmeasured: uv's script environment built, workers started, tokenizers loaded.
            for side in sides.values():
                side()
            names = list(sides)
            for i in range(rounds):
                for name in names[i % len(names) :] + names[: i % len(names)]:
                    flush_cache(url)
                    measured[name].append(sides[name]())

    measured_rounds(benchmark, measure)
    recorder.settings[f"{GROUP}.point"] = (
        f"{point.groups} tasks x {point.samples_per_group} episodes per round, concurrency "
        f"{point.concurrency}, {rounds} rounds, order rotated each round"
    )
    for error in sorted(set(errors))[:5]:
        recorder.note(f"{GROUP}: Verifiers' own loop reported: {error}")
    record_stock04(
        recorder,
        measured,
        taskset=TASKSET,
        concurrency=point.concurrency,
        episodes=point.rollouts_per_call,
    )
