"""The world an adapter lives in during a conformance test: Miles around it, the engine behind it.

``MilesWorld`` builds the adapter the way Miles' rollout manager does (constructor input
first, engine address set afterwards on the same args) and calls it the way Miles does (from
a worker thread, coroutines on one persistent loop), with a deadline per call. The engine is
the project's loopback SGLang engine, wrapped so the suite can see every ``/generate`` call it
received and what it answered; nothing of the adapter's internals is looked at. All of it is
the project's Miles test kit (``miles_verifiers_testkit.miles``); the suite adds only how a
sample is matched to its task.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR
from miles_verifiers_testkit.miles import (
    DEFAULT_DEADLINE_S,
    FIXTURE_CONFIGS,
    GenerateCall,
    LegacyRolloutFn,
    MilesWorld,
    RecordingEngine,
    env_id,
    load_task_data,
    task_prompts,
    write_config,
)
from miles_verifiers_testkit.miles.engine import QUIET_WAIT_S, EnginePool

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_DEADLINE_S",
    "FIXTURE_CONFIGS",
    "QUIET_WAIT_S",
    "EnginePool",
    "GenerateCall",
    "LegacyRolloutFn",
    "MilesWorld",
    "RecordingEngine",
    "env_id",
    "identify",
    "load_task_data",
    "prompt_matches",
    "require_taskset",
    "task_prompts",
    "write_config",
]


def prompt_matches(sample_prompt: Any, text: str) -> bool:
    """Whether a ``Sample.prompt`` (a string or a list of messages) holds the task text."""
    return text in (sample_prompt if isinstance(sample_prompt, str) else str(sample_prompt))


def identify(sample: Any, prompts: Sequence[str]) -> str | None:
    """The task prompt a sample was generated for, or None."""
    for text in prompts:
        if prompt_matches(sample.prompt, text):
            return text
    return None


def skip_for_verifiers04(config: Path, why: str) -> None:
    """Skip the test when ``config`` is a Verifiers 0.4 port (its taskset id ends in ``04``):
    its clause has no 0.4 meaning, for the reason ``why``, which the report shows."""
    found = tomllib.loads(config.read_text(encoding="utf-8"))["taskset"]["id"]
    if str(found).endswith("04"):
        pytest.skip(f"not a Verifiers 0.4 clause ({found}): {why}")


def require_taskset(config: Path, wanted: str) -> None:
    """Skip the test unless ``config`` names the taskset ``wanted``: a clause that only means
    something for one Verifiers generation's fixture (a 0.4 port) is not decided elsewhere."""
    found = tomllib.loads(config.read_text(encoding="utf-8"))["taskset"]["id"]
    if found != wanted:
        pytest.skip(
            f"a Verifiers 0.4 clause: it runs on {wanted}, and the fixture config here is {found}"
        )
