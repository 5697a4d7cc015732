"""Session set-up shared by tests/, conformance/ and benchmarks/.

The exact tokenizers are rebuilt (or reused, by content hash) before anything imports
huggingface_hub or transformers, because both read their cache and offline settings at
import time. Every test then loads ``Qwen/Qwen3-0.6B`` and friends by hub id, offline.
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    from miles_verifiers_testkit.tokenizers import build_all, offline_environ

    environ = offline_environ()
    os.environ.update(environ)
    build_all()

