"""Hypothesis budgets: a fast ``ci`` profile (the default), a ``long`` one and a ``smoke`` one.

Every example runs real Verifiers episodes against the loopback engine (tens of ms to
seconds each), so the CI budget is a handful of examples per property, generated
deterministically so CI never flakes; ``long`` (``--conformance-profile long`` or
``CONFORMANCE_PROFILE=long``, the ``conformance-long`` tox env) explores ten times more,
randomly, and shrinks failures to a minimal example. ``smoke`` runs each property's pinned
examples and one generated example, and the deployment matrix only its production-reference
row: every clause still gets a verdict, for the test command's runs of the same suite in other
deployments (split trainer, Verifiers 0.4 workers), where ``ci``'s budget has already explored
the properties and the deployments in-process.

Both are hypothesis profiles (``conformance-ci``, ``conformance-long``), registered here. A
property's budget is its profile with its own example count; the profile is not loaded as
hypothesis' process-wide default, so the unit tests' property tests keep theirs when both
run in one session.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE_ENV = "CONFORMANCE_PROFILE"
PROFILES = ("smoke", "ci", "long")
LONG_FACTOR = 10

_SHARED = settings(
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=(
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ),
)
# Shrinking re-runs episodes many times; CI reports the first failing example as is.
settings.register_profile(
    "conformance-ci", _SHARED, derandomize=True, phases=(Phase.explicit, Phase.generate)
)
settings.register_profile("conformance-smoke", settings.get_profile("conformance-ci"))
settings.register_profile(
    "conformance-long",
    _SHARED,
    derandomize=False,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
)


# Under smoke the deployment matrix runs only the production reference (an SGLang 0.5.16 fork
# behind the Rust router): each deployment clause is still decided, once, where the
# other-deployment runs add what they are for (another trainer side, another generation).
SMOKE_DEPLOYMENT = "sglang-router@0.5.16-fork"
# ... and of that row's variants, the one that leaves the episodes where the env puts them: the
# runs under smoke already run every episode in workers, so "+2 local workers" would repeat it.
SMOKE_EPISODE_WORKERS = "in-process"


def profile() -> str:
    return os.environ.get(PROFILE_ENV, "ci").strip().lower() or "ci"


def budget(ci: int, long: int | None = None) -> settings:
    """Settings for one property: ``ci`` examples by default, ``long`` under the long profile,
    one under the smoke profile."""
    chosen = profile()
    if chosen == "long":
        examples = long if long is not None else ci * LONG_FACTOR
    elif chosen == "smoke":
        examples = 1
    else:
        chosen, examples = "ci", ci
    return settings(settings.get_profile(f"conformance-{chosen}"), max_examples=examples)
