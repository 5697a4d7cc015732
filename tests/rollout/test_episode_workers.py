"""Episode workers (``MILES_VERIFIERS_EPISODE_WORKERS`` > 1, local processes): the same
samples as one process, every evaluation task, reuse across calls, one pre-imported template
for the describe step and every worker, and no process left behind (orphans included). Lost
workers: ``test_episode_worker_kills.py``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import pytest

from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from miles_verifiers_testkit.engine import LatencyModel
from tests.rollout.rollout_support import (
    MilesLoop,
    Rollouts,
    fingerprint,
    flat,
    miles_args,
    train_fingerprints,
    train_input,
)
from tests.workers.processes import (
    TEMPLATE_MODULE,
    descendants,
    episode_workers,
    leftovers,
    wait_until,
    watch_for_orphans,
)

pytestmark = pytest.mark.slow


def workers(count: int = 2, **more: Any) -> AdapterSettings:
    return AdapterSettings(episode_workers=count, **more)


def worker_pids() -> list[int]:
    return episode_workers()


def deterministic_args(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "rollout_batch_size": 2,
        "over_sampling_batch_size": 3,
        "sglang_enable_deterministic_inference": True,
        "eval_interval": 1,
        "n_samples_per_eval_prompt": 2,
    }
    values.update(overrides)
    return miles_args(**values)


@pytest.fixture(autouse=True, scope="module")
def orphans_seen() -> None:
    watch_for_orphans()


@pytest.fixture
def close_after() -> Any:
    made: list[VerifiersRolloutFn] = []
    yield made.append
    for fn in made:
        fn.close()


def alone_then_on_two_workers(
    rollouts: Rollouts, close_after: Any, observe: Callable[[Any], Any]
) -> tuple[Any, Any]:
    """What ``observe`` sees of mv-arith (5 tasks, deterministic arguments) run in this
    process, then of the same run on two workers."""
    config = rollouts.config("mv_arith", taskset={"num_tasks": 5})
    alone = observe(rollouts.build(deterministic_args(), config))
    fn = rollouts.build(deterministic_args(), config, workers(2))
    close_after(fn)
    return alone, observe(fn)


def test_two_workers_train_the_same_samples_as_one_process(
    rollouts: Rollouts,
    close_after: Any,
) -> None:
    expected, got = alone_then_on_two_workers(
        rollouts, close_after, lambda fn: train_fingerprints(fn, rollouts.loop)
    )

    assert got == expected


def test_the_describe_step_and_every_worker_are_forked_from_one_template(
    rollouts: Rollouts,
    close_after: Any,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 4})

    fn = rollouts.build(deterministic_args(), config, workers(2))
    close_after(fn)
    after_construction = [p.pid for p in descendants() if TEMPLATE_MODULE in p.cmdline]
    rollouts.train(fn)
    parents = {p.ppid for p in descendants() if p.pid in worker_pids()}
    fn.close()

    # Construction started the template (for its describe step) and the workers came from it.
    assert len(after_construction) == 1
    assert parents == set(after_construction)
    assert len(worker_pids()) == 0
    assert wait_until(lambda: not leftovers(), timeout_s=10), leftovers()


def test_workers_render_with_the_tokenizers_the_template_loaded_at_construction(
    rollouts: Rollouts,
    close_after: Any,
) -> None:
    from huggingface_hub import snapshot_download

    # A local checkpoint (named as in the HF cache, so its renderer is known) that is gone
    # once construction is over: a worker that loaded its own tokenizer would fail.
    checkpoint = rollouts.folder / "models--Qwen--Qwen3-0.6B" / "local"
    shutil.copytree(snapshot_download("Qwen/Qwen3-0.6B", local_files_only=True), checkpoint)
    config = rollouts.config("mv_arith", taskset={"num_tasks": 2})
    fn = rollouts.build(deterministic_args(hf_checkpoint=str(checkpoint)), config, workers(2))
    close_after(fn)
    shutil.rmtree(checkpoint)

    samples = flat(rollouts.train(fn).samples)

    assert len(samples) == 4
    assert all(s.tokens for s in samples)


def test_two_workers_evaluate_every_task_in_task_order(
    rollouts: Rollouts,
    close_after: Any,
) -> None:
    expected, entry = alone_then_on_two_workers(
        rollouts, close_after, lambda fn: rollouts.evaluate(fn).data["mv-arith"]
    )

    assert [s.metadata["verifiers"]["task_index"] for s in entry["samples"]] == [
        i for i in range(5) for _ in range(2)
    ]
    assert [fingerprint(s) for s in entry["samples"]] == [
        fingerprint(s) for s in expected["samples"]
    ]
    assert entry["rewards"] == expected["rewards"]


def test_a_second_call_reuses_the_workers_and_close_leaves_no_process(
    rollouts: Rollouts,
) -> None:
    config = rollouts.config("mv_arith", taskset={"num_tasks": 4})
    fn = rollouts.build(deterministic_args(), config, workers(2))
    assert worker_pids() == []  # workers start at the first call, not at construction

    rollouts.train(fn)
    first = sorted(worker_pids())
    rollouts.evaluate(fn)
    rollouts.train(fn, 1)
    second = sorted(worker_pids())
    fn.close()

    assert len(first) == 2
    assert second == first
    assert wait_until(lambda: not leftovers(), timeout_s=10), leftovers()


def test_cancelling_a_call_aborts_every_workers_requests_and_close_leaves_no_process(
    rollouts: Rollouts,
) -> None:
    import asyncio

    config = rollouts.config("mv_arith", taskset={"num_tasks": 4})
    fn = rollouts.build(deterministic_args(), config, workers(2))
    # Every request hangs until aborted.
    rollouts.engine.set_latency(LatencyModel(decode_s_per_token=5.0))

    async def start_then_cancel() -> bool:
        task = asyncio.get_running_loop().create_task(fn(train_input(0)))
        while rollouts.engine.in_flight < 4:
            await asyncio.sleep(0.02)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    cancelled = rollouts.loop.run(start_then_cancel(), timeout_s=120)
    fn.close()

    assert cancelled
    # A request resent after a dropped connection can start after the abort; the engine
    # then ends it when its worker's connection closes.
    assert wait_until(lambda: rollouts.engine.in_flight == 0, timeout_s=10), (
        rollouts.engine.in_flight
    )
    prefixes = {rid.split("-", 1)[0] for rid in rollouts.engine.abort_calls}
    assert {p.rsplit("_w", 1)[1][:1] for p in prefixes if "_w" in p} == {"0", "1"}
    assert wait_until(lambda: not leftovers(), timeout_s=10), leftovers()


def test_a_worker_exits_when_its_parent_closes_its_input(miles_loop: MilesLoop) -> None:
    from miles_verifiers.trainer.backends.local import LocalWorker, WorkerTemplate

    template = WorkerTemplate()

    async def start_then_hang_up() -> list[int]:
        worker = await LocalWorker.start("orphan-check", template)
        workers = episode_workers()
        worker._pipes.stdin.close()
        return workers

    try:
        workers = miles_loop.run(start_then_hang_up(), timeout_s=60)
        assert wait_until(lambda: not episode_workers(), timeout_s=30), episode_workers()
    finally:
        template.close()
    assert len(workers) == 1
    assert wait_until(lambda: not leftovers(), timeout_s=10), leftovers()


def test_two_ray_workers_train_the_same_samples_as_one_process(
    rollouts: Rollouts,
) -> None:
    ray = pytest.importorskip("ray")
    config = rollouts.config("mv_arith", taskset={"num_tasks": 4})
    alone = rollouts.build(deterministic_args(), config)
    expected = [fingerprint(s) for s in flat(rollouts.train(alone).samples)]
    started_ray = not ray.is_initialized()

    fn = rollouts.build(deterministic_args(), config, workers(2, episode_worker_backend="ray"))
    try:
        got = [fingerprint(s) for s in flat(rollouts.train(fn).samples)]
        actors = fn._workers.links if fn._workers is not None else []
    finally:
        fn.close()
        if started_ray:
            ray.shutdown()

    assert got == expected
    assert len(actors) == 2 and all("actor" in a.description for a in actors)
