"""Fixtures of the conformance suite, and the registration of its plugin.

The plugin (``plugin.py``) brings the options (``--adapter``, ``--conformance-report``,
``--clause``, ``--conformance-profile``), the ``clause`` marker, the report and the snapshot
fixtures. The fixtures below are session-wide so that hypothesis examples can share them:
each example resets the engine (``world.engine.reset(...)``) before it runs.

The repository's root conftest builds the offline tokenizers and sets the offline Hugging
Face environment before anything here imports transformers.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from miles_verifiers_conformance.plugin import pytest_addoption, pytest_configure  # noqa: F401 - pytest hooks

if TYPE_CHECKING:  # the engine and Verifiers load only once the offline environment is set
    from miles_verifiers_testkit.miles import MilesLoop, MilesWorld, RecordingEngine


def load_object(spec: str, option: str) -> Any:
    """``module:attribute`` -> the object (ImportError until it exists)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise pytest.UsageError(
            f"{option} {spec!r}: expected module:attribute, e.g. miles_verifiers:VerifiersRolloutFn"
        )
    return getattr(importlib.import_module(module_name), attribute)


@pytest.fixture(scope="session")
def adapter_class(pytestconfig: pytest.Config) -> Any:
    """The rollout function class, or a legacy function (wrapped as Miles wraps one)."""
    return load_object(pytestconfig.getoption("--adapter"), "--adapter")


@pytest.fixture(scope="session")
def replacement_error(pytestconfig: pytest.Config) -> type:
    return load_object(pytestconfig.getoption("--replacement-error"), "--replacement-error")


@pytest.fixture(scope="session")
def contract() -> Any:
    """Miles' contract types when Miles is importable, the project's port otherwise."""
    from miles_verifiers.trainer.contract.compat import contract as resolve

    return resolve()


@pytest.fixture(scope="session")
def recording_engine() -> Iterator[tuple[RecordingEngine, str, int]]:
    from miles_verifiers_testkit.miles import serve_recording_engine

    with serve_recording_engine() as (engine, running):
        yield engine, "127.0.0.1", running.port


@pytest.fixture(scope="session")
def miles_loop() -> Iterator[MilesLoop]:
    from miles_verifiers_testkit.miles import MilesLoop

    loop = MilesLoop()
    yield loop
    loop.close()


# How long teardown waits for what a hung call left running to stop.
LEFTOVER_WAIT_S = 10.0


@pytest.fixture(autouse=True)
def no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, close the rollout functions it built (when the adapter has a
    ``close()``). After a test whose call ran past its deadline, also cancel what it left on
    the Miles loop and abort everything on its engine (bounded), so the next test starts on
    a clean engine.

    Cheaper than an engine per test, and only paid after a hang: between calls a
    well-behaved adapter runs nothing on the loop.
    """
    if "miles_loop" not in request.fixturenames:
        yield
        return
    loop = request.getfixturevalue("miles_loop")
    overruns = loop.overruns
    yield
    worlds = [
        world
        for name in ("world", "deployment_world")
        if (world := request.node.funcargs.get(name)) is not None  # type: ignore[attr-defined]
    ]
    hung = loop.overruns != overruns
    if hung:
        loop.cancel_leftovers(LEFTOVER_WAIT_S)
    for world in worlds:
        if hung:
            world.engine.abort(abort_all=True)
            world.engine.wait_until_idle(LEFTOVER_WAIT_S)
        world.close_started()


@pytest.fixture(scope="session")
def call_deadline_s(pytestconfig: pytest.Config) -> float:
    deadline = float(pytestconfig.getoption("--call-deadline"))
    if deadline <= 0:
        raise pytest.UsageError(f"--call-deadline {deadline:g}: give a positive number of seconds")
    return deadline


@pytest.fixture(scope="session")
def world(
    adapter_class: type,
    contract: Any,
    recording_engine: tuple[RecordingEngine, str, int],
    miles_loop: MilesLoop,
    call_deadline_s: float,
) -> MilesWorld:
    from miles_verifiers_conformance.world import MilesWorld

    engine, host, port = recording_engine
    return MilesWorld(
        adapter_class, contract, engine, host, port, miles_loop, deadline_s=call_deadline_s
    )


# Production deployments (the topology in front of the engines, and the SGLang version they
# imitate): the real Rust router, a raw proxy like Miles' own router, a bare worker.
DEPLOYMENT_VERSIONS = ("0.5.16-fork", "0.5.23")
DEPLOYMENTS = tuple(
    f"{topology}@{version}"
    for topology in ("sglang-router", "pass-through", "direct")
    for version in DEPLOYMENT_VERSIONS
)


@pytest.fixture(scope="session", params=DEPLOYMENTS)
def deployment_world(
    request: pytest.FixtureRequest,
    adapter_class: type,
    contract: Any,
    miles_loop: MilesLoop,
    call_deadline_s: float,
) -> Iterator[MilesWorld]:
    """A world whose engine is a production deployment; cases whose router cannot start skip."""
    from miles_verifiers_conformance.world import EnginePool, MilesWorld, RecordingEngine
    from miles_verifiers_testkit.engine import EngineConfig
    from miles_verifiers_testkit.engine.model import load_model_profile
    from miles_verifiers_testkit.engine.topology import TopologyUnavailable, serve_topology

    topology, _, version = request.param.partition("@")
    config = EngineConfig(model="Qwen/Qwen3-0.6B", sglang_version=version, router=False)
    count = 1 if topology == "direct" else 2
    profile = load_model_profile(config.model, None)  # one tokenizer load for every worker
    engines = [RecordingEngine(config, model=profile) for _ in range(count)]
    try:
        with serve_topology(topology, engines) as running:
            url = httpx_url(running.url)
            yield MilesWorld(
                adapter_class,
                contract,
                EnginePool(engines),  # type: ignore[arg-type]
                url.host,
                url.port or 80,
                miles_loop,
                deadline_s=call_deadline_s,
                deployment=request.param,
            )
    except TopologyUnavailable as exc:
        pytest.skip(f"deployment {request.param} cannot run here: {exc}")


def httpx_url(url: str) -> Any:
    import httpx

    return httpx.URL(url)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scratch space shared by hypothesis examples (configs, --save directories)."""
    return tmp_path_factory.mktemp("conformance")


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    """The exact offline Qwen3 tokenizer (for decoding samples in expectations)."""
    try:
        from renderers.base import load_tokenizer
    except ImportError:  # a trainer environment without the episode side (tox -e split)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
    return load_tokenizer("Qwen/Qwen3-0.6B")
