"""Verifiers 0.4's own stock pieces train exactly: its ``null`` harness and its ``user-sim`` env.

A user's 0.4 environment does not run the kit's in-process chat loop: Verifiers' stock harnesses
run Verifiers' chat program as a ``uv`` script (PEP 723) in the seat's runtime, one process per
rollout. These tests train through that path, in the worker venv (``uv`` installed there, as
``tox -e verifiers04`` does), on two config-only fixtures (fixtures/configs/v04):

- ``mv_arith_null``: mv-arith04's tasks with ``[agent.harness] id = "null"``;
- ``mv_arith_user_sim``: the same tasks in the stock ``user-sim`` env, both seats on ``null``;
  the modelled user is an untrainable seat the policy's engine plays, so its replies must never
  be trained (the scripted engine plays it as a user with nothing to ask: the assistant's reward
  is 0, and the check is of tokens, masks and log-probs, not of the answer).

First use costs what ``uv`` needs to build the chat program's environment: the program and its
dependencies (openai, mcp, httpx, ...) resolved against the package index ``uv`` is configured
with and installed into uv's cache (measured: about 2 s with a fresh cache on a fast index,
0.5 s with a warm one; 0.4 always asks the index, so a warm cache alone does not do). The
``chat_program_ready`` fixture pays that once per session, in the worker interpreter, through
Verifiers' own ``prepare_uv_script``, so no episode's deadline includes it; it fails naming what
is missing when ``uv`` or the index is not there. Where the fixture configs are 0.2's, these
tests skip.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers_conformance.checks import (
    check_round_trip,
    check_sample,
    check_train_shape,
    check_untrained_replies,
)
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import MilesWorld, require_taskset, write_config
from miles_verifiers_testkit.miles.configs import fixture_configs

TASKSET = "mv-arith04"
# The user seat's system prompt in mv_arith_user_sim.toml (its `persona`) opens with this.
USER_PERSONA = "You play a person who needs help with this"
WARM_TIMEOUT_S = 180

# Run by the worker interpreter: Verifiers' own preparation of its chat program (the script
# the null and bash harnesses run), as a seat's setup does it in the subprocess runtime.
_PREPARE = """
import asyncio
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes.subprocess import SubprocessConfig, SubprocessRuntime

async def prepare():
    runtime = SubprocessRuntime(SubprocessConfig())
    await runtime.start()
    try:
        print(await runtime.prepare_uv_script(CHAT_PROGRAM_SOURCE))
    finally:
        await runtime.stop()

asyncio.run(prepare())
"""


@pytest.fixture(scope="session")
def chat_program_ready() -> None:
    """Verifiers' chat program prepared once (uv's cache and its script environment warm)."""
    python = os.environ.get("MILES_VERIFIERS_EPISODE_WORKER_PYTHON")
    if not python:
        pytest.skip("the stock 0.4 harnesses run in a worker venv; none is set")
    if not (fixture_configs() / "mv_arith_null.toml").is_file():
        # Checked before preparing anything: a 0.2 worker venv has no 0.4 chat program.
        pytest.skip(f"a Verifiers 0.4 fixture: the configs here ({fixture_configs()}) are 0.2's")
    from miles_verifiers.protocol.procs import path_with_bin_first

    environ = {**os.environ, "PATH": path_with_bin_first(python, os.environ.get("PATH"))}
    try:
        done = subprocess.run(
            [python, "-c", _PREPARE],
            env=environ,
            capture_output=True,
            text=True,
            timeout=WARM_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"preparing Verifiers' chat program took over {WARM_TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.fail(
            "Verifiers' chat program (the null harness's) could not be prepared in the worker "
            f"venv {python}: it needs `uv` there (pip install uv) and the package index uv "
            f"uses.\n{done.stderr[-3000:]}"
        )


def stock_config(workdir: Path, name: str, **taskset: Any) -> Path:
    try:
        config = write_config(workdir, name, taskset=taskset)
    except FileNotFoundError as missing:
        pytest.skip(f"a Verifiers 0.4 fixture: {missing}")
    require_taskset(config, TASKSET)
    return config


@pytest.mark.clause("BR-3", "TRP-3")
def test_the_stock_null_harness_trains_samples_that_match_the_engine(
    world: MilesWorld, workdir: Path, verdicts: ClauseBook, chat_program_ready: None
) -> None:
    world.engine.reset()
    config = stock_config(workdir, "mv_arith_null", num_tasks=4)
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2, rollout_max_response_len=64)
    fn = world.start(args, config)

    groups = check_train_shape(world.train(fn, 0), args, world.contract)

    calls = world.engine.calls()
    assert len(calls) == 4, "one model turn per single-turn episode"
    for position, group in enumerate(groups):
        for sample in group:
            with verdicts.check("BR-3"):
                check_sample(sample, where=f"group {position}")
            with verdicts.check("TRP-3"):
                check_round_trip(sample, calls, where=f"group {position}")


@pytest.mark.clause("BR-3", "TRP-3", "BR-9")
def test_the_stock_user_sim_env_trains_the_assistant_and_never_the_modelled_user(
    world: MilesWorld,
    workdir: Path,
    verdicts: ClauseBook,
    chat_program_ready: None,
    qwen_tokenizer: Any,
) -> None:
    world.engine.reset()
    config = stock_config(workdir, "mv_arith_user_sim", num_tasks=2)
    # Each turn of either seat starts the chat program anew (about 1.5 CPU-seconds): one episode.
    args = miles_args(rollout_batch_size=1, n_samples_per_prompt=1, rollout_max_response_len=64)
    fn = world.start(args, config)

    groups = check_train_shape(world.train(fn, 0), args, world.contract)

    samples = [sample for group in groups for sample in group]
    calls = world.engine.calls()
    for sample in samples:
        with verdicts.check("BR-3"):
            check_sample(sample)
        with verdicts.check("TRP-3"):
            check_round_trip(sample, calls)
    with verdicts.check("BR-9"):
        check_untrained_replies(
            samples,
            calls,
            lambda call: USER_PERSONA in qwen_tokenizer.decode(call.input_ids),
            "turns of the modelled user",
        )
