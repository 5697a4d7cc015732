"""Dynamic-sampling filter types and the two built-in filters, ported from the contract.

A stand-in for ``miles.rollout.filter_hub`` where Miles is not importable. A filter is called
once per group as ``fn(args, group)`` and returns a :class:`DynamicFilterOutput` (or anything
truthy/falsy, which is read as ``keep``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from miles_verifiers.trainer.contract.sample import Sample

DROP_METRIC_PREFIX = "rollout/dynamic_filter/drop_"

# Groups whose rewards spread less than this are "all the same" to the zero-std filter.
ZERO_STD_THRESHOLD = 1e-8


@dataclass
class DynamicFilterOutput:
    keep: bool
    reason: str | None = None


def call_dynamic_filter(
    fn: Callable[..., Any] | None, *args: Any, **kwargs: Any
) -> DynamicFilterOutput:
    """Run a filter; no filter keeps everything, a bare return value is read as ``keep``."""
    if fn is None:
        return DynamicFilterOutput(keep=True)
    output = fn(*args, **kwargs)
    if isinstance(output, DynamicFilterOutput):
        return output
    return DynamicFilterOutput(keep=output)


class MetricGatherer:
    """Counts drops per reason; a reason-less drop is not counted."""

    def __init__(self) -> None:
        self._drops: Counter[str] = Counter()

    def on_dynamic_filter_drop(self, reason: str | None) -> None:
        if reason:
            self._drops[reason] += 1

    def collect(self) -> dict[str, int]:
        return {f"{DROP_METRIC_PREFIX}{reason}": count for reason, count in self._drops.items()}


def _flatten_once(samples: Iterable[Any]) -> Iterator[Sample]:
    for item in samples:
        if isinstance(item, list):
            yield from item
        else:
            yield item


def _sample_std(values: list[float]) -> float:
    # Bessel-corrected, like torch.Tensor.std(); a single value has no spread to measure.
    if len(values) < 2:
        return math.nan
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def check_reward_nonzero_std(args: Any, samples: list[Any], **kwargs: Any) -> DynamicFilterOutput:
    """Drop a group whose rewards are all equal: it carries no GRPO advantage."""
    rewards = [float(s.get_reward_value(args)) for s in _flatten_once(samples)]
    keep = _sample_std(rewards) > ZERO_STD_THRESHOLD
    reason = None if keep else f"zero_std_{round(rewards[0], 1)}"
    return DynamicFilterOutput(keep=keep, reason=reason)


def check_no_aborted(args: Any, samples: list[Any], **kwargs: Any) -> DynamicFilterOutput:
    """Drop a group when any of its samples was aborted by the engine."""
    # Compared by value so Miles' own Sample (a different Status enum) passes through too.
    aborted = Sample.Status.ABORTED.value
    if any(getattr(s.status, "value", s.status) == aborted for s in _flatten_once(samples)):
        return DynamicFilterOutput(keep=False, reason="group_has_aborted")
    return DynamicFilterOutput(keep=True)
