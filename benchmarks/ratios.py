"""Ratios between two measured series, taken round by round.

Two series measured interleaved in one run (round i of A, then round i of B, on the same
machine under the same load) are compared by pairing round i with round i and taking the
median of those per-round ratios. A ratio of the two medians would pair A's quiet round
with B's busy one; on a shared machine that mixes load into the ratio.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")


def round_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """``numerators[i] / denominators[i]`` for every round; the series must pair one to one."""
    if len(numerators) != len(denominators):
        raise ValueError(
            f"per-round ratios need one round of each series per round, got {len(numerators)} "
            f"and {len(denominators)}; measure both series in the same rounds"
        )
    if any(d == 0 for d in denominators):
        raise ValueError("a round of the denominator series is 0; its ratio is undefined")
    return [float(n) / float(d) for n, d in zip(numerators, denominators, strict=True)]


def ratios_of(
    value: Callable[[R], float], rounds: Sequence[R], baseline: Sequence[R]
) -> list[float]:
    """:func:`round_ratios` of ``value`` of each round over ``value`` of the baseline's."""
    return round_ratios([value(r) for r in rounds], [value(r) for r in baseline])


def median_round_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """The median of the per-round ratios (not the ratio of the medians)."""
    ratios = round_ratios(numerators, denominators)
    if not ratios:
        raise ValueError("per-round ratios need at least one round of each series")
    return statistics.median(ratios)
