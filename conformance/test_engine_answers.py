"""What the adapter does with engine answers other than a clean 200: refusals and aborts.

The session engine has no LoRA adapter loaded, so it refuses (HTTP 400) every request that
names one: that is both how ``--lora-train-only`` is checked and the suite's 4xx answer.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.checks import status_name
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.world import MilesWorld, env_id, write_config
from miles_verifiers_testkit.engine import FaultPlan


def _call_ignoring_errors(call: Any) -> None:
    """Run a call for what it sends the engine; how it ends is another clause's business."""
    try:
        call()
    except Exception:
        pass


@pytest.mark.clause("TRP-5")
def test_lora_train_only_sends_no_lora_path(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    args = miles_args(
        rollout_batch_size=1, n_samples_per_prompt=1, lora_rank=8, lora_train_only=True
    )
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 2}))

    _call_ignoring_errors(lambda: world.train(fn, 0))

    bodies = [b for b in world.engine.bodies if isinstance(b, dict)]
    assert bodies, "the train call sent no /generate request"
    with_lora = [b["lora_path"] for b in bodies if b.get("lora_path") is not None]
    assert not with_lora, (
        f"{len(with_lora)} of {len(bodies)} requests carry lora_path={with_lora[0]!r} under "
        "--lora-train-only, where the engines serve no LoRA adapter"
    )


@pytest.mark.clause("FLT-4")
def test_a_refused_request_is_not_sent_again(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset()
    # LoRA served at rollout, but this engine has no adapter loaded: every request gets a 400.
    args = miles_args(n_samples_per_eval_prompt=1, eval_interval=1, lora_rank=8)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 1}))

    _call_ignoring_errors(lambda: world.evaluate(fn, 0))

    refused = Counter(
        json.dumps(c.request, sort_keys=True) for c in world.engine.calls() if 400 <= c.status < 500
    )
    if not refused:
        pytest.skip("the adapter sent no request the engine refused (it may refuse LoRA itself)")
    repeats = max(refused.values())
    assert repeats == 1, (
        f"a request the engine refused with a 4xx status was sent {repeats} times; a 4xx "
        "answer will not change on retry"
    )


@pytest.mark.clause("FLT-5")
def test_an_aborted_eval_rollout_reaches_miles_as_aborted(world: MilesWorld, workdir: Path) -> None:
    world.engine.reset(faults=FaultPlan.always("abort"))
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 2})
    args = miles_args(n_samples_per_eval_prompt=1, eval_interval=1)
    fn = world.start(args, config)

    output = world.evaluate(fn, 0)

    samples = output.data[env_id(config)]["samples"]
    statuses = [status_name(s) for s in samples]
    assert statuses == ["aborted", "aborted"], (
        "every eval rollout the engine aborted must come back as Sample.Status.ABORTED (one "
        f"per rollout), got {statuses}"
    )
