"""The benchmarks' measurements under pytest-benchmark, which times each round for its own table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def measured_rounds(
    benchmark: Any, one_round: Callable[[], T], *, rounds: int = 1, warmup_rounds: int = 0
) -> list[T]:
    """What ``one_round`` returned in each round, warm-up rounds first (one call a round)."""
    results: list[T] = []
    benchmark.pedantic(
        lambda: results.append(one_round()),
        rounds=rounds,
        iterations=1,
        warmup_rounds=warmup_rounds,
    )
    return results
