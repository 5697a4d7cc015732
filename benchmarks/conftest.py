"""pytest wiring for the benchmarks: options, the shared recorder, and the result files.

``pytest benchmarks`` writes ``bench-result.json``, ``bench-result.md`` and
``bench-throughput.png`` into ``--bench-out`` (default ``reports/bench``) when it ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.engine_proc import loopback_engine_process
from benchmarks.machine import REPO_ROOT, machine_info
from benchmarks.prompts import arithmetic_prompts
from benchmarks.recorder import Recorder, write_outputs
from benchmarks.scale import PRESETS, Scale

_RECORDER = pytest.StashKey[Recorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("miles-verifiers benchmarks")
    group.addoption(
        "--bench-out",
        default=str(REPO_ROOT / "reports" / "bench"),
        help="folder for bench-result.json, bench-result.md and bench-throughput.png",
    )
    group.addoption(
        "--bench-scale",
        default="standard",
        choices=sorted(PRESETS),
        help="how much work each benchmark does: standard (tox -e bench) or smoke (a quick check)",
    )


def pytest_configure(config: pytest.Config) -> None:
    scale = PRESETS[config.getoption("--bench-scale")]
    config.stash[_RECORDER] = Recorder(
        settings={
            "scale": scale.name,
            "engine": "loopback, own process, zero latency (saturation: latency model)",
            "rounds": scale.rounds,
            # Wall-clock figures move with whatever else runs: say how busy the machine was.
            "load_average_at_start": round(os.getloadavg()[0], 2),
        },
        # The commit and dirty flag as the run starts: that is the code being measured.
        machine=machine_info(),
    )
    # Exact tokenizers are rebuilt from registry packages once (cached), and every library
    # that would reach the Hugging Face hub is pointed at them, before anything imports
    # transformers.
    from miles_verifiers_testkit.tokenizers import build_all, offline_environ

    build_all()
    os.environ.update(offline_environ())


@pytest.fixture(scope="session")
def scale(pytestconfig: pytest.Config) -> Scale:
    return PRESETS[pytestconfig.getoption("--bench-scale")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per end-to-end point (``rollout_case``), per saturation plan, and per worker
    taskset and worker saturation plan of the scale."""
    if "rollout_case" in metafunc.fixturenames:
        scale = PRESETS[metafunc.config.getoption("--bench-scale")]
        cases = [
            (taskset, point) for taskset, points in scale.rollout_points.items() for point in points
        ]
        metafunc.parametrize("rollout_case", cases, ids=[f"{t}-c{p.concurrency}" for t, p in cases])
    if "worker_taskset" in metafunc.fixturenames:
        tasksets = sorted(PRESETS[metafunc.config.getoption("--bench-scale")].worker_points)
        metafunc.parametrize("worker_taskset", tasksets)
    if "worker_plan" in metafunc.fixturenames:
        plans = PRESETS[metafunc.config.getoption("--bench-scale")].worker_saturation
        metafunc.parametrize("worker_plan", plans, ids=[plan.name for plan in plans])
    if "saturation_plan" in metafunc.fixturenames:
        plans = PRESETS[metafunc.config.getoption("--bench-scale")].saturation
        metafunc.parametrize("saturation_plan", plans, ids=[plan.name for plan in plans])


@pytest.fixture(scope="session")
def zero_latency_engine() -> Iterator[tuple[str, int]]:
    """``(base_url, pid)`` of a zero-latency loopback engine in its own process."""
    with loopback_engine_process() as engine:
        yield engine


@pytest.fixture(scope="session")
def prompts() -> list[tuple[int, ...]]:
    """Qwen3-rendered fixture questions, as token ids."""
    return arithmetic_prompts(count=64)


@pytest.fixture(scope="session")
def recorder(pytestconfig: pytest.Config) -> Recorder:
    return pytestconfig.stash[_RECORDER]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    recorder = session.config.stash.get(_RECORDER, None)
    if recorder is None or not recorder.figures:
        return
    recorder.settings["load_average_at_end"] = round(os.getloadavg()[0], 2)
    out_dir = Path(session.config.getoption("--bench-out"))
    files = write_outputs(recorder.result(), out_dir)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("-", "benchmark results")
        reporter.write_line(f"result:   {files.json}")
        reporter.write_line(f"table:    {files.markdown}")
        reporter.write_line(
            f"plot:     {files.plot or '(no throughput-vs-concurrency figures this run)'}"
        )
