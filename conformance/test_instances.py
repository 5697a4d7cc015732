"""One rollout function over a run: calls that overlap, and the legacy entry point's instances."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import inspect
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.checks import TRAINABLE_STATUSES, check_train_output, status_name
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.test_eval import check_eval_entry
from miles_verifiers_conformance.world import MilesWorld, identify, load_task_data, write_config
from miles_verifiers_testkit.engine import FaultPlan, LatencyModel

LEGACY_FUNCTION = "generate_rollout"


@pytest.mark.clause("CALL-5")
@pytest.mark.parametrize("taskset", ["mv_arith", "mv_tools"])
def test_overlapping_train_and_eval_calls_keep_their_own_samples(
    world: MilesWorld, workdir: Path, taskset: str
) -> None:
    # Every answer takes a while to decode, so the two calls are in flight together; the train
    # call over-samples, so it ends with tasks it started and no longer needs. The engine
    # finishes each burst of requests last arrival first, so which task the train call keeps
    # cannot depend on which episode happened to finish first.
    world.engine.reset(
        latency=LatencyModel(decode_s_per_token=0.004),
        faults=FaultPlan(completion_order="reversed"),
    )
    # Two tasks are enough for both points. On mv-tools every rollout starts a tool server
    # (seconds of CPU), so one sample per prompt there; mv-arith keeps groups of two, where a
    # group holding the other call's samples would show.
    config = write_config(workdir, taskset, taskset={"num_tasks": 2})
    prompts = [str(d.prompt) for d in load_task_data(config)]
    samples = 1 if taskset == "mv_tools" else 2
    args = miles_args(
        rollout_batch_size=1,
        over_sampling_batch_size=2,
        n_samples_per_prompt=samples,
        n_samples_per_eval_prompt=samples,
        eval_interval=1,
    )
    fn = world.start(args, config)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="overlap") as pool:
        eval_call = pool.submit(world.evaluate, fn, 0)
        train_call = pool.submit(world.train, fn, 0)
        train, evaluation = train_call.result(), eval_call.result()

    groups = check_train_output(train, args, world.contract)
    assert [identify(group[0], prompts) for group in groups] == prompts[:1], (
        "the overlapping train call did not train on the first task"
    )
    entry = check_eval_entry(evaluation, world, config, expected_traces=samples * len(prompts))
    statuses = [status_name(s) for s in entry["samples"]]
    assert set(statuses) <= TRAINABLE_STATUSES, (
        f"eval rollouts failed while a train call overlapped them: {statuses}"
    )
    assert {id(s) for g in groups for s in g}.isdisjoint(id(s) for s in entry["samples"]), (
        "the train and eval outputs share sample objects"
    )


def _legacy_function(adapter: Any) -> Any | None:
    """The legacy entry point: the adapter itself, or its module's generate_rollout."""
    if not inspect.isclass(adapter):
        return adapter
    function = getattr(importlib.import_module(adapter.__module__), LEGACY_FUNCTION, None)
    return function if callable(function) else None


def _run_once(world: MilesWorld, config: Path) -> weakref.ref[Any]:
    """One legacy call with args of its own; a weak reference to those args."""
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=1)
    fn = world.start(args, config)
    try:
        world.train(fn, 0)
    except Exception:
        pass
    return weakref.ref(args)


def _alive(refs: list[weakref.ref[Any]]) -> int:
    gc.collect()
    return sum(ref() is not None for ref in refs)


@pytest.mark.clause("CALL-4")
def test_the_legacy_entry_point_keeps_a_bounded_number_of_instances(
    world: MilesWorld, workdir: Path, adapter_class: Any
) -> None:
    legacy = _legacy_function(adapter_class)
    if legacy is None:
        pytest.skip(f"the adapter's module has no legacy {LEGACY_FUNCTION} function")
    legacy_world = dataclasses.replace(world, adapter_class=legacy)
    world.engine.reset()
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 1})
    runs = 5

    first = [_run_once(legacy_world, config) for _ in range(runs)]
    kept_after_first = _alive(first)
    second = [_run_once(legacy_world, config) for _ in range(runs)]
    kept_after_second = _alive(first + second)

    assert kept_after_second <= kept_after_first, (
        f"the legacy entry point keeps the args of every run it has seen alive: {kept_after_first} "
        f"after {runs} finished runs, {kept_after_second} after {2 * runs}"
    )
