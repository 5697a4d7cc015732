"""Fixtures for the loopback engine's contract tests.

The engine loads its tokenizer by hub id from the offline cache, which needs
``offline_environ()`` in ``os.environ`` before huggingface_hub is imported; the project's
top-level conftest does that for the whole session, and the ``setdefault`` below does the
same when this folder runs on its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.loopback_http import client as loopback_client
from miles_verifiers_testkit.tokenizers import build_all, offline_environ

for _name, _value in offline_environ().items():
    os.environ.setdefault(_name, _value)

from miles_verifiers_testkit.engine import (
    EngineClock,
    EngineConfig,
    LoopbackEngine,
    ModelProfile,
    PolicyConfig,
    RunningEngine,
    VirtualClock,
    load_model_profile,
    serve_engine,
)
from tests.engine.engine_support import QWEN, ServeFactory


@pytest.fixture(scope="session")
def offline_tokenizers() -> None:
    build_all()


@pytest.fixture(scope="session")
def qwen(offline_tokenizers: None) -> ModelProfile:
    return load_model_profile(QWEN)


@pytest.fixture(scope="session")
def qwen_renderer(qwen: ModelProfile) -> Any:
    import renderers

    return renderers.create_renderer(qwen.tokenizer)


@pytest.fixture
def early_clock() -> VirtualClock:
    """A virtual clock whose every wait ends 50 ms short, as an event-loop timer may end a
    little early: the engine must still pace to its model."""
    return VirtualClock(early_s=0.05)


@pytest.fixture
def serve(qwen: ModelProfile) -> ServeFactory:
    """Start a fresh Qwen3 engine with the given ``EngineConfig`` fields (and ``clock``, if
    given), on loopback.

    These tests specify the 0.5.23 contract unless a test names another version (the engine's
    own default is the 0.5.16 fork production Miles runs).
    """

    def start(
        clock: EngineClock | None = None, **fields: Any
    ) -> AbstractContextManager[RunningEngine]:
        fields.setdefault("sglang_version", "0.5.23")
        config = EngineConfig(model=QWEN, **fields)
        return serve_engine(engine=LoopbackEngine(config, model=qwen, clock=clock))

    return start


@pytest.fixture(scope="module")
def shared_engine(qwen: ModelProfile) -> Iterator[RunningEngine]:
    """One engine for a module's stateless checks (validation, shapes); it always answers right."""
    config = EngineConfig(model=QWEN, policy=PolicyConfig(accuracy=1.0), sglang_version="0.5.23")
    with serve_engine(engine=LoopbackEngine(config, model=qwen)) as running:
        yield running


@pytest.fixture
def client(shared_engine: RunningEngine) -> Iterator[httpx.Client]:
    url = shared_engine.base_url
    with loopback_client(url, base_url=url, timeout=30.0) as http:
        yield http
