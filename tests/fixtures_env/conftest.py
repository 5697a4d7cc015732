"""Checks that the fixture taskset packages are installed before these tests import them."""

import pytest

from tests.fixture_tasksets import require_installed

require_installed()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests here run on asyncio, the loop Verifiers itself uses."""
    return "asyncio"
