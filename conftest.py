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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than there are cores (``PYTEST_XDIST_AUTO_NUM_WORKERS``
    still decides when set). Much of the suite waits on other processes (episode workers, tool
    servers, nested suite runs, deadlines), so a worker per core leaves the cores idle a
    fifth of the time (the README has the measurements)."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    if chosen.isdigit():
        return int(chosen)
    return (os.cpu_count() or 1) + 1
