"""The project's own port of the Miles rollout-function contract.

Used where ``miles`` is not importable. To get whichever types a run should use (Miles' own
when installed), go through :func:`miles_verifiers.trainer.contract.compat.contract`.
"""

from miles_verifiers.trainer.contract.filters import (
    DynamicFilterOutput,
    MetricGatherer,
    call_dynamic_filter,
    check_no_aborted,
    check_reward_nonzero_std,
)
from miles_verifiers.trainer.contract.rollout import (
    RolloutFnBaseInput,
    RolloutFnConstructorInput,
    RolloutFnEvalInput,
    RolloutFnEvalOutput,
    RolloutFnInput,
    RolloutFnOutput,
    RolloutFnTrainInput,
    RolloutFnTrainOutput,
    call_rollout_fn,
)
from miles_verifiers.trainer.contract.sample import AdapterRef, RewardSpec, Sample

__all__ = [
    "AdapterRef",
    "DynamicFilterOutput",
    "MetricGatherer",
    "RewardSpec",
    "RolloutFnBaseInput",
    "RolloutFnConstructorInput",
    "RolloutFnEvalInput",
    "RolloutFnEvalOutput",
    "RolloutFnInput",
    "RolloutFnOutput",
    "RolloutFnTrainInput",
    "RolloutFnTrainOutput",
    "Sample",
    "call_dynamic_filter",
    "call_rollout_fn",
    "check_no_aborted",
    "check_reward_nonzero_std",
]
