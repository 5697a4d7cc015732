"""Engine faults: a call returns a valid batch or the bounded-replacement error, never hangs.

The bounded-replacement error is the adapter's documented way to give up when too many
groups were dropped; ``--replacement-error module:Class`` names it (default: the reference
adapter's). An error caused by one (``raise ... from``) counts too. A call that ran past its
deadline never counts, whatever class is named: a hang is a failure even when the configured
class is as broad as ``builtins:Exception`` (the deadline error is an ``AssertionError``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import check_train_output
from miles_verifiers_conformance.miles_side import CallDeadlineExceeded, miles_args
from miles_verifiers_conformance.world import MilesWorld, write_config
from miles_verifiers_testkit.engine import FaultPlan


def is_replacement_error(error: BaseException, expected: type) -> bool:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not e for e in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    if any(isinstance(e, CallDeadlineExceeded) for e in chain):
        return False  # a hang, not a bounded give-up
    return any(isinstance(e, expected) for e in chain)


@st.composite
def fault_mixes(draw: st.DrawFn) -> FaultPlan:
    weights = [draw(st.integers(0, 4)) for _ in range(5)]
    total_rate = draw(st.sampled_from([0.1, 0.3, 0.6]))
    scale = total_rate / sum(weights) if sum(weights) else 0.0
    server_error, abort, delay, drop, malformed = (w * scale for w in weights)
    return FaultPlan(
        server_error=server_error,
        abort=abort,
        delay=delay,
        drop_connection=drop,
        malformed_body=malformed,
        seed=draw(st.integers(0, 10**6)),
        delay_s=0.05,
        error_status=draw(st.sampled_from([500, 502, 503])),
    )


@pytest.mark.clause("FLT-1")
@budget(ci=3)
@given(plan=fault_mixes(), batch=st.integers(1, 3), n=st.integers(1, 2), rollouts=st.integers(1, 2))
def test_every_call_returns_a_valid_batch_or_the_replacement_error(
    world: MilesWorld,
    workdir: Path,
    replacement_error: type,
    plan: FaultPlan,
    batch: int,
    n: int,
    rollouts: int,
) -> None:
    world.engine.reset(faults=plan)
    args = miles_args(rollout_batch_size=batch, n_samples_per_prompt=n)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 4}))

    for rollout_id in range(rollouts):
        try:
            output = world.train(fn, rollout_id)
        except CallDeadlineExceeded:
            raise
        except Exception as error:
            assert is_replacement_error(error, replacement_error), (
                f"under faults {plan} the call raised {type(error).__name__}: {error}"
            )
            return
        check_train_output(output, args, world.contract)


@pytest.mark.clause("FLT-2")
def test_a_taskset_whose_every_episode_fails_ends_with_the_replacement_error(
    world: MilesWorld, workdir: Path, replacement_error: type
) -> None:
    world.engine.reset()
    config = write_config(
        workdir,
        "mv_faulty",
        taskset={"num_tasks": 3, "fault_rate": 1.0, "faults": ["harness_error"]},
    )
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, config)

    with pytest.raises(Exception) as caught:
        world.train(fn, 0)

    assert not isinstance(caught.value, CallDeadlineExceeded), "the call hung"
    assert is_replacement_error(caught.value, replacement_error), (
        f"{type(caught.value).__name__}: {caught.value}"
    )


@pytest.mark.clause("FLT-1")
def test_an_engine_that_always_fails_ends_with_the_replacement_error(
    world: MilesWorld, workdir: Path, replacement_error: type
) -> None:
    # Aborts are not retried by a transport (unlike 5xx), so the budget runs out quickly.
    world.engine.reset(faults=FaultPlan.always("abort"))
    args = miles_args(rollout_batch_size=1)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 2}))

    with pytest.raises(Exception) as caught:
        world.train(fn, 0)

    assert is_replacement_error(caught.value, replacement_error), (
        f"{type(caught.value).__name__}: {caught.value}"
    )


CONTRACT_BREAKS = (
    "positive_logprob",
    "nan_logprob",
    "too_many_tokens",
    "out_of_vocab",
    "misaligned_logprobs",
)


@pytest.mark.clause("FLT-3")
@pytest.mark.parametrize("kind", CONTRACT_BREAKS)
def test_an_engine_that_always_breaks_the_contract_is_never_trained_on(
    world: MilesWorld, workdir: Path, replacement_error: type, kind: str
) -> None:
    world.engine.reset(faults=FaultPlan.always(kind))
    args = miles_args(rollout_batch_size=1)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 2}))

    with pytest.raises(Exception) as caught:
        world.train(fn, 0)

    assert not isinstance(caught.value, CallDeadlineExceeded), "the call hung"
    assert is_replacement_error(caught.value, replacement_error), (
        f"every answer had {kind}, yet the call raised {type(caught.value).__name__}: "
        f"{caught.value}"
    )


@pytest.mark.clause("FLT-3")
def test_no_returned_sample_carries_a_contract_breaking_answer(
    world: MilesWorld, workdir: Path, replacement_error: type
) -> None:
    world.engine.reset(faults=FaultPlan(**dict.fromkeys(CONTRACT_BREAKS, 0.06), seed=7))
    args = miles_args(rollout_batch_size=2, n_samples_per_prompt=2)
    fn = world.start(args, write_config(workdir, "mv_arith", taskset={"num_tasks": 6}))
    vocab_size = world.engine.model.vocab_size

    try:
        output = world.train(fn, 0)
    except CallDeadlineExceeded:
        raise
    except Exception as error:
        assert is_replacement_error(error, replacement_error), f"{type(error).__name__}: {error}"
        return
    groups = check_train_output(output, args, world.contract)
    for sample in (s for group in groups for s in group):
        logprobs = list(sample.rollout_log_probs)
        assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs), logprobs
        assert sample.response_length <= args.rollout_max_response_len
        assert all(0 <= token < vocab_size for token in sample.tokens)
