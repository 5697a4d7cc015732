"""The hook paths the suite hands an adapter are ones Miles itself could load."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from miles_verifiers_conformance.hooks import HOOK_PATHS


def load_as_miles_does(path: str) -> Any:
    """Miles' loader for hook flags: the module is everything before the last dot."""
    module_name, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


@pytest.mark.clause("SUITE-1")
@pytest.mark.parametrize("path", HOOK_PATHS)
def test_every_hook_path_the_suite_passes_loads_the_way_miles_loads_it(path: str) -> None:
    assert callable(load_as_miles_does(path)), path
