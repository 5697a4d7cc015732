"""The rollout-function inputs and outputs Miles passes and expects, ported field for field.

A stand-in for ``miles.rollout.base_types`` where Miles is not importable. Fields follow the
current contract; miles-rl 0.0.2 lacks ``weight_version``/``generate_state``/``hf_dir``, so
code that must run on both reads only ``rollout_id`` and ``evaluation`` (or uses ``getattr``).
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from miles_verifiers.trainer.contract.sample import Sample


@dataclass(frozen=True)
class RolloutFnConstructorInput:
    """All a rollout function's constructor receives."""

    args: Namespace
    data_source: Any


@dataclass(frozen=True)
class RolloutFnBaseInput:
    rollout_id: int

    @property
    def evaluation(self) -> bool:
        raise NotImplementedError("use RolloutFnTrainInput or RolloutFnEvalInput")


@dataclass(frozen=True)
class RolloutFnTrainInput(RolloutFnBaseInput):
    # The engines' weight version when the call was made; None before the first update.
    weight_version: int | None = None

    @property
    def evaluation(self) -> bool:
        return False


@dataclass(frozen=True)
class RolloutFnEvalInput(RolloutFnBaseInput):
    # Set only by snapshot/fleet evaluation.
    generate_state: Any | None = None
    weight_version: str | None = None
    hf_dir: str | None = None

    @property
    def evaluation(self) -> bool:
        return True


@dataclass
class RolloutFnTrainOutput:
    """``samples`` is a list of groups; deeper nesting is allowed and flattened by Miles."""

    samples: list[list[Sample]]
    metrics: dict[str, Any] | None = None


@dataclass
class RolloutFnEvalOutput:
    """``data[name] = {"rewards": [...], "truncated": [...], "samples": [...]}``."""

    data: dict[str, dict[str, Any]]
    metrics: dict[str, Any] | None = None


RolloutFnInput = RolloutFnTrainInput | RolloutFnEvalInput
RolloutFnOutput = RolloutFnTrainOutput | RolloutFnEvalOutput


def call_rollout_fn(
    fn: Callable[..., Any], *args: Any, evaluation: bool, **kwargs: Any
) -> RolloutFnOutput:
    """Call a legacy (plain function) rollout and wrap an untyped result the way Miles does."""
    output = fn(*args, **kwargs, evaluation=evaluation)
    if isinstance(output, (RolloutFnTrainOutput, RolloutFnEvalOutput)):
        return output
    if evaluation:
        return RolloutFnEvalOutput(data=output)
    return RolloutFnTrainOutput(samples=output)
