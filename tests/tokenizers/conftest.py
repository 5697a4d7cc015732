"""Fixtures for the offline tokenizer builder.

The built tokenizers are loaded by hub id, which needs ``offline_environ()`` in ``os.environ``
before huggingface_hub is first imported (it reads its cache path and offline flag at import).
The project's top-level conftest applies it at session start; when this folder runs on its own,
the ``setdefault`` below does the same. Values already present win, so both agree on one cache.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_testkit.tokenizers import BuildReport, build_all, offline_environ

for _name, _value in offline_environ().items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def offline_cache() -> BuildReport:
    """The tokenizers built (or reused) in the cache the environment points at."""
    return build_all()


@pytest.fixture(scope="session")
def offline_hub(offline_cache: BuildReport) -> Iterator[BuildReport]:
    """Like ``offline_cache``, and insists that huggingface_hub looks at that cache, offline."""
    from huggingface_hub import constants

    expected = offline_environ(offline_cache.cache_dir)
    same_cache = Path(constants.HF_HUB_CACHE) == Path(expected["HF_HUB_CACHE"])
    if not same_cache or not constants.HF_HUB_OFFLINE:
        pytest.fail(
            "huggingface_hub was imported before the offline environment was applied "
            f"(it uses {constants.HF_HUB_CACHE}, offline={constants.HF_HUB_OFFLINE}); apply "
            "offline_environ() to os.environ before anything imports transformers"
        )
    yield offline_cache


@pytest.fixture(scope="session")
def hub_tokenizer(offline_hub: BuildReport) -> Callable[[str], Any]:
    """``renderers.base.load_tokenizer`` by hub id, each tokenizer loaded once per session."""
    from renderers.base import load_tokenizer

    return functools.cache(load_tokenizer)


@pytest.fixture(scope="session")
def fresh_build(tmp_path_factory: pytest.TempPathFactory) -> BuildReport:
    """A complete build into an empty folder, shared read-only by the tests that inspect it."""
    return build_all(tmp_path_factory.mktemp("fresh-cache"))


@pytest.fixture
def clean_subprocess_env() -> dict[str, str]:
    """This process's environment without any Hugging Face or tiktoken setting."""
    prefixes = ("HF_", "HUGGINGFACE_", "TIKTOKEN_", "TRANSFORMERS_", "MILES_VERIFIERS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return env
