"""Hypothesis budgets: a fast ``ci`` profile (the default) and a ``long`` one.

Every example runs real Verifiers episodes against the loopback engine (tens of ms to
seconds each), so the CI budget is a handful of examples per property, generated
deterministically so CI never flakes; ``long`` (``--conformance-profile long`` or
``CONFORMANCE_PROFILE=long``, the ``conformance-long`` tox env) explores ten times more,
randomly, and shrinks failures to a minimal example.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE_ENV = "CONFORMANCE_PROFILE"


def profile() -> str:
    return os.environ.get(PROFILE_ENV, "ci").strip().lower() or "ci"


def budget(ci: int, long: int | None = None) -> settings:
    """Settings for one property: ``ci`` examples by default, ``long`` under the long profile."""
    is_long = profile() == "long"
    return settings(
        max_examples=(long if long is not None else ci * 10) if is_long else ci,
        deadline=None,
        derandomize=not is_long,
        database=None,
        # Shrinking re-runs episodes many times; CI reports the first failing example as is.
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
        if is_long
        else (Phase.explicit, Phase.generate),
        report_multiple_bugs=False,
        suppress_health_check=(
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ),
    )
