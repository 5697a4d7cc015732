"""Session fixtures for the rollout-function tests: one loopback engine, one Miles loop.

The engine is the project's SGLang stand-in served over real HTTP on 127.0.0.1 (zero latency
unless a test sets one); each test resets its knobs and counters. The fixture taskset
packages must be installed (``pip install --no-deps ./fixtures/environments/<name>``).
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_testkit.tokenizers import build_all, offline_environ

for _name, _value in offline_environ().items():
    os.environ.setdefault(_name, _value)

from miles_verifiers_testkit.miles import serve_recording_engine
from tests.fixture_tasksets import require_installed
from tests.rollout.rollout_support import (
    MODEL,
    MilesLoop,
    RecordingEngine,
    RolloutFnFactory,
    Rollouts,
    point_at,
)

require_installed()


@pytest.fixture(scope="session")
def engine_server() -> Iterator[tuple[RecordingEngine, int]]:
    build_all()
    with serve_recording_engine(MODEL) as (engine, running):
        yield engine, running.port


@pytest.fixture
def engine(engine_server: tuple[RecordingEngine, int]) -> Iterator[RecordingEngine]:
    served, _ = engine_server
    served.reset()
    yield served


@pytest.fixture
def engine_port(engine_server: tuple[RecordingEngine, int]) -> int:
    return engine_server[1]


@pytest.fixture
def build_rollout_fn(
    engine: RecordingEngine, engine_port: int, use_config: Any
) -> RolloutFnFactory:
    """Construct the rollout function as Miles does: ``VERIFIERS_CONFIG`` set, construction
    with no engine address, then the router address put on the same args."""
    from miles_verifiers import AdapterSettings, VerifiersRolloutFn
    from miles_verifiers.trainer.contract.compat import contract
    from miles_verifiers_testkit.miles import construct_rollout_fn

    def build(
        args: Namespace,
        config: Path,
        settings: AdapterSettings | None = None,
        *,
        data_source: Any = None,
    ) -> VerifiersRolloutFn:
        use_config(config)
        fn = construct_rollout_fn(
            VerifiersRolloutFn, contract(), args, data_source=data_source, settings=settings
        )
        point_at(args, engine_port)
        return fn

    return build


@pytest.fixture
def rollouts(
    engine: RecordingEngine,
    engine_port: int,
    miles_loop: MilesLoop,
    build_rollout_fn: RolloutFnFactory,
    tmp_path: Path,
) -> Rollouts:
    return Rollouts(engine, engine_port, miles_loop, build_rollout_fn, tmp_path)


@pytest.fixture(scope="session")
def miles_loop() -> Iterator[MilesLoop]:
    loop = MilesLoop()
    yield loop
    loop.close()


@pytest.fixture
def use_config(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point ``VERIFIERS_CONFIG`` at a file for the constructions of one test."""

    def set_config(path: Any) -> None:
        monkeypatch.setenv("VERIFIERS_CONFIG", str(path))

    return set_config


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    from renderers.base import load_tokenizer

    build_all()
    return load_tokenizer(MODEL)


@pytest.fixture(scope="session")
def unregistered_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A local copy of the Qwen3 tokenizer under a name Renderers has no renderer for."""
    import shutil
    from pathlib import Path

    from huggingface_hub import snapshot_download

    build_all()
    source = Path(snapshot_download(MODEL, local_files_only=True))
    target = tmp_path_factory.mktemp("checkpoints") / "my-policy"
    target.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        if (source / name).exists():
            shutil.copyfile(source / name, target / name)
    return target
