"""The selftests share one process their pytest runs are forked from; it ends with them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from miles_verifiers_conformance.selftest.runner import close_server


@pytest.fixture(autouse=True, scope="package")
def forking_server_ends_with_the_selftests() -> Iterator[None]:
    yield
    close_server()
