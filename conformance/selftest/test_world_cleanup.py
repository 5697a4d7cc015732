"""The suite closes the rollout functions a test built, without keeping any of them alive."""

from __future__ import annotations

import gc
import weakref
from argparse import Namespace
from typing import Any

import pytest

from miles_verifiers_conformance.world import MilesWorld


class ClosableAdapter:
    closed = 0

    def __init__(self, constructor_input: Any) -> None:
        self.args = constructor_input.args

    def close(self) -> None:
        type(self).closed += 1


class AsyncCloseAdapter(ClosableAdapter):
    async def close(self) -> None:  # type: ignore[override]
        raise AssertionError("the suite must not call an async close()")


def offline_world(adapter: type, contract: Any) -> MilesWorld:
    """A world that builds functions but never calls them (no engine, no loop)."""
    return MilesWorld(adapter, contract, engine=None, host="127.0.0.1", port=1, loop=None)  # type: ignore[arg-type]


@pytest.mark.clause("SUITE-1")
def test_the_functions_a_test_built_are_closed_once_at_its_end(contract: Any) -> None:
    ClosableAdapter.closed = 0
    world = offline_world(ClosableAdapter, contract)
    kept = [world.construct(Namespace(), None) for _ in range(3)]

    world.close_started()
    world.close_started()

    assert ClosableAdapter.closed == len(kept)


@pytest.mark.clause("SUITE-1")
def test_tracking_built_functions_keeps_none_of_them_alive(contract: Any) -> None:
    world = offline_world(ClosableAdapter, contract)
    ref = weakref.ref(world.construct(Namespace(), None))

    gc.collect()

    assert ref() is None
    world.close_started()  # a collected function is skipped


@pytest.mark.clause("SUITE-1")
def test_an_async_close_is_left_to_the_adapter(contract: Any) -> None:
    world = offline_world(AsyncCloseAdapter, contract)
    kept = world.construct(Namespace(), None)

    world.close_started()

    assert kept is not None
