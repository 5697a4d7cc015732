"""The engine-facing clauses under every production deployment, one cheap case per family.

Each case runs once per deployment: the real Rust sglang-router in front of two workers (what
Miles starts by default), a raw pass-through proxy in front of two workers (Miles' own router,
``--use-miles-router``) and a bare worker reached directly, each under the SGLang 0.5.16 fork
production Miles runs and under upstream 0.5.23. The deployment is part of each test id, so the
clause report lists every run with its deployment. Where the router binary cannot start, its
cases skip with the reason.

One more row runs the default deployment with the episodes in two local worker processes
(``MILES_VERIFIERS_EPISODE_WORKERS=2``): every clause must hold however many workers run them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.budget import SMOKE_EPISODE_WORKERS
from miles_verifiers_conformance.checks import (
    check_round_trip,
    check_sample,
    check_train_output,
    check_train_shape,
)
from miles_verifiers_conformance.conftest import DEPLOYMENTS
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.test_faults import is_replacement_error
from miles_verifiers_conformance.test_transport import judge_payloads
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import MilesWorld, identify, task_prompts, write_config
from miles_verifiers_testkit.engine import FaultPlan

IN_PROCESS = SMOKE_EPISODE_WORKERS  # the env decides: in the trainer unless it sets workers
TWO_LOCAL_WORKERS = "2-local-workers"
# Each deployment with episodes in the trainer process, plus the default one on two workers.
ROWS = [pytest.param(d, IN_PROCESS, id=d) for d in DEPLOYMENTS] + [
    pytest.param(DEPLOYMENTS[0], TWO_LOCAL_WORKERS, id=f"{DEPLOYMENTS[0]}+{TWO_LOCAL_WORKERS}")
]
matrix = pytest.mark.parametrize(("deployment_world", "episode_workers"), ROWS, indirect=True)


@pytest.fixture
def episode_workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the episodes run: read by the adapter from its settings variables at construction."""
    if request.param == TWO_LOCAL_WORKERS:
        monkeypatch.setenv("MILES_VERIFIERS_EPISODE_WORKERS", "2")
        monkeypatch.setenv("MILES_VERIFIERS_EPISODE_WORKER_BACKEND", "local")
    return str(request.param)


def deployment_args(world: MilesWorld, **overrides: object):
    # Miles runs its own (pass-through) router only with --use-miles-router.
    topology = world.deployment.partition("@")[0]
    return miles_args(use_miles_router=topology == "pass-through", **overrides)


@pytest.mark.clause("TRP-1", "TRP-2", "TRP-3", "TRP-4", "BR-3", "GRP-1", "CALL-2")
@matrix
def test_a_train_call_round_trips_in_this_deployment(
    deployment_world: MilesWorld, episode_workers: str, workdir: Path, verdicts: ClauseBook
) -> None:
    world = deployment_world
    world.engine.reset()
    args = deployment_args(
        world, rollout_batch_size=2, n_samples_per_prompt=2, rollout_max_context_len=900
    )
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 3})
    prompts = task_prompts(config)
    fn = world.start(args, config)

    output = world.train(fn, 0)

    with verdicts.check("CALL-2", hard=True):
        assert isinstance(output, world.contract.RolloutFnTrainOutput), type(output).__name__
    groups = check_train_shape(output, args, world.contract)  # precondition
    with verdicts.check("BR-3"):
        for position, group in enumerate(groups):
            for sample in group:
                check_sample(sample, where=f"group {position}")
    with verdicts.check("GRP-1"):
        for position, group in enumerate(groups):
            found = {identify(sample, prompts) for sample in group}
            assert len(found) == 1 and None not in found, (
                f"group {position} mixes tasks or has an unknown prompt: {found}"
            )
    calls = world.engine.calls()
    assert calls, f"no worker of {world.deployment} saw a request"
    judge_payloads(verdicts, calls, args)
    with verdicts.check("TRP-3"):
        for position, group in enumerate(groups):
            for sample in group:
                check_round_trip(sample, calls, where=f"group {position}")


@pytest.mark.clause("CALL-3")
@matrix
def test_one_instance_serves_train_then_eval_in_this_deployment(
    deployment_world: MilesWorld, episode_workers: str, workdir: Path
) -> None:
    world = deployment_world
    world.engine.reset()
    args = deployment_args(world, rollout_batch_size=1, n_samples_per_prompt=1)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 2}))
    check_train_output(world.train(fn, 0), args, world.contract)
    evaluation = world.evaluate(fn, 0)
    assert evaluation.data, f"evaluation through {world.deployment} returned no dataset"


@pytest.mark.clause("FLT-1")
@matrix
def test_an_engine_that_always_aborts_ends_with_the_replacement_error_in_this_deployment(
    deployment_world: MilesWorld, episode_workers: str, workdir: Path, replacement_error: type
) -> None:
    world = deployment_world
    world.engine.reset(faults=FaultPlan.always("abort"))
    args = deployment_args(world, rollout_batch_size=1)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 2}))
    try:
        with pytest.raises(Exception) as caught:
            world.train(fn, 0)
    finally:
        world.engine.reset()
    assert is_replacement_error(caught.value, replacement_error), repr(caught.value)
