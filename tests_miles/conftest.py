"""Session set-up for the tests that run the adapter inside real Miles (``tox -e miles``).

The loopback engine, the Miles loop and ``VERIFIERS_CONFIG`` handling are the fixtures of
``tests/rollout/conftest.py``, reused as they are.
"""

from __future__ import annotations

import os

import pytest

from miles_verifiers_testkit.tokenizers import offline_environ

# Hugging Face reads its offline settings at import, and importing Miles imports it.
os.environ.update(offline_environ())
# Miles' own types must be the contract here, never the port.
os.environ["MILES_VERIFIERS_CONTRACT"] = "miles"

from tests.rollout.conftest import (  # noqa: F401  (fixtures, reused)
    engine,
    engine_port,
    engine_server,
    miles_loop,
    use_config,
)
from tests_miles.miles_env import (
    MilesSourceError,
    install_sglang_shim,
    miles_commit,
    miles_source,
)

# Never green by accident: without a named checkout nothing here may run.
try:
    MILES_SOURCE = miles_source()
except MilesSourceError as error:
    raise pytest.UsageError(str(error)) from None
install_sglang_shim()


def pytest_report_header(config: pytest.Config) -> str:
    return f"Miles under test: {MILES_SOURCE} at commit {miles_commit(MILES_SOURCE)}"
