"""The fixture harness's model clients: one connection pool per event loop, shared by the
rollouts running on it, each rollout still reaching its own interception session."""

import asyncio
import gc
import threading
import warnings

import pytest
import verifiers.v1 as vf

from miles_verifiers_testkit.harness.clients import ModelClients, PoolCounts
from miles_verifiers_testkit.miles import MilesLoop
from tests.fixtures_env.fixture_env_support import ScriptedClient, load_config, model_context

ENDPOINT = "http://127.0.0.1:9/v1"  # never connected to: these tests only lease


class GatheringClient(ScriptedClient):
    """Answers only once ``expected`` requests are in flight, so those rollouts overlap."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self._waiting = expected
        self._all_in = asyncio.Event()

    async def get_response(self, *args, **kwargs):
        self._waiting -= 1
        if self._waiting <= 0:
            self._all_in.set()
        await asyncio.wait_for(self._all_in.wait(), timeout=60)
        return await super().get_response(*args, **kwargs)


async def _overlapping_episode(n: int) -> tuple[vf.Environment, list[vf.Trace]]:
    env = vf.Environment(load_config("mv_arith"))
    task = env.taskset.load()[0]
    async with env.serving():
        episode = env.episode(task, model_context(GatheringClient(n)), n=n)
        traces = await asyncio.wait_for(episode.run(), timeout=120)
    return env, traces


@pytest.mark.anyio
@pytest.mark.slow
async def test_overlapping_rollouts_share_one_pool_and_each_reach_their_own_session():
    env, traces = await _overlapping_episode(4)
    assert env.harness.model_clients.counts().opened == 1
    # The interception server routes by each rollout's secret: one turn lands in each trace.
    assert [t.num_turns for t in traces] == [1, 1, 1, 1]
    assert all(t.error is None and t.rewards == {"correct": 1.0} for t in traces)


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_pool_is_closed_when_the_last_rollout_ends_without_resource_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env, _ = await _overlapping_episode(2)
        gc.collect()
    counts = env.harness.model_clients.counts()
    assert (counts.opened, counts.closed, counts.open_now) == (1, 1, 0)
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def _clients() -> ModelClients:
    return ModelClients(timeout_s=5.0)


def test_a_client_given_back_is_reused_by_the_next_rollout_with_its_own_secret():
    clients = _clients()

    async def call():
        async with clients.lease(ENDPOINT, "holder"):  # keeps the set open, as a call does
            async with clients.lease(ENDPOINT, "a") as first:
                pass
            async with clients.lease(ENDPOINT, "b") as second:
                pass
        return first, second

    first, second = asyncio.run(call())
    assert first.client is second.client
    assert (first.secret, second.secret) == ("a", "b")
    assert clients.counts() == PoolCounts(opened=1, closed=1, open_now=0, clients_made=2)


def test_rollouts_running_at_once_get_a_client_each():
    clients = _clients()

    async def two_at_once():
        async with clients.lease(ENDPOINT, "a") as first, clients.lease(ENDPOINT, "b") as second:
            return first.client, second.client

    first, second = asyncio.run(two_at_once())
    assert first is not second


def test_every_client_is_closed_when_the_last_rollout_on_the_loop_ends():
    clients = _clients()

    async def two_at_once():
        async with clients.lease(ENDPOINT, "a") as first, clients.lease(ENDPOINT, "b") as second:
            assert not first.client.is_closed()
            return first.client, second.client

    made = asyncio.run(two_at_once())
    assert all(client.is_closed() for client in made)
    assert clients.counts() == PoolCounts(opened=1, closed=1, open_now=0, clients_made=2)


def test_a_pool_serves_only_the_loop_it_was_opened_on():
    clients = _clients()
    background = MilesLoop()  # Miles' background loop, on its own thread
    leased, release = threading.Event(), threading.Event()

    async def hold():
        async with clients.lease(ENDPOINT, "miles") as model:
            leased.set()
            await asyncio.to_thread(release.wait, 30)
            return model.client

    async def lease_once():
        async with clients.lease(ENDPOINT, "test") as model:
            return model.client

    try:
        held = asyncio.run_coroutine_threadsafe(hold(), background.loop)
        assert leased.wait(30)
        on_test_loop = asyncio.run(lease_once())
        release.set()
        on_miles_loop = held.result(30)
    finally:
        release.set()
        background.close()
    assert on_test_loop is not on_miles_loop
    assert on_test_loop.is_closed() and on_miles_loop.is_closed()
    assert clients.counts() == PoolCounts(opened=2, closed=2, open_now=0, clients_made=2)


def test_a_cancelled_rollout_still_closes_the_pool():
    clients = _clients()
    seen = []

    async def cancelled_lease():
        async def rollout():
            async with clients.lease(ENDPOINT, "a") as model:
                seen.append(model.client)
                await asyncio.sleep(3600)

        task = asyncio.create_task(rollout())
        while not seen:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_lease())
    assert seen[0].is_closed()
    assert clients.counts() == PoolCounts(opened=1, closed=1, open_now=0, clients_made=1)


def test_a_pool_opened_after_the_last_one_closed_is_a_new_one():
    clients = _clients()

    async def lease_once():
        async with clients.lease(ENDPOINT, "a") as model:
            return model.client

    first, second = asyncio.run(lease_once()), asyncio.run(lease_once())
    assert first is not second
    assert clients.counts() == PoolCounts(opened=2, closed=2, open_now=0, clients_made=2)
